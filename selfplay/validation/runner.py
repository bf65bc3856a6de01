"""`validate(artifact, spec, config)`: run the eight consistency checks in sandboxes of the repo's image.

Suite runs are grouped in two waves of independent runs, each spread over a pool of sandboxes
(`config.parallelism` at once):
  wave 1: the original suite twice (flaky detection), plus the file-existence and `git apply` probes;
  wave 2: with the bug; with bug + weakening; and one run per bug file with that file reverted.
Checks are then evaluated strictly in order and the report stops at the first failure. Wave 2 is
started only when checks 1-5 pass; its inverse-mutation runs are speculative (they are wasted when
bug_validity or weakening fails) because running them alongside saves a whole suite-run of latency.
Every run starts from a reset sandbox, with the oracle test files restored where SSR says so.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from typing import Protocol

from repos.spec import RepoSpec
from sandboxes.sandbox import Sandbox
from selfplay.artifact import BugArtifact, check_format
from selfplay.diffs import split_diff
from selfplay.errors import ArtifactError, ValidationInfraError
from selfplay.grading import split_tests
from selfplay.validation import checks
from selfplay.validation.config import ValidationConfig
from selfplay.validation.report import CheckResult, ValidationReport
from selfplay.validation.suite import SuiteRun, missing_files, prepare, restore_paths, run_suite

log = logging.getLogger(__name__)


class Pool(Protocol):
    """What validation needs from `sandboxes.pool.SandboxPool`."""

    def checkout(self) -> AbstractContextManager[Sandbox]: ...


def _apply(sb: Sandbox, diff: str, what: str) -> str | None:
    res = sb.apply_patch(diff)
    return None if res.applied else (res.error or f"{what} did not apply")


def _must_apply(sb: Sandbox, diff: str, what: str) -> None:
    error = _apply(sb, diff, what)
    if error:  # it applied in wave 1, so this is the sandbox's fault
        raise ValidationInfraError(f"{what} applied in an earlier sandbox but not now: {error}")


class _Runner:
    def __init__(self, artifact: BugArtifact, config: ValidationConfig, pool: Pool):
        self.artifact, self.config, self.pool = artifact, config, pool
        self.runs = 0

    def in_sandbox(self, job: Callable[[Sandbox], object]) -> object:
        with self.pool.checkout() as sb:  # the pool hands out reset sandboxes
            prepare(sb, self.artifact)
            return job(sb)

    def suite(self, sb: Sandbox, *, parse_twice: bool = False) -> SuiteRun:
        self.runs += 1
        return run_suite(sb, suite_timeout=self.config.suite_timeout, parser_timeout=self.config.parser_timeout,
                         parse_twice=parse_twice)

    def wave(self, jobs: list[Callable[[Sandbox], object]]) -> list[object]:
        with ThreadPoolExecutor(max_workers=min(self.config.parallelism, len(jobs))) as ex:
            futures = [ex.submit(self.in_sandbox, job) for job in jobs]
            return [f.result() for f in futures]

    # wave 1 ---------------------------------------------------------------------------------------
    def probe_original(self, sb: Sandbox) -> dict:
        a = self.artifact
        out: dict = {"missing": missing_files(sb, a.test_files)}
        out["run"] = self.suite(sb, parse_twice=True)
        errors = {"bug_inject.diff": _apply(sb, a.bug_inject, "bug_inject.diff")}
        errors["test_weaken.diff"] = (_apply(sb, a.test_weaken, "test_weaken.diff")
                                      if errors["bug_inject.diff"] is None else None)
        out["apply_errors"] = errors
        return out

    def original(self, sb: Sandbox) -> SuiteRun:
        return self.suite(sb)

    # wave 2 ---------------------------------------------------------------------------------------
    def buggy(self, sb: Sandbox) -> SuiteRun:
        _must_apply(sb, self.artifact.bug_inject, "bug_inject.diff")
        restore_paths(sb, self.artifact.test_files)
        return self.suite(sb)

    def weakened(self, sb: Sandbox) -> SuiteRun:
        _must_apply(sb, self.artifact.bug_inject, "bug_inject.diff")
        _must_apply(sb, self.artifact.test_weaken, "test_weaken.diff")
        return self.suite(sb)

    def inverse(self, paths: tuple[str, ...]) -> Callable[[Sandbox], SuiteRun]:
        def job(sb: Sandbox) -> SuiteRun:
            _must_apply(sb, self.artifact.bug_inject, "bug_inject.diff")
            _must_apply(sb, self.artifact.test_weaken, "test_weaken.diff")
            restore_paths(sb, (*self.artifact.test_files, *paths))
            return self.suite(sb)
        return job


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
        from sandboxes.images import repo_image
        from sandboxes.pool import SandboxPool

        owned = SandboxPool(repo_image(spec), size=config.parallelism)
        try:
            return validate(artifact, spec, config, pool=owned)
        finally:
            owned.close()
    runner = _Runner(artifact, config, pool)
    try:
        report = _validate(runner, artifact, spec, config)
    except ValidationInfraError:
        raise
    except Exception as exc:  # a sandbox failure: name it, keep the cause
        raise ValidationInfraError(f"validation could not run: {exc.__class__.__name__}: {exc}") from exc
    return ValidationReport(valid=report.valid, checks=report.checks, fail_to_pass=report.fail_to_pass,
                            pass_to_pass=report.pass_to_pass, error=report.error, flaky=report.flaky,
                            duration=time.monotonic() - start, suite_runs=runner.runs)


def _validate(r: _Runner, artifact: BugArtifact, spec: RepoSpec, config: ValidationConfig) -> ValidationReport:
    done: list[CheckResult] = []

    def stop(result: CheckResult, **kw) -> ValidationReport | None:
        done.append(result)
        return None if result.passed else ValidationReport(valid=False, checks=tuple(done), **kw)

    jobs = [r.probe_original] + [r.original] * (config.original_runs - 1)
    probe, *others = r.wave(jobs)
    runs = [probe["run"], *others]
    maps = [run.statuses for run in runs]
    flaky = checks.flaky_tests(maps) if all(m is not None for m in maps) else set()
    if (rep := stop(checks.check_test_files(artifact, probe["missing"]))) is not None:
        return rep
    if (rep := stop(checks.check_parser(maps, [run.error for run in runs], flaky, config.flaky_policy),
                    flaky=tuple(sorted(flaky)))) is not None:
        return rep
    original = {t: s for t, s in maps[0].items() if t not in flaky}
    for result in (checks.check_test_script(original, config.min_passing_tests),
                   checks.check_patch_hygiene(artifact, spec.test_patterns, probe["apply_errors"]),
                   checks.check_bug_scope(artifact, config.min_changed_files)):
        if (rep := stop(result, flaky=tuple(sorted(flaky)))) is not None:
            return rep

    units = [tuple(dict.fromkeys(p for p in (fd.source_path, fd.target_path) if p))
             for fd in split_diff(artifact.bug_inject)]
    results = r.wave([r.buggy, r.weakened] + [r.inverse(u) for u in units])
    buggy, weakened, reverted = results[0], results[1], results[2:]
    if buggy.statuses is None:
        return stop(CheckResult("bug_validity", False, f"with the bug applied: {buggy.error}"))
    f2p, p2p = split_tests(original, buggy.statuses)
    flaky_failing = {t for t in flaky if buggy.statuses.get(t) != "passed"}
    kw = {"fail_to_pass": f2p, "pass_to_pass": p2p, "flaky": tuple(sorted(flaky))}
    if (rep := stop(checks.check_bug_validity(f2p, flaky_failing, config.min_failing_tests), **kw)) is not None:
        return rep
    if weakened.statuses is None:
        return stop(CheckResult("weakening", False, f"with bug + weakening: {weakened.error}"), **kw)
    if (rep := stop(checks.check_weakening(f2p, weakened.statuses), **kw)) is not None:
        return rep
    by_file = {" -> ".join(u): run.statuses for u, run in zip(units, reverted)}
    if (rep := stop(checks.check_inverse_mutation(f2p, by_file), **kw)) is not None:
        return rep
    return ValidationReport(valid=True, checks=tuple(done), **kw)
