"""Engines for the store: a SQLite file (default) or PostgreSQL, with the schema migrated on open.

SQLite runs in WAL mode with a busy timeout and foreign keys on. Write transactions start with
`BEGIN IMMEDIATE`: a deferred transaction that reads and then writes can fail with "database is locked"
at once when another process holds the write lock, without waiting out the busy timeout. A writer that
waits for another process's lock longer than SQLITE_QUIET_WAIT_MS logs that it waits.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError

from selfplay.store.errors import StoreError

log = logging.getLogger(__name__)

DB_FILENAME = "selfplay.db"
SQLITE_BUSY_TIMEOUT_MS = 60_000
SQLITE_QUIET_WAIT_MS = 2_000
"""A writer waits this long for another process's write lock in silence; past it, it says that it waits
(the rest of SQLITE_BUSY_TIMEOUT_MS) instead of hanging without a word."""
MIGRATIONS = Path(__file__).with_name("migrations")
# Arbitrary constant: PostgreSQL advisory lock taken while migrating, so concurrent openers queue.
_PG_MIGRATION_LOCK = 0x5E1F_5A7E


def resolve_url(url: str | None = None, run_dir: str | Path | None = None, *, create: bool = True) -> str:
    """The SQLAlchemy URL for `url`: None -> `<run_dir or cwd>/selfplay.db`; a bare path -> SQLite file;
    `postgresql://` -> the psycopg 3 driver. Makes `run_dir` only when `create`."""
    if url is None:
        url = os.environ.get("SELFPLAY_STORE") or None
    if url is None:
        path = Path(run_dir) if run_dir is not None else Path.cwd()
        if create:
            path.mkdir(parents=True, exist_ok=True)
        return f"sqlite:///{(path / DB_FILENAME).resolve()}"
    if "://" not in url:
        return f"sqlite:///{Path(url).expanduser().resolve()}"
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    backend = url.split(":", 1)[0].split("+", 1)[0]
    if backend not in ("sqlite", "postgresql"):
        raise StoreError(
            f"unsupported store URL {url!r}: use a SQLite path/`sqlite:///FILE` or "
            "`postgresql+psycopg://USER:PASS@HOST:PORT/DB`"
        )
    return url


def make_engine(url: str, *, create: bool = True) -> Engine:
    """An engine for a resolved URL, with the SQLite settings applied on every connection. With `create`
    False a SQLite file must exist already (nothing is made: a read-only command names the missing store)."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database in (None, "", ":memory:"):
            raise StoreError("an in-memory SQLite store cannot be shared between processes; give a file path")
        db = Path(parsed.database)
        if not create and not db.is_file():
            raise StoreError(f"no store at {db}: the file does not exist. Pass --store with the store to read "
                             "(a run's is runs/<run_id>/store.db), or set $SELFPLAY_STORE")
        if create:
            _make_parent(db)
        engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})
        _configure_sqlite(engine, wal=create)
        return engine
    try:
        return create_engine(url, pool_pre_ping=True)
    except ImportError as exc:
        raise StoreError("PostgreSQL stores need the psycopg 3 driver, which is not installed: "
                         "pip install 'selfplay-swe[postgres]'") from exc


def _make_parent(db: Path) -> None:
    try:
        db.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create the folder of store {db} ({exc.strerror or exc}); pass --store "
                         "with a path in a writable folder") from exc


def store_name(engine: Engine) -> str:
    """How messages name the store: a SQLite file's path, else the URL without its password."""
    if engine.dialect.name == "sqlite":
        return str(engine.url.database)
    return engine.url.render_as_string(hide_password=True)


def sqlite_error(exc: BaseException, store: str) -> StoreError | None:
    """A StoreError naming the cause and its remedy for a SQLite failure of `store` that is not a bug in the
    caller (a locked, corrupted, foreign or unwritable file), else None."""
    orig = getattr(exc, "orig", exc)
    if not isinstance(orig, sqlite3.Error):
        return None
    cause = (str(orig).strip().splitlines() or [type(orig).__name__])[0]
    if _locked(cause):
        # SQLite waited out the busy timeout: another process holds the file's write lock all that time.
        return StoreError(f"store {store} is locked by another process ({cause}): another selfplay command, such "
                          "as a running `selfplay run`, holds it; wait for that command to finish, or stop it, "
                          "and try again")
    if "malformed" in cause:
        return StoreError(f"store {store} is corrupted ({cause}); nothing was changed. Restore it from a copy, "
                          "or pass --store with another store")
    if "not a database" in cause:
        return StoreError(f"{store} is not a SQLite database ({cause}); pass --store with a selfplay store "
                          "(a run's is runs/<run_id>/store.db)")
    if "readonly" in cause or "unable to open" in cause:
        return StoreError(f"cannot open or write store {store} ({cause}); pass --store with a file in a "
                          "writable folder")
    return None


