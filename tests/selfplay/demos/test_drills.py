"""Repair drills: the one-line mutants they are drawn from, the conversation (the tool's answer listing the
mutated line first, the expert's edit putting the original back), the token-exact sample with loss on the
edit turn only, and the refusal of held-out repos. The drill's edit is replayed on the mutant with the real
editor, so a drill whose edit would not repair its line fails here."""

from __future__ import annotations

import random

import pytest

from agent_scaffold.actions import parse_action
from agent_scaffold.editor import Editor
from agent_scaffold.localize import observation
from agent_scaffold.mutation_operators import OPERATORS_BY_NAME
from selfplay.demos.drills import DRILL_OPERATORS, drill_messages, drill_sample, line_drills, repo_drills
from tests.agent_scaffold.local_sandbox import LocalSandbox

SOURCE = '''def natural_list(items):
    item_list = [str(item) for item in items]
    if not item_list and items:
        return ""
    if len(item_list) == 1:
        return item_list[0]
    return ", ".join(item_list[:-1]) + " and " + item_list[-1]


def scale(x, y):
    return pow(x, 2) + y * 3
'''


@pytest.mark.parametrize("name", DRILL_OPERATORS)
def test_every_drill_changes_one_line_that_its_original_restores(name):
    drills = list(line_drills("lists.py", SOURCE, OPERATORS_BY_NAME[name], random.Random(0)))
    assert drills, name
    lines = SOURCE.splitlines()
    assert len({(d.line, d.buggy) for d in drills}) == len(drills)  # one drill per site
    for d in drills:
        assert d.original == lines[d.line - 1] and d.buggy != d.original
        assert d.operator == name
        assert all(n != d.line and code for n, code in d.neighbours)


def test_a_drill_lists_its_line_first_and_its_edit_puts_the_original_back(tmp_path):
    flip = OPERATORS_BY_NAME["flip_comparison"]
    drill = next(d for d in line_drills("lists.py", SOURCE, flip, random.Random(1)) if d.line == 5)
    assert drill.buggy.strip() == "if len(item_list) != 1:"
    system, user, assistant = drill_messages(drill, random.Random(2), "SYSTEM")
    assert system == {"role": "system", "content": "SYSTEM"}
    first = user["content"].split("\n")[1]
    assert first.startswith("lists.py:5  ") and first.endswith("  if len(item_list) != 1:")
    assert user["content"].startswith(observation(1, 0, [])[:40])  # the tool's own wording
    assert "becomes" in assistant["content"]
    action = parse_action(assistant["content"])
    assert (action.tool, action.command, action.path, action.args) == ("edit", "str_replace", "lists.py", (5,))
    box = LocalSandbox(tmp_path, {"lists.py": SOURCE.replace("if len(item_list) == 1:", "if len(item_list) != 1:")})
    Editor(box).str_replace(action.path, action.old, action.body, action.args[0])
    assert box.read_file("lists.py").decode() == SOURCE


def test_the_sample_trains_the_edit_turn_only(tokenizer):
    drill = next(line_drills("lists.py", SOURCE, OPERATORS_BY_NAME["swap_arguments"], random.Random(0)))
    messages = drill_messages(drill, random.Random(0), "You are a careful engineer.")
    sample = drill_sample(tokenizer, messages)
    assert len(sample.input_ids) == len(sample.loss_mask) == len(sample.old_logprobs)
    trained = [t for t, m in zip(sample.input_ids, sample.loss_mask, strict=True) if m]
    assert trained[-1] == tokenizer.eos_token_id
    assert tokenizer.decode(trained[:-1]) == messages[-1]["content"]
    first = sample.loss_mask.index(1)
    assert "most suspicious first" in tokenizer.decode(sample.input_ids[:first])


def test_a_training_repo_gives_drills_of_every_operator_in_turn(tokenizer):
    from repos.listfile import get_repo

    samples = repo_drills(get_repo("toolz"), 10, 0, tokenizer, ("parse", "inflection", "humanize"))
    assert len(samples) == 10
    edits = [tokenizer.decode([t for t, m in zip(x.input_ids, x.loss_mask, strict=True) if m]) for x in samples]
    assert all("str_replace toolz/" in e for e in edits)
    assert len({x.input_ids for x in samples}) == 10


def test_drills_never_come_from_a_heldout_repo(tokenizer):
    from repos.listfile import get_repo

    with pytest.raises(ValueError, match="held-out repo"):
        repo_drills(get_repo("humanize"), 4, 0, tokenizer, ("parse", "inflection", "humanize"))


@pytest.fixture(scope="module")
def tokenizer():
    pytest.importorskip("transformers")
    from transformers import AutoTokenizer

    from agent_scaffold.embedded import default_model_dir

    return AutoTokenizer.from_pretrained(default_model_dir())
