"""`validate(artifact, spec, config)`: run the eight consistency checks in sandboxes of the repo's image.

Suite runs are grouped in two waves of independent runs, spread over `config.parallelism` sandboxes
that are checked out of the pool once for the whole validation (a run cleans the tree with git, which
is far cheaper than a pool reset; a sandbox's first job stages the artifact's files):
  wave 1: the original suite twice (flaky detection); the first run also reports which oracle test
          files are missing from the original commit and then tries `git apply` of both diffs;
  wave 2: with the bug; with bug + weakening; and one run per bug file with that file reverted.
Checks are then evaluated strictly in order and the report stops at the first failure. Wave 2 is
started only when checks 1-5 pass on the main runs, beside the original's verification run (below), whose
verdict test_script still waits for; its inverse-mutation runs are speculative (they are wasted when
bug_validity or weakening fails) because running them alongside saves a whole suite-run of latency.
The oracle test files are restored before every run except the weakened one, as SSR says.

Hardening (docs/security.md): every run appends a neutral comment with a fresh token to each Python bug file and
canary tests to each Python oracle test file (`selfplay.jobs`), so no tree state is seen twice
and the buggy run doubles as the perturbation control (a parser honest only on states it has seen fails
it); a canary with the wrong status fails the check of that run ("run integrity"). bug_inject.diff goes
through the runner-tampering screen at patch_hygiene. A run whose job dies or whose script hangs is the
artifact's fault (its check fails with the reason) unless a control on the reset sandbox fails too, which
raises ValidationInfraError.

Verification runs (docs/security.md, class 9): the last original run and the buggy run make a verification
copy, and the job keeps its sandbox for the verification run. Its verdict is used only when it can still
count: the original run must have a map, no tampering and at least `min_passing_tests` passing tests (else
the artifact is invalid whatever the verification says: flaky tests only ever drop from the original's
passing set), and the buggy run must pass bug_validity and its integrity check. With
`speculative_verification` (the default) the verification run starts while the main output is in the
parser box, and a verdict that cannot count is never parsed; without it, the run follows the parse only
when needed, and a skipped copy is deleted by the sandbox's next job.
"""

from __future__ import annotations

import logging
import queue
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, ExitStack
from dataclasses import replace
from typing import Protocol

from repos.spec import RepoSpec
from sandboxes.images import repo_image
from sandboxes.pool import SandboxPool
from sandboxes.reaper import registry
from sandboxes.sandbox import Sandbox
from selfplay.artifact import BugArtifact, check_format
from selfplay.diffs import split_diff
from selfplay.errors import ArtifactError, ValidationInfraError
from selfplay.jobs import (
    Collected,
    Job,
    SuiteRun,
    exec_job,
    exec_verification,
    parse_collected,
    parse_verification,
    prepare,
    staged_files,
)
from selfplay.judge.tamper import screen
from selfplay.judge.verdict import disagreement, split_tests
from selfplay.validation import checks
from selfplay.validation.config import ValidationConfig
from selfplay.validation.report import CheckResult, ValidationReport

log = logging.getLogger(__name__)


class Pool(Protocol):
    """What validation needs from `sandboxes.pool.SandboxPool`."""

    size: int

    def checkout_many(self, n: int, timeout: float | None = None) -> AbstractContextManager[list[Sandbox]]:
        """`n` sandboxes taken together (all or nothing), so that validations and episodes sharing one
        pool cannot each hold part of what the other waits for."""
        ...


