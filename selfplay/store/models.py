"""SQLAlchemy 2.0 models of the curriculum store. Sessions never leave `selfplay.store`; callers get the
frozen dataclasses of `selfplay.store.records`.

Solve statistics are maintained incrementally in `task_stats` (one row per task, updated in the same
transaction as the attempt that changes them) because sampling 256 tasks out of 100k must not aggregate
a million attempts (see docs/benchmarks.md, "Store"). `recent` keeps the last `RECENT_WINDOW` solver
outcomes as a string of '0'/'1', newest last, so "solved in all of the last K" is a suffix test.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

UNSEEN_SQL = "status = 'active' AND attempts = 0"
"""The partial index's condition; queries must spell it with literals for planners to use the index."""

RECENT_WINDOW = 32
"""How many of the latest solver outcomes each task keeps (the 'recent window')."""

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator):
    """Timezone-aware UTC datetimes on every engine (SQLite would hand back naive ones)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value, dialect):
        if value is not None and value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: the store keeps timezone-aware UTC times")
        return value.astimezone(UTC) if value is not None else None

    def process_result_value(self, value, dialect):
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class RepoRow(Base):
    __tablename__ = "repos"
    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    image: Mapped[str | None] = mapped_column(String(400))
    base_commit: Mapped[str | None] = mapped_column(String(80))
    version: Mapped[str | None] = mapped_column(String(80))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class RunRow(Base):
    __tablename__ = "runs"
    run_id: Mapped[str] = mapped_column(String(100), primary_key=True)
    config: Mapped[str] = mapped_column(Text, default="{}")
    """JSON of the run configuration."""
    started_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    note: Mapped[str | None] = mapped_column(Text)


class CheckpointRow(Base):
    __tablename__ = "checkpoints"
    __table_args__ = (UniqueConstraint("run_id", "version"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.run_id", ondelete="CASCADE"))
    version: Mapped[int] = mapped_column(Integer)
    path: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class ArtifactRow(Base):
    __tablename__ = "artifacts"
    __table_args__ = (Index(None, "repo", "diff_hash"),)
    artifact_id: Mapped[str] = mapped_column(String(100), primary_key=True)
    """Content address: hash of the repo and the five files."""
    repo: Mapped[str] = mapped_column(ForeignKey("repos.name"))
    test_script: Mapped[str] = mapped_column(Text)
    test_files: Mapped[str] = mapped_column(Text)
    """test_files.txt content: one path a line."""
    test_parser: Mapped[str] = mapped_column(Text)
    bug_inject: Mapped[str] = mapped_column(Text)
    test_weaken: Mapped[str] = mapped_column(Text)
    hashes: Mapped[str] = mapped_column(Text)
    """JSON {file name: sha256} of the five files."""
    diff_hash: Mapped[str] = mapped_column(String(64))
    """Normalised hash of bug_inject.diff (whitespace, context and header noise removed)."""
    origin: Mapped[str] = mapped_column(String(20))
    order: Mapped[int] = mapped_column(Integer, default=1)
    strategy: Mapped[str | None] = mapped_column(String(100))
    parent_id: Mapped[str | None] = mapped_column(ForeignKey("artifacts.artifact_id"))
    episode_id: Mapped[str | None] = mapped_column(String(100))
    valid: Mapped[bool | None] = mapped_column(Boolean)
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class CheckResultRow(Base):
    __tablename__ = "check_results"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    artifact_id: Mapped[str] = mapped_column(
        ForeignKey("artifacts.artifact_id", ondelete="CASCADE"), index=True
    )
    position: Mapped[int] = mapped_column(Integer)
    name: Mapped[str] = mapped_column(String(100))
    passed: Mapped[bool] = mapped_column(Boolean)
    detail: Mapped[str] = mapped_column(Text, default="")


class TaskRow(Base):
    __tablename__ = "tasks"
    __table_args__ = (
        UniqueConstraint("repo", "diff_hash"),
        Index(None, "status", "repo"),
        Index(None, "parent_id"),  # higher-order children of a task (TaskStore.used_failed_patches)
    )
    task_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    repo: Mapped[str] = mapped_column(ForeignKey("repos.name"))
    artifact_id: Mapped[str] = mapped_column(ForeignKey("artifacts.artifact_id"))
    fail_to_pass: Mapped[str] = mapped_column(Text)
    """JSON list of test ids."""
    pass_to_pass: Mapped[str] = mapped_column(Text)
    """JSON list of test ids."""
    status: Mapped[str] = mapped_column(String(10), default="active")
    origin: Mapped[str] = mapped_column(String(20))
    order: Mapped[int] = mapped_column(Integer, default=1)
    parent_id: Mapped[str | None] = mapped_column(ForeignKey("tasks.task_id"))
    pred_patch: Mapped[str | None] = mapped_column(Text)
    diff_hash: Mapped[str] = mapped_column(String(64))
    """Normalised hash of the buggy state (bug diff plus, for higher orders, the failed prediction)."""
    family: Mapped[str] = mapped_column(String(200))
    """What per-parent caps count: the root task of a higher-order chain, else the parent artifact or
    the task itself."""
    meta: Mapped[str] = mapped_column(Text, default="{}")
    retired_reason: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class TaskStatsRow(Base):
    """Solve statistics plus a copy of what sampling filters on, so that the sampling walk reads one
    covering index and no table rows (status mirrors tasks.status; the rest never changes)."""

    __tablename__ = "task_stats"
    __table_args__ = (
        # Sampling walks this index from a random rand_key (see queries.candidate_pool).
        Index(
            "ix_task_stats_sampling",
            "status",
            "rand_key",
            "attempts",
            "solves",
            "recent",
            "repo",
            "family",
            "diff_hash",
            "task_id",
        ),
        # Unseen tasks are few once a run is under way: a partial index lets their walk skip the rest.
        Index(
            "ix_task_stats_unseen",
            "rand_key",
            "status",
            "attempts",
            "solves",
            "recent",
            "repo",
            "family",
            "diff_hash",
            "task_id",
            sqlite_where=text(UNSEEN_SQL),
            postgresql_where=text(UNSEEN_SQL),
        ),
    )
    task_id: Mapped[str] = mapped_column(ForeignKey("tasks.task_id", ondelete="CASCADE"), primary_key=True)
    status: Mapped[str] = mapped_column(String(10), default="active")
    rand_key: Mapped[float] = mapped_column(Float)
    """Uniform in [0, 1), fixed at insert: random sampling becomes an indexed range scan."""
    repo: Mapped[str] = mapped_column(String(200))
    family: Mapped[str] = mapped_column(String(200))
    diff_hash: Mapped[str] = mapped_column(String(64))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    solves: Mapped[int] = mapped_column(Integer, default=0)
    recent: Mapped[str] = mapped_column(String(RECENT_WINDOW), default="")
    last_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class AttemptRow(Base):
    __tablename__ = "attempts"
    __table_args__ = (Index(None, "task_id", "id"), Index(None, "run_id", "role"))
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    task_id: Mapped[str | None] = mapped_column(ForeignKey("tasks.task_id", ondelete="CASCADE"))
    artifact_id: Mapped[str | None] = mapped_column(ForeignKey("artifacts.artifact_id"))
    run_id: Mapped[str | None] = mapped_column(ForeignKey("runs.run_id"))
    role: Mapped[str] = mapped_column(String(20))
    policy_version: Mapped[int] = mapped_column(Integer)
    reward: Mapped[float] = mapped_column(Float)
    solved: Mapped[bool] = mapped_column(Boolean)
    turns: Mapped[int] = mapped_column(Integer)
    tokens: Mapped[int] = mapped_column(Integer)
    termination: Mapped[str] = mapped_column(String(40))
    trajectory_path: Mapped[str | None] = mapped_column(Text)
    wall_time: Mapped[float] = mapped_column(Float, default=0.0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    source: Mapped[str] = mapped_column(String(20), default="policy", server_default="policy")
    """"policy" (an episode of the policy being trained) or "demo" (a scripted expert's demonstration)."""
