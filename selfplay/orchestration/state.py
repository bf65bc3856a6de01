"""`LoopState`: what the loop needs, beyond the store and the checkpoints, to resume after a crash.

Saved to state.json (atomically) whenever something a resume must not redo has happened: an iteration's
drawn tasks (a resumed iteration attempts the same ones), each injector verdict, the end of a learner
update. Which solver and injector attempts are done is read from the store, never from here, so a crash
between a store write and a state write cannot make an episode count twice.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from selfplay.errors import SelfPlayError
from selfplay.orchestration.rundir import write_json_atomic

COUNTERS = ("injector_episodes", "valid_artifacts", "solver_attempts", "solved", "learner_updates",
            "infra_failures", "skipped_batches", "staleness_dropped", "episodes_dropped", "higher_order_tasks",
            "seeded_tasks", "demonstrated_tasks", "unreadable_tasks")
"""Run totals shown in summary.json (and counted across resumes)."""


class StateError(SelfPlayError, ValueError):
    """state.json cannot be read; the message names the file and what to do."""


@dataclass
class InjectorVerdict:
    """What the store said about one injector episode's artifact."""

    episode_id: str
    repo: str
    strategy: str
    valid: bool
    task_id: str | None = None
    artifact_id: str | None = None
    infra_failure: bool = False
    failed_check: str | None = None
    """Why validation rejected the artifact: the failed check's name, or "error"; None when it was valid or
    never validated (no artifact submitted)."""
    duplicate: bool = False
    """Valid, but the store held its task before this iteration's episodes wrote it (the same normalised bug
    diff), or such a task of the repo is the same bug in other words (`selfplay.task.same_bug`: a changed line
    in common, the same failing tests). Episodes of one iteration that write one new bug are all new."""
    created: bool = False
    """Valid, and its task was made by this episode (the store held no task with its normalised bug diff):
    tasks that the iteration's own episodes made are not among those its other episodes are judged against."""


@dataclass
class IterationProgress:
    """The part of an iteration's rollouts that a resume must reproduce exactly."""

    iteration: int
    policy_version: int
    """Version the iteration's requests were made with."""
    injectors: dict[str, InjectorVerdict] = field(default_factory=dict)
    """Injector episodes whose artifact is recorded, by episode id."""
    tasks: list[str] | None = None
    """Task ids drawn for solver attempts, every round's (None: not drawn yet)."""
    redraws: int = 0
    """Dynamic-sampling rounds drawn after the first (their tasks are in `tasks`)."""
    fresh: list[str] | None = None
    """`rollout.overlap_injectors`: the iteration's own valid bugs, played in a round after the drawn tasks
    (also in `tasks`, after them); None until the injectors have ended."""
    rollouts_done: bool = False
    """Every episode ran and its results are recorded (the iteration waits for the learner)."""
    version_before_train: int | None = None
    """Policy version before this iteration's update; a checkpoint newer than it means the update ran."""


@dataclass
class LoopState:
    run_id: str
    completed: int = 0
    """Iterations finished (rollouts, rewards and learner update)."""
    policy_version: int = 0
    counters: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0))
    started_at: float = 0.0
    wall_s: float = 0.0
    """Wall time of earlier processes of this run (resumes add theirs)."""
    slowest_iteration_s: float = 0.0
    """Longest wall time between the ends of two iterations (for a process's first, from its loop's start):
    `max_hours` projects the next iteration by it."""
    repo_cursor: int = 0
    """Round-robin position in the repo list."""
    baseline: dict[str, Any] = field(default_factory=dict)
    """RunningMeanBaseline.state_dict() (also saved with checkpoints)."""
    progress: dict[int, IterationProgress] = field(default_factory=dict)
    """Iterations with rollouts begun but not finished."""

    def count(self, key: str, n: int = 1) -> None:
        self.counters[key] = self.counters.get(key, 0) + n

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["progress"] = {str(k): v for k, v in data["progress"].items()}
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LoopState:
        progress = {}
        for key, p in (data.get("progress") or {}).items():
            injectors = {k: InjectorVerdict(**v) for k, v in (p.get("injectors") or {}).items()}
            progress[int(key)] = IterationProgress(**{**p, "injectors": injectors})
        counters = {**dict.fromkeys(COUNTERS, 0), **(data.get("counters") or {})}
        return cls(**{**data, "counters": counters, "progress": progress})

    def save(self, path: Path) -> None:
        write_json_atomic(path, self.to_json())

    @classmethod
    def load(cls, path: Path) -> LoopState:
        try:
            return cls.from_json(json.loads(path.read_text()))
        except (OSError, ValueError, TypeError) as exc:
            raise StateError(f"{path} is not a readable loop state ({exc}); the run cannot be resumed from it. "
                             "Start a new run, or restore state.json from a backup") from exc
