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
