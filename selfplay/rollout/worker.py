"""`build_runner`: the rollout worker, which turns an `EpisodeRequest` into an `EpisodeResult`.

An injector request runs the episode in a pooled sandbox of its repo, gives the sandbox back, parses the
submitted files (`BugArtifact.from_files`) and validates them with the same pool, unless its spec would
leave the solver no room for a turn (`RolloutConfig.refuse_unreadable_specs`: invalid, before any suite
run). A solver request whose stored task has such a spec comes back unplayed (`EpisodeResult.unplayable`;
the loop retires the task); any other builds the task's buggy state (`build_buggy_state`) in a pooled
sandbox, runs the episode, grades the diff in another pooled sandbox and, when the attempt failed, derives
a higher-order task. The solver's sandbox is recreated before it goes back: `build_buggy_state` rebases
it, which moves its reset snapshot to the buggy tree for good.

Deadlock freedom: a request never holds a sandbox while it waits for another (the episode's sandbox goes
back before validation or grading starts), and validations of one repo, the only users that hold several
sandboxes at once, are admitted only as many at a time as the pool can serve together
(`pool.size // validation.parallelism`, at least one). Everything else holds one sandbox for a bounded time.

What the model wrote is hostile: a missing or garbage artifact file is an invalid verdict with its reason,
never an exception; a sandbox or validation-infrastructure failure is an infrastructure failure (never
trained on), and so is any other unexpected error after the episode (it is logged with its traceback).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from agent_scaffold.agent import first_turn_room, run_episode
from agent_scaffold.localize import Localizer
from agent_scaffold.policy import TRAINING, Policy
from agent_scaffold.roles import EpisodeLimits, RoleConfig, load_role, solver_variables
from repos.listfile import get_repo
from sandboxes.errors import SandboxError
from sandboxes.images import repo_image
from sandboxes.pool import SandboxPool
from selfplay.artifact import BugArtifact
from selfplay.config.run_config import LimitsOverride, RunConfig
from selfplay.diffs import reverse_diff
from selfplay.errors import DiffError, SelfPlayError, ValidationInfraError
from selfplay.facts import TaskFacts
from selfplay.higher_order import make_higher_order_task
from selfplay.judge.grader import build_buggy_state, grade
from selfplay.judge.verdict import failed_grade
from selfplay.rollout.policy_factory import PolicySource, policy_source
from selfplay.rollout.requests import EpisodeRequest, EpisodeResult, RequestRunner, infra_failure_result
from selfplay.validation import validate
from selfplay.validation.report import ValidationReport, unreadable_spec_error

log = logging.getLogger(__name__)


def episode_limits(role: RoleConfig, override: LimitsOverride) -> EpisodeLimits:
    """The role's budgets with the run's overrides. `run_episode` lowers the context budget to the model's
    window (`agent_scaffold.agent.fit_context_window`)."""
    return role.limits.overridden(**{f.name: getattr(override, f.name) for f in dataclasses.fields(override)})


class Worker:
    """A `RequestRunner` with one sandbox pool per repo (created on first use) and one policy source;
    thread-safe, so one instance serves every thread of a process."""

    def __init__(self, config: RunConfig, source: PolicySource, run_id: str = "", name: str = "") -> None:
        self.config, self.source, self.run_id = config, source, run_id
        self.name = name or f"{socket.gethostname()}:{os.getpid()}"
        self._pools: dict[str, Any] = {}
        self._specs: dict[str, Any] = {}
        self._admit: dict[str, threading.Semaphore] = {}
        self._lock = threading.Lock()

    # --- resources -------------------------------------------------------------------------------------

    def spec(self, repo: str):
        with self._lock:
            if repo not in self._specs:
                self._specs[repo] = get_repo(repo, self.config.repo_list)
            return self._specs[repo]

    def pool(self, repo: str):
        """The repo's sandbox pool, started on first use (under the lock: one pool per repo)."""
        spec = self.spec(repo)
        with self._lock:
            if repo not in self._pools:
                size = self.config.rollout.sandboxes_per_repo
                self._pools[repo] = SandboxPool(repo_image(spec), size=size, workdir=spec.workdir,
                                                run_id=self.run_id or None)
                self._admit[repo] = threading.Semaphore(max(1, size // max(1, self.config.validation.parallelism)))
            return self._pools[repo]

    def close(self) -> None:
        """Remove every sandbox of every pool. Idempotent."""
        with self._lock:
            pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            pool.close()

    # --- requests --------------------------------------------------------------------------------------

    def __call__(self, request: EpisodeRequest) -> EpisodeResult:
        start = time.monotonic()
        timings: dict[str, float] = {}
        try:
            if request.role == "injector":
                result = self._injector(request, timings)
            elif request.role == "solver":
                result = self._solver(request, timings)
            else:
                raise ValueError(f"unknown role {request.role!r}; requests are injector or solver")
        except (SandboxError, ValidationInfraError) as exc:
            log.warning("episode %s: infrastructure failure: %s", request.episode_id, exc)
            result = infra_failure_result(request, f"{exc.__class__.__name__}: {exc}", timings=timings)
        timings["wall"] = time.monotonic() - start
        return dataclasses.replace(result, timings=timings, worker=self.name)

    def _episode(self, request: EpisodeRequest, policy: Policy, sb: Any, role: RoleConfig, variables: dict[str, Any],
                 override: LimitsOverride, timings: dict[str, float], localizer: Localizer | None = None,
                 submit_check: Callable[[str | dict[str, str]], str | None] | None = None):
        limits = episode_limits(role, override)
        ep = run_episode(policy, sb, role, variables, limits=limits, sampling=TRAINING.with_(
            seed=request.seed, temperature=self.config.rollout.temperature), localizer=localizer,
            kit_view=request.kit_view, submit_check=submit_check)
        timings["model"] = timings.get("model", 0.0) + ep.timings.get("model", 0.0)
        timings["sandbox"] = timings.get("sandbox", 0.0) + ep.timings.get("sandbox", 0.0)
        return ep

    def _after_episode(self, request: EpisodeRequest, ep, exc: Exception, timings: dict[str, float]) -> EpisodeResult:
        """An unexpected error after a finished episode: kept as an infrastructure failure, trajectory and all."""
        if not isinstance(exc, (SandboxError, ValidationInfraError)):
            log.exception("episode %s: unexpected error after the episode", request.episode_id)
        return EpisodeResult(request=request, trajectory=ep.trajectory, termination=ep.termination,
                             infra_failure=True, error=f"{exc.__class__.__name__}: {exc}",
                             submission=ep.submission, timings=timings)

    def _checked(self, request: EpisodeRequest, ep, pool, timings: dict[str, float], check) -> EpisodeResult:
        """`check(request, ep, pool, timings)` (validation or grading) of a finished episode. An episode that
        failed on infrastructure is not checked; an error of our own in the check keeps the episode."""
        if ep.infra_failure:
            return EpisodeResult(request, ep.trajectory, ep.termination, True, ep.error, ep.submission, timings=timings)
        try:
            return check(request, ep, pool, timings)
        except Exception as exc:  # never lose the episode to our own failure
            return self._after_episode(request, ep, exc, timings)

    def _injector(self, request: EpisodeRequest, timings: dict[str, float]) -> EpisodeResult:
        role = load_role("injector", request.strategy or "removal")
        pool = self.pool(request.repo)
        policy = self.source.policy_for(request.role, request.policy_version)

        def spec_check(files: str | dict[str, str]) -> str | None:  # a refused submit says why (refused_submits)
            weaken = files.get("test_weaken.diff") if isinstance(files, dict) else None
            # the rule is applied again before validation, so an error of ours here lets the submit stand
            return _lenient(lambda: self._unreadable_spec(request.repo, weaken, policy) if weaken else None,
                            request.episode_id, "at a submit", "the submit stands")

        with pool.checkout() as sb:  # given back before validation, which needs sandboxes of this pool
            ep = self._episode(request, policy, sb, role, {}, self.config.rollout.injector_limits, timings,
                               submit_check=spec_check)
        return self._checked(request, ep, pool, timings,
                             lambda *args: self._validated(*args, policy=policy))

    def _validated(self, request: EpisodeRequest, ep, pool, timings: dict[str, float], *,
                   policy: Policy) -> EpisodeResult:
        files = ep.submission if isinstance(ep.submission, dict) else None
        if files is None:  # not submitted (nor taken at a limit, `EpisodeLimits.submit_on_limit`)
            report = ValidationReport(valid=False, error=f"no artifact submitted (the episode ended {ep.termination})")
            return EpisodeResult(request, ep.trajectory, ep.termination, False, None, files, validation=report,
                                 timings=timings)
        try:
            artifact = BugArtifact.from_files(files)
        except (SelfPlayError, ValueError) as exc:  # missing or unparsable files: the model's fault
            report = ValidationReport(valid=False, error=str(exc))
            return EpisodeResult(request, ep.trajectory, ep.termination, False, None, files, validation=report,
                                 timings=timings)
        unreadable = self._unreadable_spec(request.repo, artifact.test_weaken, policy)
        if unreadable is not None:  # no suite runs for a bug no solver could be shown
            return EpisodeResult(request, ep.trajectory, ep.termination, False, None, files,
                                 validation=ValidationReport(valid=False, error=unreadable), artifact=artifact,
                                 timings=timings)
        t0 = time.monotonic()
        try:
            with self._admit[request.repo]:
                report = validate(artifact, self.spec(request.repo), self.config.validation, pool=pool)
        finally:
            timings["validation"] = time.monotonic() - t0
        return EpisodeResult(request, ep.trajectory, ep.termination, False, None, files, validation=report,
                             artifact=artifact, timings=timings)

    def _unreadable_spec(self, repo: str, test_weaken: str, policy: Policy) -> str | None:
        """Why no solver attempt on the task of a bug weakened by `test_weaken` could take a turn
        (`RolloutConfig.refuse_unreadable_specs`), or None. `policy` is the injector's: one policy plays both
        roles, so the solver reads with its tokenizer and window. A test_weaken.diff that does not reverse
        is left to validation, which names the problem. Asked at a submit too, where
        `injector_limits.refused_submits` lets the injector hear it and weaken again."""
        try:
            spec = reverse_diff(test_weaken)
        except DiffError:
            return None
        return self._spec_room_error(repo, spec, policy, load_role("solver"))

    def _spec_room_error(self, repo: str, spec: str, policy: Policy, role: RoleConfig) -> str | None:
        """Why a solver (`role`) with `policy` could take no first turn on a task of `repo` whose spec is
        `spec`, or None (always, without `RolloutConfig.refuse_unreadable_specs`)."""
        if not self.config.rollout.refuse_unreadable_specs:
            return None
        limits = episode_limits(role, self.config.rollout.solver_limits)
        room = first_turn_room(policy, role, solver_variables(spec, "tests"), self.spec(repo).workdir, limits,
                               localize=self.config.rollout.solver_localize)
        return None if room >= limits.min_turn_tokens else unreadable_spec_error(room, limits.min_turn_tokens)

    def _solver(self, request: EpisodeRequest, timings: dict[str, float]) -> EpisodeResult:
        task = request.task
        if task is None:
            raise ValueError(f"solver request {request.episode_id} carries no task")
        role = load_role("solver")
        policy = self.source.policy_for(request.role, request.policy_version)
        # Validation refuses a bug no solver can read, but a store can hold tasks it never judged so: procedural
        # seeds, tasks from before the rule, or from a run with a larger solver context or another model.
        unreadable = _lenient(lambda: self._spec_room_error(request.repo, task.spec, policy, role),
                              request.episode_id, "of a stored task", "the attempt is played")
        if unreadable is not None:  # before any sandbox: no turn could be taken, so nothing to grade or train
            return EpisodeResult(request, None, "spec_too_long", False, unreadable, None, unplayable=unreadable,
                                 timings=timings)
        pool = self.pool(request.repo)
        # The rebase makes the buggy state this sandbox's reset snapshot; the pool recreates a rebased sandbox
        # when it is given back (in the background), so no buggy tree reaches validation or grading.
        with pool.checkout() as sb:
            t0 = time.monotonic()
            build_buggy_state(sb, task.artifact, base_patch=task.pred_patch)
            timings["sandbox"] = time.monotonic() - t0
            localizer = task.localizer(self.spec(request.repo).test_command) \
                if self.config.rollout.solver_localize else None
            ep = self._episode(request, policy, sb, role, solver_variables(task.spec, "tests"),
                               self.config.rollout.solver_limits, timings, localizer)
        return self._checked(request, ep, pool, timings, self._graded)

    def _graded(self, request: EpisodeRequest, ep, pool, timings: dict[str, float]) -> EpisodeResult:
        task, spec = request.task, self.spec(request.repo)
        prediction = ep.submission if isinstance(ep.submission, str) else ""
        if ep.submission is None:  # nothing to run: an unsubmitted attempt fails (-1)
            result = failed_grade(f"the episode ended {ep.termination} without a submission",
                                  fail_to_pass=task.fail_to_pass, pass_to_pass=task.pass_to_pass)
            return EpisodeResult(request, ep.trajectory, ep.termination, False, None, ep.submission, grade=result,
                                 timings=timings)
        t0 = time.monotonic()
        try:
            result = grade(task.artifact, prediction, task.fail_to_pass, task.pass_to_pass, spec=spec, pool=pool,
                           base_patch=task.pred_patch, config=self.config.grader,
                           facts=TaskFacts.from_metadata(task.metadata))
            higher = None
            if not result.resolved and prediction.strip():
                seen = set(request.seen)  # a copy: make_higher_order_task adds to it
                with pool.checkout() as sb:
                    higher = make_higher_order_task(task, prediction, spec=spec, sb=sb, seen=seen,
                                                    config=self.config.curriculum.higher_order,
                                                    grader_config=self.config.grader)
        finally:
            timings["grading"] = time.monotonic() - t0
        return EpisodeResult(request, ep.trajectory, ep.termination, False, None, ep.submission, grade=result,
                             higher_order=higher, timings=timings)


def _lenient(check: Callable[[], str | None], episode_id: str, where: str, outcome: str) -> str | None:
    """`check()` of the spec rule, or None when it raises: an error of our own in the rule never ends or
    refuses an episode (it is logged with `outcome`, what happens instead)."""
    try:
        return check()
    except Exception:
        log.exception("episode %s: the spec check %s failed; %s", episode_id, where, outcome)
        return None


def build_runner(config: RunConfig, policy: Any = None, run_id: str = "") -> RequestRunner:
    """Everything one process needs to play requests: sandbox pools per repo and the policy (`config.policy`
    when `policy` is None). Call once per process; the returned `Worker` is shared by its threads and has
    `close()`. With `rollout.docker_host` set, this process's sandboxes use that engine (DOCKER_HOST)."""
    host = config.rollout.docker_host
    if host and os.environ.get("DOCKER_HOST") != host:
        log.info("rollout.docker_host: sandboxes of this process run on %s", host)
        os.environ["DOCKER_HOST"] = host  # read by sandboxes.engine.docker_client for every new client
    return Worker(config, policy_source(config.policy, policy), run_id=run_id)
