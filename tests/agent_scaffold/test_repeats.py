"""`RepeatCounter` (pure): what counts as a repeat of the previous turn."""

from agent_scaffold.actions import parse_action
from agent_scaffold.repeats import RepeatCounter

LS = parse_action("List.\n```bash\nls\n```")


def test_the_same_action_answered_the_same_is_a_repeat_whatever_the_thought():
    c = RepeatCounter()
    assert c.see(LS, "a.py") == 0
    assert c.see(parse_action("Again, list.\n```bash\nls\n```"), "a.py") == 1
    assert c.see(LS, "a.py") == 2 and c.run == 2


def test_another_answer_another_action_or_a_malformed_reply_starts_over():
    c = RepeatCounter()
    c.see(LS, "a.py")
    assert c.see(LS, "a.py b.py") == 0  # the sandbox changed in between
    assert c.see(parse_action("```bash\nls -a\n```"), "a.py b.py") == 0
    c.see(LS, "a.py b.py")
    c.malformed()
    assert c.see(LS, "a.py b.py") == 0 and c.run == 0


def test_cut_turn_finds_where_a_limit_would_have_ended_an_episode():
    from agent_scaffold.repeats import cut_turn

    head = [{"role": "system", "content": "s"}, {"role": "user", "content": "task"}]
    turn = [{"role": "assistant", "content": "```bash\nls\n```"}, {"role": "user", "content": "a.py"}]
    bad = [{"role": "assistant", "content": "no block"}, {"role": "user", "content": "Format error"}]
    assert cut_turn(head + turn * 4, 2) == 2 and cut_turn(head + turn * 4, 3) == 3
    assert cut_turn(head + turn * 4, 4) is None
    assert cut_turn(head + turn * 2 + bad + turn * 2, 2) is None  # the malformed reply breaks the run
    assert cut_turn(head + turn * 2 + turn[:1], 2) is None  # the last reply, unanswered, is no cut
