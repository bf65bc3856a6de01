"""A `localize` demonstration for real on toolz: the expert localizes, edits the line the tool lists, and the
real grader scores its diff +1 (one bug of the two-bug fixture, so the bug is one changed line)."""

from __future__ import annotations

import random
import re
from dataclasses import replace
from pathlib import Path

import pytest

from selfplay.errors import NotDemonstrable

pytestmark = [pytest.mark.docker, pytest.mark.slow]

VALID = Path(__file__).parents[2] / "fixtures" / "artifacts" / "valid"


def _dicttoolz_only(diff: str) -> str:
    """The fixture diff's section for dicttoolz (its first of two files)."""
    return "diff --git" + diff.split("diff --git")[1]


def test_a_localize_demonstration_edits_the_listed_line_and_is_graded_plus_one(toolz_spec, toolz_pool):
    from transformers import AutoTokenizer

    from agent_scaffold.embedded import default_model_dir
    from selfplay.artifact import load_artifact
    from selfplay.demos.solver import run_solver_demo
    from selfplay.task import Task, make_task_id
    from selfplay.validation import validate

    fixture = load_artifact(VALID)
    artifact = replace(fixture, bug_inject=_dicttoolz_only(fixture.bug_inject),
                       test_weaken=_dicttoolz_only(fixture.test_weaken),
                       test_files=("toolz/tests/test_dicttoolz.py",),
                       test_script="#!/bin/bash\npython -m pytest -rA -p no:cacheprovider toolz/tests/test_dicttoolz.py\n")
    report = validate(artifact, toolz_spec, pool=toolz_pool)
    assert report.valid, report.error
    task = Task(make_task_id("toolz", artifact), "toolz", artifact, tuple(report.fail_to_pass),
                tuple(report.pass_to_pass))
    tokenizer = AutoTokenizer.from_pretrained(default_model_dir())
    demo = run_solver_demo(task, toolz_spec, tokenizer, random.Random(0), localize=True)
    assert demo.kept, (demo.reason, demo.trajectory.to_text())
    traj = demo.trajectory
    assert traj.metadata["plan"] == "localize" and len(traj.input_ids) <= 2048
    first_observation = traj.messages[3]["content"]
    assert "toolz/dicttoolz.py:156" in first_observation and "if not predicate(k):" in first_observation
    assert "str_replace toolz/dicttoolz.py:156" in traj.messages[4]["content"]
    # the prompt tells the policy about the tool only in an episode that has it
    assert "```localize```" in traj.messages[1]["content"]


RECOVERY = Path(__file__).parents[2] / "fixtures" / "artifacts" / "recovery_keymap"


def test_a_bug_listed_second_is_repaired_after_a_wrong_first_edit_undone(toolz_spec, toolz_pool):
    """keymap's `map(func, d.keys())` swapped, which the tool lists second under `rv = factory()`: the recovery
    demonstration edits line 100, sees the tests still fail, undoes it (`undo`), repairs line 101, and the real grader
    scores its diff (the bug's line alone) +1; the wrong edit's turn carries no loss."""
    from transformers import AutoTokenizer

    from agent_scaffold.embedded import default_model_dir
    from selfplay.artifact import load_artifact
    from selfplay.demos.solver import run_solver_demo
    from selfplay.learner.rft import valid_turn_mask
    from selfplay.task import Task, make_task_id
    from selfplay.validation import validate

    artifact = load_artifact(RECOVERY)
    report = validate(artifact, toolz_spec, pool=toolz_pool)
    assert report.valid, report.error
    task = Task(make_task_id("toolz", artifact), "toolz", artifact, tuple(report.fail_to_pass),
                tuple(report.pass_to_pass), origin="procedural")
    tokenizer = AutoTokenizer.from_pretrained(default_model_dir())
    demo = run_solver_demo(task, toolz_spec, tokenizer, random.Random(0), localize=True, localize_ranks=1,
                           recover=True)
    assert demo.kept, (demo.reason, demo.trajectory.to_text())
    traj = demo.trajectory
    assert traj.metadata["plan"] == "recovery" and traj.metadata["unlearned_turns"] == [1]
    replies = [i for i, m in enumerate(traj.messages) if m["role"] == "assistant"]
    said = [traj.messages[i]["content"] for i in replies]
    seen = [traj.messages[i + 1]["content"] for i in replies[:-1]]
    assert "str_replace toolz/dicttoolz.py:100" in said[1] and "undo toolz/dicttoolz.py" in said[3]
    assert "str_replace toolz/dicttoolz.py:101" in said[4]
    assert re.search(r"\b[1-9]\d* failed", seen[2])  # the second `localize`, after the wrong edit
    changed = [line for line in traj.metadata["submission"].splitlines()
               if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    assert changed == ["-    rv.update(zip(map(d.keys(), func), d.values()))",
                       "+    rv.update(zip(map(func, d.keys()), d.values()))"]  # the wrong edit left nothing
    s, e = traj.turn_spans[1]
    assert not any(valid_turn_mask(traj)[s:e]) and all(valid_turn_mask(traj)[slice(*traj.turn_spans[4])])
    # without `recover` the same task is not demonstrated by a rank-1 build
    with pytest.raises(NotDemonstrable):
        run_solver_demo(task, toolz_spec, tokenizer, random.Random(0), localize=True, localize_ranks=1)


def test_recovery_demos_play_the_stored_tasks_without_a_demonstration(toolz_spec, toolz_pool, tmp_path):
    """`recovery_demos` on a store of two undemonstrated tasks: the bug listed first is left to the direct
    plan (not stored), the one listed second gets its recovery, stored as a demo attempt; a second call finds
    nothing left to play."""
    from transformers import AutoTokenizer

    from agent_scaffold.embedded import default_model_dir
    from selfplay.artifact import load_artifact
    from selfplay.demos.collect import recovery_demos
    from selfplay.store import open_store
    from selfplay.task import Task, make_task_id
    from selfplay.validation import validate

    fixture = load_artifact(VALID)
    listed_first = replace(fixture, bug_inject=_dicttoolz_only(fixture.bug_inject),
                           test_weaken=_dicttoolz_only(fixture.test_weaken), test_files=("toolz/tests/test_dicttoolz.py",),
                           test_script="#!/bin/bash\npython -m pytest -rA -p no:cacheprovider toolz/tests/test_dicttoolz.py\n")
    tokenizer = AutoTokenizer.from_pretrained(default_model_dir())
    with open_store(str(tmp_path / "store.db")) as store:
        ids = []
        for artifact in (listed_first, load_artifact(RECOVERY)):
            report = validate(artifact, toolz_spec, pool=toolz_pool)
            task = Task(make_task_id("toolz", artifact), "toolz", artifact, tuple(report.fail_to_pass),
                        tuple(report.pass_to_pass), origin="procedural")
            ids.append(store.add_task(task))
        report = recovery_demos(toolz_spec, 4, store, tmp_path / "demos", tokenizer=tokenizer)
        assert report.tasks == [ids[1]] and len(report.kept) == 1 and report.skipped_hidden == 1
        (attempt,) = store.attempts(source="demo")
        assert attempt.task_id == ids[1] and attempt.reward == 1.0 and Path(attempt.trajectory_path).is_file()
        assert recovery_demos(toolz_spec, 4, store, tmp_path / "demos", tokenizer=tokenizer).tasks == []
