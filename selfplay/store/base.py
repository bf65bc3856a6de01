"""`StoreBase`: the engine, transactions and the repo/run/checkpoint registry underneath `SqlStore`.

Every public method is one transaction: a writer killed half-way leaves nothing behind. Writers that
race to insert the same row converge on one: SQLite serialises writers (BEGIN IMMEDIATE); on PostgreSQL
the loser of a unique-key race (or of a deadlock) retries and finds the winner's row.
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Engine, select
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from repos.retry import retry
from selfplay.store.engine import sqlite_error, store_name
from selfplay.store.models import CheckpointRow, RepoRow, RunRow, utcnow
from selfplay.store.records import CheckpointRecord, RepoRecord, RunRecord

log = logging.getLogger(__name__)
T = TypeVar("T")


def _retryable(exc: Exception) -> bool:
    if not isinstance(exc, (IntegrityError, OperationalError)):
        return False
    # 23505 unique violation (lost an insert race), 40001 serialization failure, 40P01 deadlock
    return getattr(getattr(exc, "orig", None), "sqlstate", None) in ("23505", "40001", "40P01")


class StoreBase:
    """Engine, transactions, repos, runs and checkpoints (policy versions)."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self.url = engine.url.render_as_string(hide_password=True)
        self._write_sessions = sessionmaker(engine, expire_on_commit=False)
        self._read_sessions = sessionmaker(engine.execution_options(write=False), expire_on_commit=False)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.engine.dispose()

    # -- transactions --------------------------------------------------------------------------------
    def _transact(self, fn: Callable[[Session], T], attempts: int = 6) -> T:
        def once() -> T:
            with self._write_sessions.begin() as session:
                return fn(session)

        with self._named_errors():
            return retry(once, attempts=attempts, transient=_retryable,
                         backoff=lambda k: random.uniform(0, 0.01 * 2 ** (k - 1)), what="store write")

    def _read(self, fn: Callable[[Session], T]) -> T:
        with self._named_errors(), self._read_sessions.begin() as session:
            return fn(session)

    @contextmanager
    def _named_errors(self) -> Iterator[None]:
        # A SQLite file can go bad after it was opened fine (a corrupted page deep in a table, a lock held
        # past the busy timeout): say so, naming the file and the remedy, instead of an SQL dump.
        try:
            yield
        except DBAPIError as exc:
            error = sqlite_error(exc, store_name(self.engine))
            if error is None:
                raise
            raise error from exc

    # -- repos, runs, checkpoints --------------------------------------------------------------------
    def upsert_repo(
        self,
        name: str,
        *,
        image: str | None = None,
        base_commit: str | None = None,
        version: str | None = None,
    ) -> RepoRecord:
        """Create the repo, or fill in the given (non-None) fields."""

        def fn(s: Session) -> RepoRecord:
            row = self._ensure_repo(s, name)
            for key, value in (("image", image), ("base_commit", base_commit), ("version", version)):
                if value is not None:
                    setattr(row, key, value)
            return RepoRecord(row.name, row.image, row.base_commit, row.version)

        return self._transact(fn)

    def get_repo(self, name: str) -> RepoRecord | None:
        row = self._read(lambda s: s.get(RepoRow, name))
        return RepoRecord(row.name, row.image, row.base_commit, row.version) if row else None

    def _ensure_repo(self, s: Session, name: str) -> RepoRow:
        row = s.get(RepoRow, name)
        if row is None:
            row = RepoRow(name=name, created_at=utcnow())
            s.add(row)
            s.flush()
        return row

    def register_run(
        self, run_id: str, config: dict[str, Any] | None = None, note: str | None = None
    ) -> RunRecord:
        """Create the run (idempotent: an existing run is returned unchanged)."""

        def fn(s: Session) -> RunRecord:
            row = self._ensure_run(s, run_id, config, note)
            return RunRecord(row.run_id, json.loads(row.config), row.started_at, row.note)

        return self._transact(fn)

    def _ensure_run(
        self, s: Session, run_id: str, config: dict | None = None, note: str | None = None
    ) -> RunRow:
        row = s.get(RunRow, run_id)
        if row is None:
            row = RunRow(
                run_id=run_id,
                config=json.dumps(config or {}, sort_keys=True, default=str),
                note=note,
                started_at=utcnow(),
            )
            s.add(row)
            s.flush()
        return row

    def register_checkpoint(self, run_id: str, version: int, path: str | Path) -> CheckpointRecord:
        """Record policy `version` of `run_id` saved at `path` (re-registering a version moves its path)."""

        def fn(s: Session) -> CheckpointRecord:
            self._ensure_run(s, run_id)
            row = s.scalar(
                select(CheckpointRow).where(CheckpointRow.run_id == run_id, CheckpointRow.version == version)
            )
            if row is None:
                row = CheckpointRow(run_id=run_id, version=version, path=str(path), created_at=utcnow())
                s.add(row)
            row.path = str(path)
            return CheckpointRecord(run_id, version, str(path), row.created_at)

        return self._transact(fn)

    def checkpoints(self, run_id: str) -> list[CheckpointRecord]:
        rows = self._read(
            lambda s: s.scalars(
                select(CheckpointRow).where(CheckpointRow.run_id == run_id).order_by(CheckpointRow.version)
            ).all()
        )
        return [CheckpointRecord(r.run_id, r.version, r.path, r.created_at) for r in rows]

    def get_run(self, run_id: str) -> RunRecord | None:
        row = self._read(lambda s: s.get(RunRow, run_id))
        return RunRecord(row.run_id, json.loads(row.config), row.started_at, row.note) if row else None
