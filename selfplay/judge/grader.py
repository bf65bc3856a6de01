"""The grading shell (I/O): build the solver's buggy state, and grade a prediction in a fresh sandbox.

Grading sequence (SSR Figure 7, hardened): original -> bug -> weakening -> (higher-order: the failed
prediction the task was made from) -> `.git` made one fresh commit of that tree, as the solver's sandbox
has it (`selfplay.jobs.Job`) -> the prediction minus its test-infrastructure sections -> restore
every oracle test file -> run the artifact's test_script.sh -> parse with its test_parser.py (both
written from the artifact outside the repo) -> `selfplay.judge.verdict.grade_statuses`.

Departure from the paper: SSR only restores test_files.txt, so a prediction adding a conftest.py hook
that marks every test passed, or a pytest.ini that deselects tests, would earn +1. We drop every
prediction section that touches test infrastructure (`selfplay.diffs.drop_infrastructure`: oracle and
pattern-matched test files, any conftest.py, pytest/tox/setup.cfg/pyproject configuration, interpreter
start-up hooks and .pth files, package metadata that registers plugins, bytecode caches, new modules
shadowing stdlib or pytest at the repo root, binary and symlink changes, files named in test_script.sh)
and report each one. What cannot be stopped at file level, code under test that tampers with the test
runner from inside the process (SSR Appendix A's "dominant challenger" applies to solvers too), is met by
two detections: the runner-tampering screen of the kept sections (`selfplay.judge.tamper`) and the canary
tests of every run (`selfplay.jobs.canary`); either earns -1 with the reason in `GradeResult.tamper`.

Whose fault (docs/security.md, class 5): a run whose job dies or times out is the prediction's (-1, reason
recorded) unless a control run of the same task with an empty prediction, on a reset sandbox, fails too:
then the task is broken and ValidationInfraError is raised. Nothing the model prints can raise it.
"Times out" means past the prediction's budget (`selfplay.facts.Budget`: a multiple of the task's validated
suite time plus a floor, wall and CPU), not the 120 s suite timeout, and the control gets the same budget.

Environment-conditional fixes (docs/security.md, class 9): a prediction whose main run passes is run a
second time under a perturbed environment (`selfplay.jobs.verification`: a second exec in the same
sandbox); +1 needs both runs to pass, and a prediction that passes only in the main run gets -1 with the
disagreement in `GradeResult.verification`. A main run that fails is -1 whatever the verification would
say, so it gets none ("skipped: the main run failed"). When validation
saw every run report its canaries (`TaskFacts.canaries_reported`), a run without them is tampering.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace

from repos.spec import RepoSpec
from sandboxes.docker import DockerSandbox
from sandboxes.images import repo_image
from sandboxes.reaper import registry
from sandboxes.sandbox import Sandbox
from selfplay.artifact import BugArtifact
from selfplay.diffs import drop_infrastructure
from selfplay.errors import DiffError, ValidationInfraError
from selfplay.facts import Budget, TaskFacts
from selfplay.jobs import Job, SuiteLimits, SuiteRun, run_job, staged_files, verify_run
from selfplay.judge.tamper import screen
from selfplay.judge.verdict import GradeResult, disagreement, failed_grade, grade_statuses

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GraderConfig(SuiteLimits):
    """Time limits and screens of one grading run (the suite limits and tamper screen: `SuiteLimits`)."""

    verify: bool = True
    """Run every prediction whose main run passes a second time under a perturbed environment and require
    the same verdict (`selfplay.jobs.verification`); False only to measure what that costs."""
    budget: Budget = Budget()
    """Wall and CPU budgets of a prediction's runs, from the task's validated suite time (`TaskFacts`);
    `suite_timeout` caps them, and is the budget of a task without measured facts."""


def apply_layers(sb: Sandbox, artifact: BugArtifact, base_patch: str | None = None) -> None:
    """Apply a task's layers to the original tree in `sb`: bug, weakening, and the failed prediction of a
    higher-order task. A layer that no longer applies breaks the task (ValidationInfraError), never the
    solver's grade."""
    for name, diff in (("bug_inject.diff", artifact.bug_inject), ("test_weaken.diff", artifact.test_weaken),
                       ("the failed prediction (higher-order layer)", base_patch)):
        if not diff:
            continue
        res = sb.apply_patch(diff)
        if not res.applied:
            raise ValidationInfraError(f"{name} no longer applies to the original repo ({res.error}); "
                                       "the task is broken, not the prediction")