def check_reachable(engine: Engine, *, write: bool = True) -> None:
    """Connect once (and, for SQLite, write nothing yet); StoreError naming the store and the cause when
    the server is unreachable, the credentials are wrong or the file cannot be opened (or, with `write`,
    written: the SQLite write lock is taken, so a reader passes `write=False` not to wait for a writer)."""
    from sqlalchemy.exc import DBAPIError, OperationalError

    where = store_name(engine)
    try:
        with engine.execution_options(write=write).connect() as conn:
            conn.exec_driver_sql("SELECT 1")
    except (OperationalError, DBAPIError) as exc:
        cause = str(getattr(exc, "orig", exc) or exc).strip().splitlines()[0]
        if engine.dialect.name == "sqlite":
            raise (sqlite_error(exc, where) or StoreError(
                f"cannot open store {where} ({cause}); pass --store with a file in a writable folder")) from exc
        raise StoreError(f"cannot connect to store {where} ({cause}); start the server or fix the host, port, "
                         "user and password in the URL") from exc


def check_schema(engine: Engine, *, create: bool) -> None:
    """StoreError unless the database is a selfplay store, or (with `create`) one may be made in it.

    A reader (`create=False`) never makes a store, so an empty database is refused as firmly as one holding
    another program's tables. A writer may start a store in an empty database, but never adds its tables
    beside another program's in a SQLite file (a PostgreSQL database may hold other schemas' tables: its
    search_path decides what we see)."""
    from sqlalchemy import inspect

    with _quiet_alembic(), engine.execution_options(write=False).connect() as conn:
        if current_revision_of(conn) is not None:
            return
        tables = sorted(inspect(conn).get_table_names())
    where = store_name(engine)
    if tables and (not create or engine.dialect.name == "sqlite"):
        shown = ", ".join(tables[:8]) + (f" and {len(tables) - 8} more" if len(tables) > 8 else "")
        raise StoreError(f"{where} is not a selfplay store (it has tables: {shown}); it was left as it was. "
                         "Pass --store with a selfplay store, or with a new file to start one")
    if not tables and not create:
        raise StoreError(f"{where} is empty, not a selfplay store; pass --store with a store a command wrote "
                         "(a run's is runs/<run_id>/store.db)")


def _configure_sqlite(engine: Engine, *, wal: bool = True) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record) -> None:
        dbapi_conn.isolation_level = None  # we emit BEGIN ourselves (see module docstring)
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        if wal:
            # Persistent in the file, so the store's writer has set it already; a reader setting it would
            # write a header into any empty file it was pointed at.
            cur.execute("PRAGMA journal_mode = WAL")
        cur.execute("PRAGMA synchronous = NORMAL")
        cur.execute("PRAGMA foreign_keys = ON")
        cur.execute(f"PRAGMA busy_timeout = {_quiet_ms()}")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn) -> None:
        if not conn.get_execution_options().get("write", True):
            conn.exec_driver_sql("BEGIN DEFERRED")
            return
        try:
            conn.exec_driver_sql("BEGIN IMMEDIATE")
            return
        except OperationalError as exc:
            if not _locked(str(exc.orig)) or SQLITE_BUSY_TIMEOUT_MS <= _quiet_ms():
                raise
        rest = SQLITE_BUSY_TIMEOUT_MS - _quiet_ms()
        log.warning("store %s: another process holds its write lock (another selfplay command on the same "
                    "store?); waiting up to %.0f s more", store_name(conn.engine), rest / 1000)
        conn.exec_driver_sql(f"PRAGMA busy_timeout = {rest}")
        try:
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        finally:
            conn.exec_driver_sql(f"PRAGMA busy_timeout = {_quiet_ms()}")


def _locked(cause: str) -> bool:
    """Whether SQLite's message says another connection holds the lock ("database is locked", busy)."""
    return "locked" in cause or "busy" in cause


def _quiet_ms() -> int:
    return min(SQLITE_QUIET_WAIT_MS, SQLITE_BUSY_TIMEOUT_MS)


def alembic_config(connection=None):
    """An Alembic config pointing at the migrations shipped inside this package."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["connection"] = connection
    return cfg


def head_revision() -> str:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config()).get_current_head()


@contextmanager
def _quiet_alembic():
    # Alembic logs every plugin and step at INFO; the CLI's INFO log should only show our own summary.
    logger = logging.getLogger("alembic")
    level = logger.level
    logger.setLevel(max(level, logging.WARNING))
    try:
        yield
    finally:
        logger.setLevel(level)


def migrate(engine: Engine, revision: str = "head") -> None:
    """Upgrade the schema to `revision` in one transaction (serialised across concurrent openers)."""
    with _quiet_alembic():
        from alembic import command

        # A read-only look (BEGIN DEFERRED): a store already at head is then opened without waiting for the
        # write lock that a running writer may hold.
        if revision == "head" and current_revision(engine.execution_options(write=False)) == head_revision():
            return
    with _quiet_alembic(), engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_MIGRATION_LOCK})
        before = current_revision_of(conn)
        command.upgrade(alembic_config(conn), revision)
    log.info(
        "store %s migrated from %s to %s",
        engine.url.render_as_string(hide_password=True),
        before or "empty",
        revision,
    )


def downgrade(engine: Engine, revision: str = "base") -> None:
    from alembic import command

    with _quiet_alembic(), engine.begin() as conn:
        command.downgrade(alembic_config(conn), revision)


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return current_revision_of(conn)


def current_revision_of(conn) -> str | None:
    from alembic.runtime.migration import MigrationContext

    return MigrationContext.configure(conn).get_current_revision()