class _Runner:
    """Runs jobs on a fixed set of sandboxes; each sandbox's first job stages the artifact's files.

    A `Job(verify=True)` run that has output to parse keeps its sandbox for its verification run, which
    runs in the background (`later`) and frees the sandbox when it ends; `verified(run)` waits for it
    and parses it, so only a verdict that can still count is ever parsed. `close()` waits for every
    background run: the sandboxes go back to the pool idle."""

    def __init__(self, artifact: BugArtifact, config: ValidationConfig, sandboxes: list[Sandbox]):
        self.artifact, self.config = artifact, config
        self.free: queue.Queue[Sandbox] = queue.Queue()
        self.size = len(sandboxes)
        self.runs = 0
        self.done: list[SuiteRun] = []  # every main run and every verification parsed, for the task's facts
        self.staged: set[int] = set()  # ids of the sandboxes holding the artifact's files
        self.later = ThreadPoolExecutor(max_workers=self.size, thread_name_prefix="verification")
        self.shadows: dict[int, Future] = {}  # id(main run) -> its verification run, unparsed
        self.checked: dict[int, SuiteRun] = {}  # id(main run) -> its verification run, parsed
        self.limits = dict(suite_timeout=config.suite_timeout, max_output=config.max_test_output)
        self.started = time.monotonic()
        for sb in sandboxes:
            self.free.put(sb)

    def close(self) -> None:
        self.later.shutdown(wait=True)

    def job(self, job: Job, needed: Callable[[SuiteRun], bool] = lambda run: True, *, wait: bool = True) -> SuiteRun:
        """Run `job`. A `Job(verify=True)` run's verification run starts beside the parse of its output
        (`ValidationConfig.speculative_verification`), or after it when `needed(main run)`. With `wait`,
        a needed verification run is parsed before this returns; else `verified` waits for it."""
        sb = self.free.get()
        try:
            self.runs += 1
            # staging rides on the sandbox's first job (one exec fewer); a job that dies re-stages via _control
            stage = None if id(sb) in self.staged else staged_files(self.artifact)
            self.staged.add(id(sb))
            done = exec_job(sb, self.artifact, job, stage=stage, **self.limits)
            if isinstance(done, SuiteRun) and (done.died or done.timed_out):
                self._control(sb, done)
            if not job.verify or not isinstance(done, Collected):
                self.free.put(sb)  # the next job may use the sandbox while this output is parsed
                sb = None
                return self._keep(done if isinstance(done, SuiteRun) else self._parse(done))
            shadow = None
            if self.config.speculative_verification:
                shadow, sb = self.later.submit(self._verification, sb, done.pending), None
            run = self._parse(done)
            counts = needed(run)
            if shadow is None and counts:
                shadow, sb = self.later.submit(self._verification, sb, done.pending), None
            if shadow is not None:
                self.shadows[id(run)] = shadow
                if wait and counts:
                    self.verified(run)
            return self._keep(run)
        finally:
            if sb is not None:  # a skipped copy is deleted by the sandbox's next job
                self.free.put(sb)

    def verified(self, run: SuiteRun) -> SuiteRun | None:
        """`run`'s verification run, parsed once (None when it made none)."""
        if id(run) not in self.checked and (shadow := self.shadows.get(id(run))) is not None:
            got = parse_verification(shadow.result(), self.artifact, self.config.parser_timeout)
            self.checked[id(run)] = self._keep(got)
        return self.checked.get(id(run))

    def _verification(self, sb: Sandbox, pending) -> SuiteRun | tuple[bytes, dict]:
        try:
            got = exec_verification(sb, self.artifact, pending, **self.limits)
            if isinstance(got, SuiteRun) and got.died:  # as a job that died: the check fails with the reason
                self._control(sb, got)
            return got
        finally:
            self.free.put(sb)

    def _parse(self, done: Collected) -> SuiteRun:
        return parse_collected(done, self.artifact, self.config.parser_timeout)

    def _keep(self, run: SuiteRun) -> SuiteRun:
        self.done.append(run)
        return run

    def facts(self) -> dict:
        """The ValidationReport fields grading's budgets and canary rule come from."""
        times = [run.duration for run in self.done if run.duration]
        cpus = [run.cpu_time for run in self.done if run.cpu_time is not None]
        parsed = [run for run in self.done if run.integrity]
        return {"suite_time": max(times) if times else None, "suite_cpu": max(cpus) if cpus else None,
                "canaries_reported": bool(parsed) and all(run.integrity == "ok" for run in parsed)}

    def _control(self, sb: Sandbox, run: SuiteRun) -> None:
        """After a job died or hung: reset and re-stage the sandbox, then prove it runs a job. If it does,
        the failure was the artifact's; if not, raise ValidationInfraError (no verdict). After a signal
        removed the sandboxes (Ctrl-C), no control: the job died of that, and there is no verdict."""
        if registry.signalled_since(self.started):
            raise ValidationInfraError(f"interrupted: the process removed its sandboxes on a signal ({run.error})")
        try:
            sb.reset()
            prepare(sb, self.artifact)
            self.staged.add(id(sb))
            res = sb.exec("echo selfplay-control", timeout=60, user="root")
            ok = res.ok and "selfplay-control" in res.output
        except Exception as exc:  # the sandbox layer failed: infrastructure
            raise ValidationInfraError(f"a suite job failed ({run.error}) and so did the control run on a "
                                       f"reset sandbox ({exc.__class__.__name__}: {exc})") from exc
        if not ok:
            raise ValidationInfraError(f"a suite job failed ({run.error}) and so did the control run on a "
                                       f"reset sandbox (exit {res.exit_code}): {res.output[-300:]}")
        log.info("validation: a run failed (%s); the control run passed, so the artifact is at fault", run.error)

    def wave(self, jobs: list[Job], needed: Callable[[SuiteRun], bool] = lambda run: True, *,
             wait: bool = True) -> list[SuiteRun]:
        """Run `jobs` at once; `needed` decides whether a verify job's run gets its verification run;
        `wait=False` returns without waiting for verification runs (see `verified`)."""
        # one thread per job: jobs wait for a free sandbox, so a parse overlaps the next job's run
        with ThreadPoolExecutor(max_workers=len(jobs)) as ex:
            return list(ex.map(lambda job: self.job(job, needed, wait=wait), jobs))