def build_buggy_state(sb: Sandbox, artifact: BugArtifact, *, base_patch: str | None = None) -> None:
    """Turn a fresh sandbox into the solver's starting point, with no history to leak the answer.

    original -> bug -> weakening (-> failed prediction) -> `Sandbox.rebase`: `.git` becomes one fresh
    commit, and the reset snapshot becomes this state (no copy of the original is left in the sandbox).
    """
    apply_layers(sb, artifact, base_patch)
    sb.rebase()  # also replaces the reset snapshot and the grader-owned git dir


def grade_prediction(sb: Sandbox, artifact: BugArtifact, prediction: str, fail_to_pass: tuple[str, ...],
                     pass_to_pass: tuple[str, ...], *, spec: RepoSpec, base_patch: str | None = None,
                     config: GraderConfig = GraderConfig(), reset: bool = True,
                     facts: TaskFacts = TaskFacts()) -> GradeResult:
    """Grade `prediction` (a diff over the buggy state) in `sb`, which is reset first unless `reset` is
    False (a sandbox fresh from a pool is already clean). `facts` (from the task's validation) set the
    time budgets and whether the canaries must report.

    Model failures (garbage diff, does not apply, parser fails on the output) give -1 with a reason;
    sandbox failures raise ValidationInfraError.
    """
    tests = {"fail_to_pass": tuple(fail_to_pass), "pass_to_pass": tuple(pass_to_pass)}
    try:
        filtered = drop_infrastructure(prediction, test_files=artifact.test_files,
                                       test_patterns=spec.test_patterns, script=artifact.test_script)
    except DiffError as exc:
        return failed_grade(f"the prediction is not a valid diff: {exc}", **tests)
    if prediction.strip() and not filtered.kept.strip() and not filtered.dropped:
        return failed_grade("prediction is not a unified diff (no `diff --git` or `---/+++` file sections)", **tests)
    dropped = filtered.dropped
    if dropped:
        log.info("grading: dropped %d test-infrastructure section(s): %s", len(dropped), "; ".join(dropped))
    if (tamper := screen(filtered.kept, config.tamper)) is not None:
        return failed_grade(f"runner tampering: {tamper}", dropped_hunks=dropped, tamper=tamper, **tests)
    if reset:
        sb.reset()
    grader = _Grading(sb, artifact, base_patch, config, facts, dropped, tests)
    run = grader.run(filtered.kept)
    result = grader.main_verdict(run)
    if not config.verify:
        return result
    if not result.resolved:  # -1 whatever the verification says: it does not run (its copy is stale)
        return replace(result, verification=SKIPPED)
    run = grader.verify(run)
    if (failed := _stopped(run.verification)) is not None:
        grader.control(failed, verify=True)
        return failed_grade(f"the prediction's run failed: {failed}", dropped_hunks=dropped, **tests)
    if run.verification.statuses is None:
        return failed_grade(f"the verification run failed: {run.verification.error}", dropped_hunks=dropped,
                            integrity=result.integrity, verification=f"disagree: {run.verification.error}", **tests)
    expected = {t: "passed" for t in (*fail_to_pass, *pass_to_pass)}
    if (differ := disagreement(run.statuses, run.verification.statuses, expected)) is not None:
        log.info("grading: %s", differ)
        return failed_grade(f"verification run: {differ}", dropped_hunks=dropped, integrity=result.integrity,
                            verification=differ, **tests)
    return replace(result, verification="agree")


SKIPPED = "skipped: the main run failed"
"""`GradeResult.verification` of a prediction whose main run already earns -1."""


def _stopped(run: SuiteRun | None) -> str | None:
    """Why the job, its main run or its verification run did not finish (died, timed out, over budget)."""
    for part in (run, run.verification if run is not None else None):
        if part is not None and (part.died or part.timed_out):
            return part.error
    return None


