"""`TaskStore`: the store as the self-play loop, the demonstrations and rejection fine-tuning see it.

`selfplay.store.store.SqlStore` (SQLite or PostgreSQL, from `open_store`) is the implementation; the
`selfplay tasks` commands, export/import and the report use its wider API (repos, runs, retirement by hand).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from selfplay.artifact import BugArtifact
from selfplay.store.records import (
    ArtifactRecord,
    AttemptRecord,
    CheckpointRecord,
    RunRecord,
    StoredArtifact,
    TaskStats,
)
from selfplay.store.sampling import SamplingConfig
from selfplay.task import Task

if TYPE_CHECKING:
    from selfplay.validation.report import ValidationReport


class TaskStore(Protocol):
    """Tasks with their artifacts and validation results, attempts with their rewards, runs and
    checkpoints. Writes are transactions; `record_artifact` and `add_task` deduplicate by the buggy
    state's normalised hash."""

    url: str
    """Where the store is (its URL without a password), for messages."""

    # -- artifacts and tasks
    def record_artifact(self, artifact: BugArtifact, repo: str, report: ValidationReport, *, origin: str,
                        strategy: str | None = None, parent_id: str | None = None, order: int = 1,
                        pred_patch: str | None = None, episode_id: str | None = None) -> StoredArtifact: ...

    def record_validation(self, artifact: BugArtifact, repo: str, report: ValidationReport,
                          **details: Any) -> str | None: ...

    def add_task(self, task: Task, *, status: str = "active", strategy: str | None = None) -> str: ...

    def has_task(self, task_id: str) -> bool: ...

    def get_task(self, task_id: str) -> Task: ...

    def get_tasks(self, task_ids: Sequence[str]) -> list[Task]: ...

    def get_artifact(self, artifact_id: str) -> ArtifactRecord: ...

    def task_episodes(self, task_ids: Iterable[str]) -> dict[str, str | None]: ...

    def task_stats(self, task_ids: Iterable[str] | None = None, *, status: str | None = None,
                   repo: str | None = None, limit: int | None = None) -> list[TaskStats]: ...

    def used_failed_patches(self, parent_task_id: str) -> set[str]: ...

    # -- the curriculum
    def sample_tasks(self, n: int, *, config: SamplingConfig | None = None, rng: random.Random | None = None,
                     origin: str | Sequence[str] | None = None, order: int | Sequence[int] | None = None,
                     repo: str | Sequence[str] | None = None) -> list[Task]: ...

    def retire_exhausted(self, config: SamplingConfig | None = None) -> int: ...

    # -- attempts, runs and checkpoints
    def record_attempt(self, task_id: str | None, *, role: str, policy_version: int, reward: float, turns: int,
                       tokens: int, termination: str, trajectory_path: str | None = None, wall_time: float = 0.0,
                       run_id: str | None = None, solved: bool | None = None, artifact_id: str | None = None,
                       source: str = "policy") -> int: ...

    def attempts(self, task_id: str | None = None, run_id: str | None = None, limit: int | None = None, *,
                 source: str | None = None) -> list[AttemptRecord]: ...

    def register_run(self, run_id: str, config: dict[str, Any] | None = None,
                     note: str | None = None) -> RunRecord: ...

    def register_checkpoint(self, run_id: str, version: int, path: str | Path) -> CheckpointRecord: ...

    def close(self) -> None: ...