def _tampered(runs: list[SuiteRun]) -> str | None:
    return next((run.integrity for run in runs if run.tampered), None)


def _integrity_note(runs: list[SuiteRun]) -> str:
    verdicts = {run.integrity.split(":")[0] for run in runs if run.integrity}
    return f"; run integrity (canaries): {', '.join(sorted(verdicts))}" if verdicts else ""


def _verified(run: SuiteRun, verify: SuiteRun | None, expected: dict[str, str]) -> str | None:
    """Why `run`'s verification run `verify` does not agree with it on `expected`, or None when it does."""
    if verify is None or verify.statuses is None:
        return f"the verification run failed: {verify.error if verify else 'it did not run'}"
    return disagreement(run.statuses or {}, verify.statuses, expected)


def _original_counts(run: SuiteRun, min_passing: int) -> bool:
    """Whether the verification of an original run can still count: with no map, tampering or fewer
    than `min_passing` passing tests the parser or test_script check fails whatever it says (a test
    passing on the stable original passes in every original run)."""
    passing = sum(s == "passed" for s in (run.statuses or {}).values())
    return run.statuses is not None and not run.tampered and passing >= min_passing


def _must_have_applied(run: SuiteRun) -> SuiteRun:
    if run.apply_error:  # both diffs applied in wave 1, so this is the sandbox's fault
        raise ValidationInfraError(f"a diff applied in wave 1 but not now: {run.apply_error}")
    return run


def validate(artifact: BugArtifact, spec: RepoSpec, config: ValidationConfig = ValidationConfig(), *,
             pool: Pool | None = None) -> ValidationReport:
    """Run the checks in order, stopping at the first failure.

    A malformed artifact gives an invalid report with `error` set; a sandbox or engine failure raises
    `ValidationInfraError` (no verdict: the injector must not be punished for it).
    """
    start = time.monotonic()
    try:
        check_format(artifact)
    except ArtifactError as exc:
        return ValidationReport(valid=False, error=str(exc))
    if pool is None:
        owned = SandboxPool(repo_image(spec), size=config.parallelism, workdir=spec.workdir)
        try:
            return validate(artifact, spec, config, pool=owned)
        finally:
            owned.close()
    size = max(1, min(config.parallelism, pool.size))
    try:
        with ExitStack() as stack:
            runner = _Runner(artifact, config, list(stack.enter_context(pool.checkout_many(size))))
            stack.callback(runner.close)  # before the sandboxes go back: no run may still hold one
            report = _validate(runner, artifact, spec, config)
    except ValidationInfraError:
        raise
    except Exception as exc:  # a sandbox failure: name it, keep the cause
        raise ValidationInfraError(f"validation could not run: {exc.__class__.__name__}: {exc}") from exc
    return ValidationReport(valid=report.valid, checks=report.checks, fail_to_pass=report.fail_to_pass,
                            pass_to_pass=report.pass_to_pass, error=report.error, flaky=report.flaky,
                            duration=time.monotonic() - start, suite_runs=runner.runs, **runner.facts())