@dataclass(frozen=True)
class _Grading:
    """The sandbox work of one grade: the main job, its verdict, the verification run and control runs."""

    sb: Sandbox
    artifact: BugArtifact
    base_patch: str | None
    config: GraderConfig
    facts: TaskFacts
    dropped: tuple[str, ...]
    tests: dict
    started: float = field(default_factory=time.monotonic)

    def limits(self) -> dict:
        wall = self.config.budget.seconds(self.facts.suite_time, self.config.suite_timeout)
        cpu = self.facts.suite_cpu
        return dict(suite_timeout=wall, parser_timeout=self.config.parser_timeout,
                    max_output=self.config.max_test_output,
                    cpu_limit=None if cpu is None else self.config.budget.seconds(cpu, self.config.suite_timeout))

    def run(self, kept: str) -> SuiteRun:
        """The main job (with the verification copy when `config.verify`)."""
        layers = ("bug_inject.diff", "test_weaken.diff") + (("layer.diff",) if self.base_patch else ())
        job = Job(patches=layers, edits=("prediction.diff",) if kept.strip() else (), restore=self.artifact.test_files,
                  verify=self.config.verify)
        return run_job(self.sb, self.artifact, job, **self.limits(),
                       stage=staged_files(self.artifact, **{"layer.diff": self.base_patch or "",
                                                            "prediction.diff": kept}))

    def verify(self, run: SuiteRun) -> SuiteRun:
        return verify_run(self.sb, self.artifact, run, **self.limits())

    def control(self, failed: str, *, verify: bool = False) -> None:
        """The prediction's run `failed` (died, timed out): the prediction's fault unless the task cannot
        run either. A control with an empty prediction on the reset sandbox, with its verification run
        too when that is where the prediction's failed; raises ValidationInfraError when it fails, and
        without a control after a signal removed the sandboxes (Ctrl-C): the run died of that."""
        if registry.signalled_since(self.started):
            raise ValidationInfraError(f"interrupted: the process removed its sandboxes on a signal ({failed})")
        self.sb.reset()
        control = self.run("")
        if verify and _stopped(control) is None and control.pending is not None:
            control = self.verify(control)
        if (broken := _stopped(control)) is not None or control.statuses is None:
            raise ValidationInfraError(f"the task cannot run: a control run with an empty prediction failed too "
                                       f"({broken or control.error}); the prediction's run: {failed}")

    def main_verdict(self, run: SuiteRun) -> GradeResult:
        """The verdict of the main run alone (the verification can only turn a +1 into -1)."""
        dropped, tests = self.dropped, self.tests
        if (failed := _stopped(run)) is not None:
            self.control(failed)
            return failed_grade(f"the prediction's run failed: {failed}", dropped_hunks=dropped, **tests)
        if run.apply_error and not run.apply_error.startswith("prediction.diff:"):
            raise ValidationInfraError(f"the task's own layers no longer apply ({run.apply_error}); "
                                       "the task is broken, not the prediction")
        if run.apply_error:
            return failed_grade(f"the prediction does not apply to the buggy state: "
                                f"{run.apply_error.partition(': ')[2]}", dropped_hunks=dropped, **tests)
        if run.statuses is None:
            return failed_grade(run.error or "no test results", dropped_hunks=dropped, **tests)
        integrity = run.integrity
        if not run.tampered and self.facts.canaries_reported and integrity.startswith("inconclusive"):
            integrity = ("tampered: the canary tests were not reported, though every validation run of this task "
                         "reported them (the run was cut short, or its output rewritten)")
        if integrity.startswith("tampered"):
            return failed_grade(f"run integrity: {integrity}", dropped_hunks=dropped, tamper=integrity,
                                integrity=integrity, **tests)
        return grade_statuses(run.statuses, tests["fail_to_pass"], tests["pass_to_pass"], dropped_hunks=dropped,
                              integrity=integrity)


def grade(artifact: BugArtifact, prediction: str, fail_to_pass: tuple[str, ...], pass_to_pass: tuple[str, ...],
          *, spec: RepoSpec, pool=None, base_patch: str | None = None,
          config: GraderConfig = GraderConfig(), facts: TaskFacts = TaskFacts()) -> GradeResult:
    """Grade in a sandbox from `pool` (a `sandboxes.pool.SandboxPool`), or in a new one of the repo's image."""
    if pool is not None:
        with pool.checkout() as sb:
            return grade_prediction(sb, artifact, prediction, fail_to_pass, pass_to_pass, spec=spec,
                                    base_patch=base_patch, config=config, reset=False, facts=facts)
    sb = DockerSandbox.create(repo_image(spec), workdir=spec.workdir)
    try:
        return grade_prediction(sb, artifact, prediction, fail_to_pass, pass_to_pass, spec=spec,
                                base_patch=base_patch, config=config, reset=False, facts=facts)
    finally:
        sb.close()
