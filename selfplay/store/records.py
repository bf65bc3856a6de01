"""Frozen dataclasses the store returns: rows leave the store as plain data, never as ORM objects."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from selfplay.artifact import BugArtifact

STATUSES = ("active", "retired", "invalid")
"""A task's lifecycle states (TaskRow.status)."""
ORIGINS = ("injector", "procedural", "higher_order", "imported")
"""Where a task came from (TaskRow.origin)."""


@dataclass(frozen=True)
class RepoRecord:
    name: str
    image: str | None = None
    """Docker image tag the repo's tasks run in."""
    base_commit: str | None = None
    """Commit of the clean repo inside the image (SWE-bench's base_commit)."""
    version: str | None = None
    """Release of the repo (SWE-bench's version)."""


@dataclass(frozen=True)
class CheckRecord:
    """One validation check as stored (mirrors selfplay.validation.CheckResult)."""

    name: str
    passed: bool
    detail: str = ""


@dataclass(frozen=True)
class ArtifactRecord:
    artifact_id: str
    repo: str
    artifact: BugArtifact
    origin: str
    """injector | procedural | higher_order | imported."""
    order: int
    strategy: str | None
    """Injection strategy (removal, history, direct, a procedural operator, ...)."""
    parent_id: str | None
    """Parent artifact (higher-order artifacts)."""
    diff_hash: str
    hashes: dict[str, str]
    """sha256 of each of the five files, by file name."""
    valid: bool | None
    error: str | None
    episode_id: str | None
    checks: tuple[CheckRecord, ...]
    created_at: datetime


@dataclass(frozen=True)
class StoredArtifact:
    """What `TaskStore.record_artifact` stored: the artifact's id, and its task when valid."""

    artifact_id: str
    """Content address of the artifact (every attempt of an injector needs one)."""
    task_id: str | None
    """The task of a valid artifact; None for an invalid one."""
    duplicate: bool = False
    """True when `task_id` is an older task with the same normalised diff hash in the repo: its solve
    statistics predate this artifact, so a caller that measures this artifact's solve rate (the injector's
    reward) must not read them as its own."""


@dataclass(frozen=True)
class TaskStats:
    """A task's solve statistics plus what sampling needs to know about it."""

    task_id: str
    repo: str
    status: str
    family: str
    """Group that per-parent caps count (root task or parent artifact)."""
    diff_hash: str
    attempts: int = 0
    solves: int = 0
    recent: str = ""
    """Last solver outcomes, '1' solved / '0' not, newest last."""
    order: int = 1
    origin: str = "injector"
    created_at: datetime | None = None

    @property
    def solve_rate(self) -> float | None:
        return self.solves / self.attempts if self.attempts else None

    @property
    def recent_rate(self) -> float | None:
        return self.recent.count("1") / len(self.recent) if self.recent else None


@dataclass(frozen=True)
class AttemptRecord:
    id: int
    task_id: str | None
    role: str
    policy_version: int
    reward: float
    solved: bool
    turns: int
    tokens: int
    termination: str
    trajectory_path: str | None
    wall_time: float
    run_id: str | None
    artifact_id: str | None
    created_at: datetime
    source: str = "policy"
    """"policy" or "demo" (see `ATTEMPT_SOURCES`)."""


ATTEMPT_SOURCES = ("policy", "demo")
"""Who produced an attempt: the policy being trained, or a scripted expert (`selfplay demos`)."""


@dataclass(frozen=True)
class RunRecord:
    run_id: str
    config: dict
    started_at: datetime
    note: str | None = None


@dataclass(frozen=True)
class CheckpointRecord:
    run_id: str
    version: int
    path: str
    created_at: datetime
