"""Read-side SQL of the store: row -> record conversion and the indexed candidate query for sampling.

Sampling must not read 100k rows: each tier's candidates are the first entries of the covering index
`ix_task_stats_sampling (status, rand_key, ...)` at or after a random point (wrapping around), filtered by
the tier's condition without touching table rows. rand_key is fixed and uniform per task (a hash of its
id, `rows.rand_key`), so a random starting point gives a uniformly random subset of the tier, and two
stores of the same tasks give the same subset for the same starting point.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import ColumnElement, Select, and_, func, literal_column, select, text
from sqlalchemy.orm import Session

from selfplay.artifact import BugArtifact
from selfplay.store.models import UNSEEN_SQL, ArtifactRow, AttemptRow, CheckResultRow, TaskRow, TaskStatsRow
from selfplay.store.records import ArtifactRecord, AttemptRecord, CheckRecord, TaskStats
from selfplay.store.sampling import SamplingConfig
from selfplay.task import Task

STATS_COLUMNS = (
    TaskRow.task_id,
    TaskRow.repo,
    TaskRow.status,
    TaskRow.family,
    TaskRow.diff_hash,
    TaskStatsRow.attempts,
    TaskStatsRow.solves,
    TaskStatsRow.recent,
    TaskRow.order,
    TaskRow.origin,
    TaskRow.created_at,
)


def stats_select() -> Select:
    return select(*STATS_COLUMNS).join(TaskStatsRow, TaskStatsRow.task_id == TaskRow.task_id)


def to_stats(row) -> TaskStats:
    return TaskStats(
        task_id=row[0],
        repo=row[1],
        status=row[2],
        family=row[3],
        diff_hash=row[4],
        attempts=row[5],
        solves=row[6],
        recent=row[7],
        order=row[8],
        origin=row[9],
        created_at=row[10],
    )


def artifact_of(row) -> BugArtifact:
    return BugArtifact(
        test_script=row.test_script,
        test_files=tuple(row.test_files.splitlines()),
        test_parser=row.test_parser,
        bug_inject=row.bug_inject,
        test_weaken=row.test_weaken,
    )


def task_select() -> Select:
    """Plain columns (no ORM objects: loading 256 tasks must stay cheap) of tasks with their artifacts."""
    t, a = TaskRow, ArtifactRow
    return select(
        t.task_id,
        t.repo,
        t.artifact_id,
        t.fail_to_pass,
        t.pass_to_pass,
        t.status,
        t.retired_reason,
        t.origin,
        t.order,
        t.parent_id,
        t.pred_patch,
        t.meta,
        a.test_script,
        a.test_files,
        a.test_parser,
        a.bug_inject,
        a.test_weaken,
        a.strategy,
    ).join(a, a.artifact_id == t.artifact_id)


def to_task(row) -> Task:
    """A `Task` from a `task_select()` row."""
    meta = json.loads(row.meta)
    meta.update(status=row.status, artifact_id=row.artifact_id)
    if row.retired_reason and row.status != "active":
        meta["retired_reason"] = row.retired_reason
    if row.strategy:
        meta["strategy"] = row.strategy
    return Task(
        task_id=row.task_id,
        repo=row.repo,
        artifact=artifact_of(row),
        fail_to_pass=tuple(json.loads(row.fail_to_pass)),
        pass_to_pass=tuple(json.loads(row.pass_to_pass)),
        origin=row.origin,
        order=row.order,
        parent_id=row.parent_id,
        pred_patch=row.pred_patch,
        metadata=meta,
    )


def to_artifact_record(row: ArtifactRow, checks: list[CheckResultRow]) -> ArtifactRecord:
    return ArtifactRecord(
        artifact_id=row.artifact_id,
        repo=row.repo,
        artifact=artifact_of(row),
        origin=row.origin,
        order=row.order,
        strategy=row.strategy,
        parent_id=row.parent_id,
        diff_hash=row.diff_hash,
        hashes=json.loads(row.hashes),
        valid=row.valid,
        error=row.error,
        episode_id=row.episode_id,
        checks=tuple(
            CheckRecord(c.name, c.passed, c.detail) for c in sorted(checks, key=lambda c: c.position)
        ),
        created_at=row.created_at,
    )


def to_attempt(row: AttemptRow) -> AttemptRecord:
    return AttemptRecord(
        id=row.id,
        task_id=row.task_id,
        role=row.role,
        policy_version=row.policy_version,
        reward=row.reward,
        solved=row.solved,
        turns=row.turns,
        tokens=row.tokens,
        termination=row.termination,
        trajectory_path=row.trajectory_path,
        wall_time=row.wall_time,
        source=row.source,
        run_id=row.run_id,
        artifact_id=row.artifact_id,
        created_at=row.created_at,
    )


def tier_conditions(config: SamplingConfig) -> list[ColumnElement[bool]]:
    """Unseen, in-band, and anything (for fill-up and retirement), as SQL conditions."""
    if config.rate == "recent":
        count = func.length(TaskStatsRow.recent)
        solves = count - func.length(func.replace(TaskStatsRow.recent, "1", ""))
    else:
        count, solves = TaskStatsRow.attempts, TaskStatsRow.solves
    low, high = config.band
    in_band = and_(TaskStatsRow.attempts > 0, solves >= count * low, solves <= count * high)
    unseen = text(UNSEEN_SQL)  # literal, so it matches ix_task_stats_unseen's WHERE
    return [unseen, in_band, TaskStatsRow.attempts >= 0]


def _values(value: object) -> tuple | None:
    if value is None:
        return None
    return tuple(value) if isinstance(value, (tuple, list, set, frozenset)) else (value,)


@dataclass(frozen=True)
class TaskFilter:
    """Which tasks a draw may return; None on a field means any value."""

    origin: tuple[str, ...] | None = None
    order: tuple[int, ...] | None = None
    repo: tuple[str, ...] | None = None

    @classmethod
    def of(cls, *, origin: str | Sequence[str] | None = None, order: int | Sequence[int] | None = None,
           repo: str | Sequence[str] | None = None) -> TaskFilter:
        """A filter from one value or several per field."""
        return cls(_values(origin), _values(order), _values(repo))

    def apply(self, stmt: Select) -> Select:
        # repo is on the covering index; origin and order live on tasks. A subquery, not a join, keeps
        # the unseen tier's literal WHERE (unqualified column names) unambiguous.
        if self.repo is not None:
            stmt = stmt.where(TaskStatsRow.repo.in_(self.repo))
        if self.origin is not None or self.order is not None:
            tasks = select(TaskRow.task_id)
            if self.origin is not None:
                tasks = tasks.where(TaskRow.origin.in_(self.origin))
            if self.order is not None:
                tasks = tasks.where(TaskRow.order.in_([int(o) for o in self.order]))
            stmt = stmt.where(TaskStatsRow.task_id.in_(tasks))
        return stmt


def tier_select(cond: ColumnElement[bool], where: TaskFilter | None = None) -> Select:
    """Active candidates meeting `cond` (and `where`), in rand_key order, read from a covering sampling
    index (plus a join to tasks when `where` filters origin or order).

    The columns are TaskStats' leading fields in order, so a row constructs one positionally."""
    s = TaskStatsRow
    stmt = (
        select(s.task_id, s.repo, s.status, s.family, s.diff_hash, s.attempts, s.solves, s.recent)
        .where(s.status == literal_column("'active'"), cond)
        .order_by(s.rand_key)
    )
    return where.apply(stmt) if where is not None else stmt


