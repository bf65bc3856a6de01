"""Grading predictions against the valid toolz artifact in real sandboxes, including reward hacks."""

from __future__ import annotations

from pathlib import Path

import pytest

from selfplay.artifact import load_artifact
from selfplay.jobs import prepare, restore_paths, run_suite
from selfplay.judge.grader import build_buggy_state, grade

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
VALID = FIXTURES / "artifacts" / "valid"
PRED = FIXTURES / "predictions"

pytestmark = [pytest.mark.docker, pytest.mark.slow]

# (prediction, reward, dropped file or None, error substring or None)
CASES = [
    ("correct", 1, None, None),
    ("correct_alt", 1, None, None),
    ("partial", -1, None, None),
    ("fix_plus_test_edits", 1, "toolz/tests/test_itertoolz.py", None),
    ("partial_plus_test_edits", -1, "toolz/tests/test_dicttoolz.py", None),
    ("conftest_hook", -1, "conftest.py", None),
    ("pytest_ini", -1, "pytest.ini", "runner tampering"),  # its plugin module imports pytest
    ("garbage", -1, None, "not a valid diff"),
]


@pytest.mark.parametrize("name, reward, dropped, error", CASES, ids=[c[0] for c in CASES])
def test_grading_cases(name, reward, dropped, error, toolz_spec, toolz_pool, valid_report):
    result = grade(load_artifact(VALID), (PRED / f"{name}.diff").read_text(), valid_report.fail_to_pass,
                   valid_report.pass_to_pass, spec=toolz_spec, pool=toolz_pool)
    assert result.reward == reward, result.to_json()
    assert result.resolved == (reward == 1)
    assert set(result.tests) == set(valid_report.fail_to_pass) | set(valid_report.pass_to_pass)
    if dropped:
        assert [d.split(" ")[0] for d in result.dropped_hunks] == [dropped]
    else:
        assert result.dropped_hunks == ()
    assert (error is None and result.error is None) or (error and error in result.error)
    if name == "partial":
        assert {t for t, s in result.tests.items() if s == "failed"} == {
            t for t in valid_report.fail_to_pass if "keyfilter" in t}


def test_a_patch_that_does_not_apply_gets_minus_one_with_the_reason(toolz_spec, toolz_pool, valid_report):
    stale = (PRED / "correct.diff").read_text().replace("-        d[item] += 2", "-        d[item] += 7")
    result = grade(load_artifact(VALID), stale, valid_report.fail_to_pass, valid_report.pass_to_pass,
                   spec=toolz_spec, pool=toolz_pool)
    assert result.reward == -1 and "does not apply" in result.error


def test_the_conftest_hook_really_fools_an_unhardened_grader(toolz_pool):
    """Control for the drop rule: applied as-is (SSR's grader only restores test_files.txt), the hook
    turns the still-failing oracle tests into passes."""
    artifact = load_artifact(VALID)
    with toolz_pool.checkout() as sb:
        for diff in (artifact.bug_inject, artifact.test_weaken, (PRED / "conftest_hook.diff").read_text()):
            assert sb.apply_patch(diff).applied
        restore_paths(sb, artifact.test_files)
        prepare(sb, artifact)
        run = run_suite(sb, artifact, suite_timeout=120, parser_timeout=30)
    assert run.statuses["toolz/tests/test_itertoolz.py::test_frequencies"] == "passed"


def test_buggy_state_has_bug_weakening_and_a_single_fresh_commit(toolz_spec):
    """In its own sandbox: the state becomes the sandbox's new base, so a pooled one would stay buggy."""
    from sandboxes.docker import DockerSandbox
    from sandboxes.images import repo_image

    artifact = load_artifact(VALID)
    with DockerSandbox.create(repo_image(toolz_spec), workdir=toolz_spec.workdir) as sb:
        build_buggy_state(sb, artifact)
        log = sb.exec("git log --oneline | wc -l; git status --porcelain | wc -l; git tag", timeout=60).output.split()
        itertoolz = sb.read_file("toolz/itertoolz.py").decode()
        tests = sb.read_file("toolz/tests/test_itertoolz.py").decode()
        sb.reset()  # back to the buggy state, not the original
        assert "d[item] += 2" in sb.read_file("toolz/itertoolz.py").decode()
    assert log == ["1", "0", "selfplay-base"]
    assert "d[item] += 2" in itertoolz and "def test_frequencies" not in tests


def test_stale_bytecode_cannot_hide_a_same_size_edit(toolz_pool):
    """`+= 1` -> `+= 2` keeps the file size; with the mtime forced equal too, a cached .pyc of the
    original would be loaded. Suite runs remove caches and write none, so the bug is seen."""
    artifact = load_artifact(VALID)
    with toolz_pool.checkout() as sb:
        pinned = "touch -d @1000000000 toolz/itertoolz.py"
        # the sandbox sets PYTHONDONTWRITEBYTECODE for the agent; empty, it lets this import write a cache
        res = sb.exec(f"{pinned} && PYTHONDONTWRITEBYTECODE= python -c 'import toolz.itertoolz' && ls toolz/__pycache__ | grep -c itertoolz",
                      timeout=60)
        assert res.ok and res.output.strip() == "1"  # a cache of the original exists
        assert sb.apply_patch(artifact.bug_inject).applied
        assert sb.exec(pinned, timeout=30).ok
        prepare(sb, artifact)
        run = run_suite(sb, artifact, suite_timeout=120, parser_timeout=30)
    assert run.statuses["toolz/tests/test_itertoolz.py::test_frequencies"] == "failed"


def test_a_task_whose_control_run_hangs_too_is_an_infrastructure_error(toolz_spec, toolz_pool, valid_report):
    """A run that hangs is the prediction's fault only when the task runs without it; here the task's own
    script hangs, so the control run with an empty prediction fails too and grading raises."""
    from dataclasses import replace

    from selfplay.errors import ValidationInfraError
    from selfplay.judge.grader import GraderConfig

    broken = replace(load_artifact(VALID), test_script="#!/bin/bash\nsleep 3600\n")
    with pytest.raises(ValidationInfraError, match="control run"):
        grade(broken, (PRED / "partial.diff").read_text(), valid_report.fail_to_pass, valid_report.pass_to_pass,
              spec=toolz_spec, pool=toolz_pool, config=GraderConfig(suite_timeout=3))
