"""A `localize` demonstration for real on toolz: the expert localizes, edits the line the tool lists, and the
real grader scores its diff +1 (one bug of the two-bug fixture, so the bug is one changed line)."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import pytest

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
