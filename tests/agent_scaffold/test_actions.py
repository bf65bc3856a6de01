import pytest

from agent_scaffold.actions import Action, FormatError, parse_action


def test_bash_block_with_reasoning_around():
    a = parse_action("Let me look.\n```bash\nls -la\ngrep -n x f.py\n```\nthen I'll see")
    assert a == Action("bash", command="ls -la\ngrep -n x f.py")


def test_submit_block():
    assert parse_action("Done.\n```submit\n```").tool == "submit"


def test_edit_commands():
    assert parse_action("```edit\nview a.py 3 9\n```") == Action("edit", "view", "a.py", (3, 9))
    assert parse_action("```edit\nview a.py\n```") == Action("edit", "view", "a.py", ())
    # a grep hit's prefix, copied as is
    assert parse_action("```edit\nview src/a.py:13:\n```") == Action("edit", "view", "src/a.py", (13,))
    assert parse_action("```edit\nview src/a.py:13\n```") == Action("edit", "view", "src/a.py", (13,))
    a = parse_action("```edit\nstr_replace src/a.py:13:\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n```")
    assert (a.command, a.path, a.args, a.old, a.body) == ("str_replace", "src/a.py", (13,), "x\n", "y\n")
    assert parse_action("```edit\ncreate new.py\nx = 1\n```") == Action("edit", "create", "new.py", body="x = 1\n")
    assert parse_action("```edit\ninsert a.py 0\n# top\n```") == Action("edit", "insert", "a.py", (0,), body="# top\n")
    a = parse_action("```edit\nstr_replace a.py\n<<<<<<< SEARCH\n    return a - b\n=======\n    return a + b\n"
                     ">>>>>>> REPLACE\n```")
    assert (a.command, a.old, a.body) == ("str_replace", "    return a - b\n", "    return a + b\n")


@pytest.mark.parametrize("text, needle", [
    ("I think the bug is in foo.", "No action found"),
    ("```python\nprint(1)\n```", "found a ```python block"),
    ("```bash\nls\n```\n```bash\npwd\n```", "Found 2 action blocks"),
    ("```bash\n\n```", "empty"),
    ("```edit\nrewrite a.py\n```", "must start with one of"),
    ("```edit\nview\n```", "needs a path"),
    ("```edit\ninsert a.py\nx\n```", "needs one line number"),
    ("```edit\nview a.py x\n```", "expected line numbers"),
    ("```edit\nstr_replace a.py\nold\nnew\n```", "<<<<<<< SEARCH"),
    ("```edit\nstr_replace a.py 3\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n```", "`str_replace PATH:LINE`"),
    ("<think>\nI could run\n```bash\nls\n```\nfirst", "section is not closed"),
    ("<think>\n```bash\nls\n```\n</think>\n\nNothing to do yet.", "No action found"),
])
def test_malformed_actions_explain_the_format(text, needle):
    with pytest.raises(FormatError) as info:
        parse_action(text)
    assert needle in str(info.value)


def test_a_reasoning_models_thought_is_not_its_action():
    """Qwen3 opens a reply with <think>...</think>: a block inside it is a thought, the one after it the action."""
    text = "<think>\nMaybe ```bash\nrm -rf /\n``` no:\n```bash\nls\n```\n</think>\n\n```bash\npytest -x\n```"
    assert parse_action(text) == Action("bash", command="pytest -x")
    # Only a reply that opens with it: a command that greps for the tag is an ordinary action.
    assert parse_action("```bash\ngrep -n '</think>' log.txt\n```").command == "grep -n '</think>' log.txt"
