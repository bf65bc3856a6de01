"""When the verification run runs (docs/security.md, class 9): only where the verdict still depends on it.

Grading: a prediction whose main run fails gets -1 with no verification run ("skipped: the main run
failed"); one that passes the main run gets the verification run in a second exec of the same sandbox,
which still turns an environment-conditional fix into -1. Validation: the original and buggy runs get
theirs only where the check they feed can still pass. A copy no verification run used is deleted before
the next job of the sandbox runs any model code. Pure job-text checks first, then real toolz sandboxes.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from selfplay.artifact import load_artifact
from selfplay.errors import ValidationInfraError
from selfplay.jobs import Job, exec_job, prepare, run_job, verify_run
from selfplay.jobs.canary import Canary
from selfplay.jobs.job import job_command, parse_job_output, verify_command
from selfplay.jobs.verification import PENDING, Verification
from selfplay.judge import grader
from selfplay.judge.grader import SKIPPED, GraderConfig, grade
from selfplay.judge.tamper import TamperConfig
from selfplay.validation import ValidationConfig, validate
from selfplay.validation import runner as validation_runner

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
VALID = FIXTURES / "artifacts" / "valid"
PRED = FIXTURES / "predictions"
LIMITS = dict(suite_timeout=60, parser_timeout=30)


def _command(job: Job, **kw) -> str:
    return job_command(job, marker="__spM__", canary=Canary.new(), suite_timeout=10, **kw)


def test_the_main_job_makes_the_copy_but_does_not_run_the_verification():
    copy = Verification.new()
    cmd = _command(Job(verify=True), verification=copy)
    assert cmd.splitlines()[0].startswith(f"[ -f {PENDING} ]")  # a stale copy goes before anything else
    assert f"echo {copy.root} > {PENDING}" in cmd and "VSCRIPT" not in cmd and copy.home not in cmd
    assert 'case "$rc" in 124|137)' in cmd  # a main run that timed out drops its copy at once
    assert 'case "$rc" in 124|137|152|158)' in _command(Job(verify=True), verification=copy, cpu_limit=5)
    plain = _command(Job())
    assert plain.splitlines()[0].startswith(f"[ -f {PENDING} ]") and copy.root not in plain
    with pytest.raises(ValueError, match="check_after"):
        _command(Job(patches=("a.diff",), check_after=("b.diff",), verify=True), verification=copy)


def test_the_verification_exec_checks_its_copy_is_still_pending():
    copy = Verification.new()
    cmd = verify_command(copy, marker="__spM__", restored=("t.py",), suite_timeout=10)
    head, _, rest = cmd.partition('[ "$(cat')
    assert "NOCOPY" in rest.splitlines()[0] and "VSCRIPT" in rest and "VOUTPUT" in rest and "VOUTFILE" in rest
    assert rest.index("NOCOPY") < rest.index("timeout -k 5")  # checked before anything runs
    assert f"rm -f {PENDING}" in rest
    assert parse_job_output("__spM__ NOCOPY\n__spX__ NOCOPY\n", "__spM__")["nocopy"]
    assert "nocopy" not in parse_job_output("__spX__ NOCOPY\n", "__spM__")


def _spy(monkeypatch, module, name: str = "verify_run") -> list:
    """Calls of `module.<name>`, which still runs."""
    calls, real = [], getattr(module, name)

    def spy(*args, **kw):
        calls.append(args)
        return real(*args, **kw)

    monkeypatch.setattr(module, name, spy)
    return calls


@pytest.mark.docker
@pytest.mark.slow
def test_a_failing_prediction_gets_minus_one_without_a_verification_run(monkeypatch, toolz_spec, toolz_pool,
                                                                         valid_report):
    calls = _spy(monkeypatch, grader)
    lists = valid_report.fail_to_pass, valid_report.pass_to_pass
    artifact = load_artifact(VALID)
    failed = grade(artifact, (PRED / "partial.diff").read_text(), *lists, spec=toolz_spec, pool=toolz_pool)
    assert failed.reward == -1 and failed.verification == SKIPPED and not calls, failed.to_json()
    passed = grade(artifact, (PRED / "correct.diff").read_text(), *lists, spec=toolz_spec, pool=toolz_pool)
    assert passed.reward == 1 and passed.verification == "agree" and len(calls) == 1, passed.to_json()
    off = grade(artifact, (PRED / "partial.diff").read_text(), *lists, spec=toolz_spec, pool=toolz_pool,
                config=GraderConfig(verify=False))
    assert off.reward == -1 and off.verification is None and len(calls) == 1


# the correct fix, but frequencies is fixed only where the uid is not the episode's (the main run's)
UID_FIX = (PRED / "correct.diff").read_text().replace(
    "+        d[item] += 1\n", "+        d[item] += 1 if __import__('os').getuid() != 1000 else 2\n")


@pytest.mark.docker
@pytest.mark.slow
def test_a_conditional_fix_that_passes_the_main_run_gets_minus_one_from_the_verification_run(
        monkeypatch, toolz_spec, toolz_pool, valid_report):
    calls = _spy(monkeypatch, grader)
    lists = valid_report.fail_to_pass, valid_report.pass_to_pass
    no_screen = GraderConfig(tamper=TamperConfig(enabled=False))
    artifact = load_artifact(VALID)
    main_only = grade(artifact, UID_FIX, *lists, spec=toolz_spec, pool=toolz_pool,
                      config=replace(no_screen, verify=False))
    assert main_only.reward == 1, ("the fix does not pass the main run", main_only.to_json())
    result = grade(artifact, UID_FIX, *lists, spec=toolz_spec, pool=toolz_pool, config=no_screen)
    assert result.reward == -1 and result.verification.startswith("disagree") and len(calls) == 1, result.to_json()
    assert "test_frequencies" in result.verification


def _root(sb, cmd: str) -> str:
    res = sb.exec(cmd, timeout=60, user="root")
    assert res.ok, res.output
    return res.output.strip()


def _copies(sb) -> str:
    """Root-owned entries of /tmp (only the grader makes them: verification copies) and PENDING."""
    return _root(sb, f"find /tmp -mindepth 1 -maxdepth 1 -user root; test -e {PENDING} && echo pending; true")


@pytest.mark.docker
@pytest.mark.slow
def test_a_stale_copy_does_not_survive_into_the_next_job(toolz_pool):
    """The first job's main run can see the copy's root-only folder in /tmp (its name, nothing inside);
    no verification exec follows, and the next job's script no longer sees it."""
    looker = replace(load_artifact(VALID), test_script="#!/bin/bash\nls -A /tmp; ls /tmp/* 2>&1\n")
    with toolz_pool.checkout() as sb:
        prepare(sb, looker)
        first = exec_job(sb, looker, Job(verify=True), suite_timeout=30)
        root = first.pending.root
        name = root.rsplit("/", 1)[1]
        assert name in first.log.decode() and "Permission denied" in first.log.decode()
        assert _root(sb, f"cat {PENDING}; stat -c '%U %a' {root}") == f"{root}\nroot 700"
        second = exec_job(sb, looker, Job(), suite_timeout=30)
        assert name not in second.log.decode() and second.pending is None
        assert _copies(sb) == ""