def candidate_pool(
    session: Session, n: int, config: SamplingConfig, start: float, where: TaskFilter | None = None
) -> list[TaskStats]:
    """Random active candidates starting at rand_key `start`: pool_factor * n in the band (room for caps
    and dedup), n unseen (the sampler never takes more), and pool_factor * n of any kind (fill-up and
    retirement). The sampler fills up nearest the band first, so the last tier is as wide as the band's:
    with n of any kind, a store whose band is empty handed the sampler n random tasks, and a hopeless task
    could displace one just outside the band, where a group most likely has reward variance."""
    pool: dict[str, TaskStats] = {}
    unseen, in_band, anything = tier_conditions(config)
    tiers = ((unseen, n, True), (in_band, config.pool_factor * n, False), (anything, config.pool_factor * n, False))
    for cond, limit, is_unseen in tiers:
        base = tier_select(cond, where)
        rows = _run(session, base.where(TaskStatsRow.rand_key >= start).limit(limit), is_unseen)
        if len(rows) < limit:
            rows += _run(
                session, base.where(TaskStatsRow.rand_key < start).limit(limit - len(rows)), is_unseen
            )
        for r in rows:
            pool.setdefault(r[0], TaskStats(*r))  # tier_select's columns are TaskStats' leading fields
    return list(pool.values())


def sqlite_unseen_sql(stmt: Select) -> str:
    """`stmt` as SQLite text forced onto the partial unseen index: SQLite's planner cannot tell that
    attempts = 0 is rare and would walk the wider sampling index (SQLAlchemy renders no SQLite hints).
    The bound values are numbers the store made and the filter's repo/origin names, which SQLAlchemy
    renders as quoted, escaped string literals, so rendering them inline is safe."""
    from sqlalchemy.dialects import sqlite

    sql = str(stmt.compile(dialect=sqlite.dialect(), compile_kwargs={"literal_binds": True}))
    return sql.replace("FROM task_stats", "FROM task_stats INDEXED BY ix_task_stats_unseen", 1)


def _run(session: Session, stmt: Select, unseen: bool) -> list:
    if unseen and session.get_bind().dialect.name == "sqlite":
        return list(session.execute(text(sqlite_unseen_sql(stmt))).all())
    return list(session.execute(stmt).all())
