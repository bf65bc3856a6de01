"""`SqlStore`: the curriculum store (the `TaskStore` protocol and more) over SQLite or PostgreSQL (transactions, repos, runs and
checkpoints live in `selfplay.store.base`).

Artifacts are content-addressed; tasks are deduplicated by the hash of the buggy state within a repo (what
its diff writes and where, `task_hash`), so recording the same bug twice (from two processes, or with
different context lines) yields one task and returns its id, while the same text on other lines is a task
of its own.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import select, update
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.orm import Session

from selfplay.artifact import BugArtifact
from selfplay.diffs import normalised_hash, site_hash
from selfplay.store import queries, rows
from selfplay.store.base import StoreBase
from selfplay.store.engine import (
    check_reachable,
    check_schema,
    make_engine,
    migrate,
    resolve_url,
    sqlite_error,
    store_name,
)
from selfplay.store.errors import StoreError, TaskNotFound
from selfplay.store.models import (
    RECENT_WINDOW,
    ArtifactRow,
    AttemptRow,
    CheckResultRow,
    TaskRow,
    TaskStatsRow,
    utcnow,
)
from selfplay.store.records import (
    ATTEMPT_SOURCES,
    ArtifactRecord,
    AttemptRecord,
    CheckRecord,
    StoredArtifact,
    TaskStats,
)
from selfplay.store.sampling import SamplingConfig, retirement_reason, sample
from selfplay.task import Task, make_task_id

if TYPE_CHECKING:
    from selfplay.validation.report import ValidationReport

log = logging.getLogger(__name__)
# Task metadata keys the store fills in itself on read (not stored in `meta`).
DERIVED_META = ("status", "artifact_id", "strategy", "retired_reason")


def open_store(url: str | None = None, run_dir: str | Path | None = None, *, create: bool = True,
               upgrade: bool = True) -> SqlStore:
    """Open (creating and migrating as needed) the store at `url`; None means `<run_dir or cwd>/selfplay.db`
    (or $SELFPLAY_STORE when set). StoreError names the store and the fix when the URL's scheme is not
    supported, its driver is missing, or it cannot be reached or written.

    `create=False` (commands that only read) refuses a SQLite file that does not exist, and any database
    that holds no selfplay store (empty, or another program's tables), instead of making one in it; a
    writer refuses a SQLite file holding another program's tables. `upgrade=False` (readers that must not
    write, such as a report) leaves an older schema as it is."""
    engine = make_engine(resolve_url(url, run_dir, create=create), create=create)
    check_reachable(engine, write=create)
    try:
        check_schema(engine, create=create)
        if upgrade:
            migrate(engine)
    except (StoreError, DBAPIError) as exc:
        engine.dispose()
        if isinstance(exc, StoreError):
            raise
        error = sqlite_error(exc, store_name(engine))
        if error is None and not isinstance(exc, OperationalError):
            raise  # not the database refusing us: a bug, with its traceback
        raise error or StoreError(f"cannot write store {store_name(engine)} ({str(exc.orig).strip()}); pass "
                                  "--store with a writable store") from exc
    return SqlStore(engine)


def task_hash(bug_inject: str, pred_patch: str | None) -> str:
    """Hash of a buggy state: what the bug diff writes and where (`site_hash`), plus the failed prediction's
    for higher orders."""
    base = site_hash(bug_inject)
    if not pred_patch:
        return base
    return hashlib.sha256(f"{base}+{site_hash(pred_patch)}".encode()).hexdigest()


class SqlStore(StoreBase):
    """Tasks, artifacts, validation results, attempts, runs and checkpoints of one self-play run."""

    # -- artifacts and tasks -------------------------------------------------------------------------
    def record_artifact(
        self,
        artifact: BugArtifact,
        repo: str,
        report: ValidationReport,
        *,
        origin: str,
        strategy: str | None = None,
        parent_id: str | None = None,
        order: int = 1,
        pred_patch: str | None = None,
        episode_id: str | None = None,
    ) -> StoredArtifact:
        """Store the artifact and its per-check validation results; when `report.valid`, also the task.

        `parent_id` names a task (higher orders) or an artifact. The result carries the artifact id (always) and the task id (valid only); its
        `duplicate` is True when the task is an older one with the same normalised diff hash, unless the
        artifact that made that task came from the same `episode_id` (the episode replayed after a kill)."""
        checks = [CheckRecord(c.name, bool(c.passed), c.detail or "") for c in report.checks]
        valid = bool(report.valid)
        error = report.error
        diff_hash = task_hash(artifact.bug_inject, pred_patch)

        def fn(s: Session) -> StoredArtifact:
            self._ensure_repo(s, repo)
            parent_task, parent_artifact = rows.resolve_parent(s, parent_id)
            artifact_id = rows.put_artifact(
                s,
                repo,
                artifact,
                origin=origin,
                diff_hash=normalised_hash(artifact.bug_inject),
                order=order,
                strategy=strategy,
                parent_id=parent_artifact,
                episode_id=episode_id,
                valid=valid,
                error=None if error is None else str(error),
                checks=checks,
            )
            if not valid:
                return StoredArtifact(artifact_id, None)
            task_id, created = rows.put_task(
                s,
                task_id=make_task_id(repo, artifact, pred_patch),
                repo=repo,
                artifact_id=artifact_id,
                diff_hash=diff_hash,
                fail_to_pass=tuple(report.fail_to_pass),
                pass_to_pass=tuple(report.pass_to_pass),
                origin=origin,
                order=order,
                parent_id=parent_task,
                pred_patch=pred_patch,
                # budgets and the canary rule grading holds the task's predictions to (selfplay.facts)
                meta=report.facts.to_metadata(),
                family=rows.family_of(s, parent_task, parent_artifact),
            )
            if not created and episode_id is not None:
                # The task's first artifact came from this very episode: a run killed after recording it and
                # before noting its verdict replays the episode, which must not count as its own duplicate.
                first = s.get(ArtifactRow, s.get(TaskRow, task_id).artifact_id)
                created = first is not None and first.episode_id == episode_id
            return StoredArtifact(artifact_id, task_id, duplicate=not created)

        return self._transact(fn)

    def record_validation(self, artifact: BugArtifact, repo: str, report: ValidationReport,
                          **details: Any) -> str | None:
        """`record_artifact(artifact, repo, report, **details).task_id`: the task id (an existing task's id
        when one with the same normalised diff hash is stored already), or None for an invalid artifact."""
        return self.record_artifact(artifact, repo, report, **details).task_id

    def add_task(self, task: Task, *, status: str = "active", strategy: str | None = None) -> str:
        """Store a ready-made task (import, procedural seeding) with its artifact; returns the stored id
        (an existing task's id when one with the same normalised diff hash exists)."""
        meta = {k: v for k, v in task.metadata.items() if k not in DERIVED_META}
        strategy = strategy or task.metadata.get("strategy")
        diff_hash = task_hash(task.artifact.bug_inject, task.pred_patch)

        def fn(s: Session) -> str:
            repo = self._ensure_repo(s, task.repo)
            for key in ("image", "base_commit", "version"):
                if meta.get(key) and getattr(repo, key) is None:
                    setattr(repo, key, str(meta[key]))
            parent = task.parent_id if task.parent_id and s.get(TaskRow, task.parent_id) else None
            artifact_id = rows.put_artifact(
                s,
                task.repo,
                task.artifact,
                origin=task.origin,
                order=task.order,
                diff_hash=normalised_hash(task.artifact.bug_inject),
                strategy=strategy,
                valid=True,
            )
            task_id, _ = rows.put_task(
                s,
                task_id=task.task_id,
                repo=task.repo,
                artifact_id=artifact_id,
                diff_hash=diff_hash,
                fail_to_pass=task.fail_to_pass,
                pass_to_pass=task.pass_to_pass,
                origin=task.origin,
                order=task.order,
                parent_id=parent,
                pred_patch=task.pred_patch,
                meta=meta,
                status=status,
                family=rows.family_of(s, parent, None),
            )
            return task_id

        return self._transact(fn)

    def get_task(self, task_id: str) -> Task:
        tasks = self.get_tasks([task_id])
        if not tasks:
            raise TaskNotFound(
                f"no task {task_id!r} in {self.url}; `selfplay tasks list` shows the stored ids"
            )
        return tasks[0]

    def has_task(self, task_id: str) -> bool:
        return self._read(lambda s: s.get(TaskRow, task_id)) is not None

    def get_tasks(self, task_ids: Sequence[str]) -> list[Task]:
        """The tasks with these ids, in the given order (unknown ids are left out)."""

        def fn(s: Session) -> list[Task]:
            found = {}
            for chunk in range(0, len(task_ids), 500):
                stmt = queries.task_select().where(TaskRow.task_id.in_(task_ids[chunk : chunk + 500]))
                for row in s.execute(stmt):
                    found[row.task_id] = queries.to_task(row)
            return [found[t] for t in task_ids if t in found]

        return self._read(fn)

    def list_tasks(
        self, status: str | None = None, repo: str | None = None, limit: int | None = None
    ) -> list[Task]:
        ids = [s.task_id for s in self.task_stats(status=status, repo=repo, limit=limit)]
        return self.get_tasks(ids)

    def task_stats(
        self,
        task_ids: Iterable[str] | None = None,
        *,
        status: str | None = None,
        repo: str | None = None,
        limit: int | None = None,
    ) -> list[TaskStats]:
        """Solve statistics (overall and recent window) of the selected tasks, oldest first."""
        stmt = queries.stats_select().order_by(TaskRow.created_at, TaskRow.task_id)
        if task_ids is not None:
            stmt = stmt.where(TaskRow.task_id.in_(list(task_ids)))
        if status is not None:
            stmt = stmt.where(TaskRow.status == status)
        if repo is not None:
            stmt = stmt.where(TaskRow.repo == repo)
        if limit is not None:
            stmt = stmt.limit(limit)
        return [queries.to_stats(r) for r in self._read(lambda s: s.execute(stmt).all())]

    def task_episodes(self, task_ids: Iterable[str]) -> dict[str, str | None]:
        """The episode whose artifact made each of `task_ids` (None for a task without one: seeds, imports);
        unknown ids are left out."""
        stmt = (select(TaskRow.task_id, ArtifactRow.episode_id)
                .join(ArtifactRow, ArtifactRow.artifact_id == TaskRow.artifact_id)
                .where(TaskRow.task_id.in_(list(task_ids))))
        return {t: e for t, e in self._read(lambda s: s.execute(stmt).all())}

    def get_artifact(self, artifact_id: str) -> ArtifactRecord:
        def fn(s: Session) -> ArtifactRecord:
            row = s.get(ArtifactRow, artifact_id)
            if row is None:
                raise StoreError(f"no artifact {artifact_id!r} in {self.url}")
            checks = s.scalars(select(CheckResultRow).where(CheckResultRow.artifact_id == artifact_id)).all()
            return queries.to_artifact_record(row, list(checks))

        return self._read(fn)

    def validated_tests(self, repo: str, artifact: BugArtifact) -> tuple[tuple[str, ...], ...] | None:
        """(FAIL_TO_PASS, PASS_TO_PASS) stored when exactly this artifact was validated valid in `repo`,
        or None.

        The key is the artifact's content address (`rows.artifact_id_for`: the repo and all five files), not
        `BugArtifact.digest()`, which covers only the two diffs: an artifact whose parser or script differs
        from the validated one is a different artifact and must be validated itself. Only first-order tasks
        count (a higher-order task's lists hold for its failed-prediction layer, not for the bare artifact).
        """
        artifact_id = rows.artifact_id_for(repo, artifact)
        stmt = (select(TaskRow.fail_to_pass, TaskRow.pass_to_pass)
                .join(ArtifactRow, ArtifactRow.artifact_id == TaskRow.artifact_id)
                .where(TaskRow.artifact_id == artifact_id, TaskRow.repo == repo, TaskRow.pred_patch.is_(None),
                       ArtifactRow.valid.is_(True))
                .order_by(TaskRow.created_at).limit(1))
        row = self._read(lambda s: s.execute(stmt).first())
        if row is None:
            return None
        return tuple(json.loads(row.fail_to_pass)), tuple(json.loads(row.pass_to_pass))

    def set_status(self, task_ids: Iterable[str], status: str, reason: str | None = None) -> int:
        """Move tasks to `status` (active, retired, invalid); returns how many changed."""
        rows.check_status(status)
        ids = list(task_ids)
        stmt = (
            update(TaskRow)
            .where(TaskRow.task_id.in_(ids), TaskRow.status != status)
            .values(status=status, retired_reason=reason)
        )
        mirror = update(TaskStatsRow).where(TaskStatsRow.task_id.in_(ids)).values(status=status)

        def fn(s: Session) -> int:
            changed = s.execute(stmt).rowcount
            s.execute(mirror)
            return changed

        return self._transact(fn) if ids else 0

    def retire(self, task_ids: Iterable[str], reason: str = "retired by hand") -> int:
        return self.set_status(task_ids, "retired", reason)

    def retire_exhausted(self, config: SamplingConfig | None = None) -> int:
        """Apply the retirement rules of `config` to every active task (a full scan; sampling applies them
        to its candidates as it goes)."""
        config = config or SamplingConfig()
        changed = 0
        for stats in self.task_stats(status="active"):
            reason = retirement_reason(stats, config)
            if reason is not None:
                changed += self.retire([stats.task_id], reason)
        return changed

    # -- attempts and sampling -----------------------------------------------------------------------
    def record_attempt(
        self,
        task_id: str | None,
        *,
        role: str,
        policy_version: int,
        reward: float,
        turns: int,
        tokens: int,
        termination: str,
        trajectory_path: str | None = None,
        wall_time: float = 0.0,
        run_id: str | None = None,
        solved: bool | None = None,
        artifact_id: str | None = None,
        source: str = "policy",
    ) -> int:
        """Store one episode; a solver attempt of the policy on a task also updates the task's solve
        statistics in the same transaction (a `source="demo"` attempt, a scripted expert's demonstration,
        does not: the statistics measure the policy). `solved` defaults to reward > 0. Returns the id."""
        solved = bool(reward > 0) if solved is None else bool(solved)
        if source not in ATTEMPT_SOURCES:
            raise StoreError(f"attempt source {source!r} is unknown; use one of {', '.join(ATTEMPT_SOURCES)}")

        def fn(s: Session) -> int:
            stats = None
            if task_id is not None:
                stats = s.get(TaskStatsRow, task_id, with_for_update=True)
                if stats is None:
                    raise TaskNotFound(f"attempt on unknown task {task_id!r}; store the task first")
            if run_id is not None:
                self._ensure_run(s, run_id)
            row = AttemptRow(
                task_id=task_id,
                artifact_id=artifact_id,
                run_id=run_id,
                role=role,
                policy_version=policy_version,
                reward=float(reward),
                solved=solved,
                turns=turns,
                tokens=tokens,
                termination=termination,
                trajectory_path=trajectory_path,
                wall_time=float(wall_time),
                created_at=utcnow(),
                source=source,
            )
            s.add(row)
            if stats is not None and role == "solver" and source == "policy":
                stats.attempts += 1
                stats.solves += int(solved)
                stats.recent = (stats.recent + ("1" if solved else "0"))[-RECENT_WINDOW:]
                stats.last_attempt_at = row.created_at
            s.flush()
            return row.id

        return self._transact(fn)

    def attempts(
        self,
        task_id: str | None = None,
        run_id: str | None = None,
        limit: int | None = None,
        *,
        source: str | None = None,
    ) -> list[AttemptRecord]:
        stmt = select(AttemptRow).order_by(AttemptRow.id)
        if source is not None:
            stmt = stmt.where(AttemptRow.source == source)
        if task_id is not None:
            stmt = stmt.where(AttemptRow.task_id == task_id)
        if run_id is not None:
            stmt = stmt.where(AttemptRow.run_id == run_id)
        if limit is not None:
            stmt = stmt.limit(limit)
        return [queries.to_attempt(r) for r in self._read(lambda s: s.scalars(stmt).all())]

    def sample_tasks(
        self,
        n: int,
        *,
        config: SamplingConfig | None = None,
        rng: random.Random | None = None,
        origin: str | Sequence[str] | None = None,
        order: int | Sequence[int] | None = None,
        repo: str | Sequence[str] | None = None,
    ) -> list[Task]:
        """Draw up to `n` tasks for solver attempts (see `selfplay.store.sampling`); candidates that the
        retirement rules catch are retired on the way. `origin`, `order` and `repo` restrict the draw to
        tasks with that value (one value or several; None: any)."""
        config = config or SamplingConfig()
        rng = rng or random.Random()
        where = queries.TaskFilter.of(origin=origin, order=order, repo=repo)
        for value in where.origin or ():
            rows.check_origin(value)
        pool = self._read(lambda s: queries.candidate_pool(s, n, config, rng.random(), where))
        result = sample(pool, n, config, rng)
        for task_id, reason in result.retire:
            self.retire([task_id], reason)
        return self.get_tasks(list(result.chosen))

    def used_failed_patches(self, parent_task_id: str) -> set[str]:
        """Normalised hashes of the failed patches already turned into higher-order tasks of
        `parent_task_id`: the `seen` set of `selfplay.higher_order.make_higher_order_task`, persisted.

        A child's hash is its recorded `failed_patch_hash` (the hash `refuse_reason` compares: of the
        raw failed patch) when its metadata has one, plus the hash of its `pred_patch` layer (the same
        hash when no test-infrastructure section was dropped). Call it per parent before deriving, so a
        resumed run refuses the patches the crashed one used."""

        def fn(s: Session) -> set[str]:
            stmt = select(TaskRow.pred_patch, TaskRow.meta).where(TaskRow.parent_id == parent_task_id)
            return list(s.execute(stmt).all())

        seen: set[str] = set()
        for pred_patch, meta in self._read(fn):
            if pred_patch:
                seen.add(normalised_hash(pred_patch))
            recorded = json.loads(meta or "{}").get("failed_patch_hash")
            if recorded:
                seen.add(str(recorded))
        return seen
