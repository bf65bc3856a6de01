"""Episode requests and results: what the run loop asks a rollout worker to play, and what comes back.

The loop never touches a sandbox: it builds `EpisodeRequest`s, hands them to an `EpisodeExecutor` (threads
in `executor.py`, Ray actors in `ray_executor.py`), and consumes one `EpisodeResult` per request. A worker
turns a request into a result with a `RequestRunner` (`worker.build_runner`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

from agent_scaffold.artifact_kit import KitView

if TYPE_CHECKING:
    from agent_scaffold.trajectory import Trajectory
    from selfplay.artifact import BugArtifact
    from selfplay.judge.verdict import GradeResult
    from selfplay.task import Task
    from selfplay.validation.report import ValidationReport

Role = Literal["injector", "solver"]


@dataclass(frozen=True)
class EpisodeRequest:
    """One episode to play."""

    episode_id: str
    """Unique and deterministic: f"{run_id}-it{iteration}-{role}-{index}"."""
    role: Role
    repo: str
    """Name in the repo list."""
    iteration: int
    policy_version: int
    """Policy version when requested (for staleness)."""
    strategy: str | None = None
    """Injector: the injection strategy (removal, history, direct)."""
    task: Task | None = None
    """Solver: the stored task (artifact, FAIL_TO_PASS/PASS_TO_PASS from the store)."""
    group_id: str | None = None
    """Solver: one group per (task, iteration)."""
    seed: int | None = None
    """Sampling seed."""
    seen: frozenset[str] = frozenset()
    """Solver: normalised hashes of the failed patches that already made higher-order tasks of `task`
    (`store.used_failed_patches(task_id)`), so a worker without the store does not derive one twice."""
    kit_view: KitView | None = None
    """Injector (`kit`, `rollout.kit_store_view`): what its kit is told of the store as the iteration starts
    (the lines its repo's bugs already change) and of its round (`next_function`, `share`)."""


@dataclass(frozen=True)
class EpisodeResult:
    """What one episode produced; exactly one per request."""

    request: EpisodeRequest
    trajectory: Trajectory | None
    """None when the episode never started (infrastructure failure)."""
    termination: str
    """run_episode's ending (submitted, max_turns, ...) or "infra_failure"."""
    infra_failure: bool
    """Not the model's fault (dead sandbox, validation infrastructure, lost worker): never trained on."""
    error: str | None
    submission: str | dict[str, str] | None
    """Solver: the diff; injector: {artifact file: text}."""
    grade: GradeResult | None = None
    """Solver."""
    validation: ValidationReport | None = None
    """Injector, when the artifact parsed and validation ran."""
    artifact: BugArtifact | None = None
    """Injector, when all five files parse."""
    higher_order: Task | None = None
    """Solver, failed: the derived higher-order task."""
    unplayable: str | None = None
    """Solver: why the task was not attempted, because no attempt by this policy could take a turn (its
    spec leaves no room, `RolloutConfig.refuse_unreadable_specs`). Nothing is graded, recorded or trained;
    the loop retires the task with this reason."""
    timings: dict[str, float] = field(default_factory=dict)
    """Seconds: wall, model, sandbox, validation, grading."""
    worker: str = ""
    """Which worker played it (thread or actor name, host)."""


class RequestRunner(Protocol):
    """Plays one request; infrastructure failures come back as results, never as exceptions."""

    def __call__(self, request: EpisodeRequest) -> EpisodeResult: ...


class EpisodeExecutor(Protocol):
    """Runs requests somewhere (threads, Ray actors)."""

    def run(self, requests: Sequence[EpisodeRequest]) -> Iterator[EpisodeResult]:
        """Yield exactly one result per request, as they complete; infrastructure failures are retried
        up to `rollout.episode_retries` times, then yielded with infra_failure=True."""
        ...

    def close(self) -> None: ...


def infra_failure_result(request: EpisodeRequest, error: str, *, timings: dict[str, float] | None = None,
                         worker: str = "") -> EpisodeResult:
    """The result of an episode lost to infrastructure (no trajectory, nothing to train on)."""
    return EpisodeResult(request=request, trajectory=None, termination="infra_failure", infra_failure=True,
                         error=error, submission=None, timings=dict(timings or {}), worker=worker)