def _validate(r: _Runner, artifact: BugArtifact, spec: RepoSpec, config: ValidationConfig) -> ValidationReport:
    done: list[CheckResult] = []

    def stop(result: CheckResult, **kw) -> ValidationReport | None:
        done.append(result)
        return None if result.passed else ValidationReport(valid=False, checks=tuple(done), **kw)

    probe_job = Job(missing=artifact.test_files, parse_twice=True, check_after=("bug_inject.diff", "test_weaken.diff"))
    jobs = [probe_job] + [Job()] * (config.original_runs - 1)
    jobs[-1] = replace(jobs[-1], verify=True)  # the original suite must also pass under the perturbed environment
    # the original's verification run goes on beside the checks and wave 2 (`verified` waits for it)
    runs = r.wave(jobs, lambda run: _original_counts(run, config.min_passing_tests), wait=False)
    probe = runs[0]
    maps = [run.statuses for run in runs]
    flaky = checks.flaky_tests(maps) if all(m is not None for m in maps) else set()
    apply_errors = {"bug_inject.diff": None, "test_weaken.diff": None}
    if probe.apply_error:
        apply_errors[probe.check_failed or "bug_inject.diff"] = probe.apply_error
    if (rep := stop(checks.check_test_files(artifact, list(probe.missing)))) is not None:
        return rep
    parser = checks.check_parser(maps, [run.error for run in runs], flaky, config.flaky_policy)
    if parser.passed and (tampered := _tampered(runs)):
        parser = CheckResult("parser", False, f"run integrity on the original code: {tampered}")
    elif parser.passed:
        parser = CheckResult("parser", True, parser.detail + _integrity_note(runs))
    if (rep := stop(parser, flaky=tuple(sorted(flaky)))) is not None:
        return rep
    original = {t: s for t, s in maps[0].items() if t not in flaky}
    hygiene = checks.check_patch_hygiene(artifact, spec.test_patterns, apply_errors,
                                         dict(probe.offsets).get("bug_inject.diff"))
    if hygiene.passed and (tamper := screen(artifact.bug_inject, config.tamper)) is not None:
        hygiene = CheckResult("patch_hygiene", False, f"bug_inject.diff: runner tampering: {tamper}")
    elif hygiene.passed and (luck := screen(artifact.bug_inject, config.bug_screen,
                                            what="the screen of bugs whose failure is luck")) is not None:
        hygiene = CheckResult("patch_hygiene", False, f"bug_inject.diff: {luck}; write a bug that fails the "
                                                      "same way in every run")
    script = checks.check_test_script(original, config.min_passing_tests)
    scope = checks.check_bug_scope(artifact, config.min_changed_files)

    both = ("bug_inject.diff", "test_weaken.diff")

    def validity_of(buggy: SuiteRun) -> CheckResult:
        """bug_validity before its verification run (the run has a map)."""
        flaky_failing = {t for t in flaky if buggy.statuses.get(t) != "passed"}
        return checks.check_bug_validity(split_tests(original, buggy.statuses)[0], flaky_failing,
                                         config.min_failing_tests)

    with ThreadPoolExecutor(max_workers=1) as ex:
        second, units = None, []
        if script.passed and hygiene.passed and scope.passed:  # hygiene proved the diffs parse
            units = [tuple(dict.fromkeys(p for p in (fd.source_path, fd.target_path) if p))
                     for fd in split_diff(artifact.bug_inject)]
            # wave 2 starts beside the original's verification run; its runs are wasted when that fails
            second = ex.submit(r.wave, [Job(patches=both[:1], restore=artifact.test_files, verify=True),
                                        Job(patches=both)]
                               + [Job(patches=both, restore=(*artifact.test_files, *u)) for u in units],
                               lambda run: run.statuses is not None and not run.tampered and validity_of(run).passed)
        if script.passed and (differ := _verified(runs[-1], r.verified(runs[-1]),
                                                  {t: s for t, s in original.items() if s == "passed"})):
            script = CheckResult("test_script", False, f"the original code under the verification environment: {differ}")
        for result in (script, hygiene, scope):
            if (rep := stop(result, flaky=tuple(sorted(flaky)))) is not None:
                return rep
        results = [_must_have_applied(run) for run in second.result()]
    buggy, weakened, reverted = results[0], results[1], results[2:]
    if buggy.statuses is None:
        return stop(CheckResult("bug_validity", False, f"with the bug applied: {buggy.error}"))
    for name, group in (("bug_validity", [buggy]), ("weakening", [weakened]), ("inverse_mutation", reverted)):
        if (tampered := _tampered(group)) is not None:
            return stop(CheckResult(name, False, f"run integrity: {tampered}"))
    f2p, p2p = split_tests(original, buggy.statuses)
    kw = {"fail_to_pass": f2p, "pass_to_pass": p2p, "flaky": tuple(sorted(flaky))}
    validity = validity_of(buggy)
    expected = {**{t: "passed" for t in p2p}, **{t: "failed" for t in f2p}}
    if validity.passed and (differ := _verified(buggy, r.verified(buggy), expected)):  # a bug that shows only when validated
        validity = CheckResult("bug_validity", False, f"with the bug, under the verification environment: {differ}")
    if (rep := stop(validity, **kw)) is not None:
        return rep
    if weakened.statuses is None:
        return stop(CheckResult("weakening", False, f"with bug + weakening: {weakened.error}"), **kw)
    if (rep := stop(checks.check_weakening(f2p, weakened.statuses), **kw)) is not None:
        return rep
    by_file = {" -> ".join(u): run.statuses for u, run in zip(units, reverted)}
    if (rep := stop(checks.check_inverse_mutation(f2p, by_file), **kw)) is not None:
        return rep
    return ValidationReport(valid=True, checks=tuple(done), **kw)