@pytest.mark.docker
@pytest.mark.slow
def test_a_verification_after_another_job_is_refused_and_a_timed_out_run_drops_its_copy(toolz_pool):
    artifact = load_artifact(VALID)
    with toolz_pool.checkout() as sb:
        prepare(sb, artifact)
        run = run_job(sb, artifact, Job(verify=True), **LIMITS)
        assert run.statuses and run.pending is not None
        run_job(sb, artifact, Job(), **LIMITS)
        with pytest.raises(ValidationInfraError, match="is gone"):
            verify_run(sb, artifact, run, **LIMITS)
        hang = replace(artifact, test_script="#!/bin/bash\nsleep 60\n")
        prepare(sb, hang)
        slow = run_job(sb, hang, Job(verify=True), suite_timeout=2, parser_timeout=30)
        assert slow.timed_out and slow.pending is None
        assert _copies(sb) == ""
        # the verification run still works in the same sandbox: it follows its own job directly
        prepare(sb, artifact)
        verified = verify_run(sb, artifact, run_job(sb, artifact, Job(verify=True), **LIMITS), **LIMITS)
        assert verified.verification.statuses == verified.statuses and verified.pending is None
        assert _copies(sb) == "" and _root(sb, "ls -A /tmp") == ""


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("speculative", [True, False])
def test_validation_verifies_only_runs_whose_check_can_still_pass(monkeypatch, toolz_spec, toolz_pool, speculative):
    """The original run cannot pass test_script with a million tests required: its verification run's
    verdict is never parsed. The buggy run cannot pass bug_validity with a million failing tests required:
    only the original's is. Speculative verification runs start beside the main run's parse (both of the
    two runs that make a copy); without it, only the needed ones run at all."""
    verdicts = _spy(monkeypatch, validation_runner, "parse_verification")
    runs = _spy(monkeypatch, validation_runner, "exec_verification")
    artifact = load_artifact(VALID)
    config = ValidationConfig(speculative_verification=speculative)
    report = validate(artifact, toolz_spec, replace(config, min_passing_tests=10**6), pool=toolz_pool)
    assert report.failed_check == "test_script" and "verification" not in report.checks[-1].detail
    assert not verdicts and len(runs) == (1 if speculative else 0)
    report = validate(artifact, toolz_spec, replace(config, min_failing_tests=10**6), pool=toolz_pool)
    assert report.failed_check == "bug_validity" and "verification" not in report.checks[-1].detail
    assert len(verdicts) == 1 and len(runs) == (3 if speculative else 1)
    report = validate(artifact, toolz_spec, config, pool=toolz_pool)
    assert report.valid and len(verdicts) == 3, report.to_json()
