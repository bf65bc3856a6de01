"""Opening a database that is not a sound selfplay store: readers never make one, writers never add their tables
to another program's file, and a locked, corrupted or foreign file is named with its remedy."""

from __future__ import annotations

import logging
import sqlite3
import threading

import pytest
from store_data import make_artifact, make_report

from selfplay.store import StoreError, open_store
from selfplay.store import engine as store_engine


def _foreign(path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE foo (x)")
    conn.close()


def _tables(path) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    finally:
        conn.close()


def test_a_reader_refuses_an_empty_database_and_leaves_it_as_it_was(store_url, tmp_path):
    if store_url.startswith("sqlite"):
        (tmp_path / "selfplay.db").touch()  # a 0-byte file: what a stray `touch` or a failed copy leaves
    with pytest.raises(StoreError, match=r"is empty, not a selfplay store; pass --store"):
        open_store(store_url, create=False)
    if store_url.startswith("sqlite"):
        assert (tmp_path / "selfplay.db").stat().st_size == 0
    with open_store(store_url) as st:  # a writer may start a store there
        assert st.task_stats() == []
    with open_store(store_url, create=False) as st:
        assert st.task_stats() == []


@pytest.mark.parametrize("create", [False, True], ids=["reader", "writer"])
def test_a_sqlite_file_of_another_program_is_refused_and_left_alone(tmp_path, create):
    db = tmp_path / "o3.db"
    _foreign(db)
    with pytest.raises(StoreError, match=r"o3.db is not a selfplay store \(it has tables: foo\)"):
        open_store(str(db), create=create)
    assert _tables(db) == ["foo"]


def test_a_file_that_is_not_sqlite_is_named_as_such(tmp_path):
    db = tmp_path / "notes.db"
    db.write_bytes(b"these are my notes, not a database" * 10)
    with pytest.raises(StoreError, match="notes.db is not a SQLite database") as err:
        open_store(str(db), create=False)
    assert "writable folder" not in str(err.value)


def test_a_corrupted_store_is_named_as_such(tmp_path):
    db = tmp_path / "store.db"
    with open_store(str(db)) as st:
        for i in range(1, 40):
            st.record_validation(make_artifact(i), "toolz", make_report(n=i), origin="injector")
    with db.open("r+b") as fh:  # pages 3-10 overwritten: the schema page survives, table pages do not
        fh.seek(4096 * 3)
        fh.write(b"\xa5" * 4096 * 8)
    with pytest.raises(StoreError, match=r"store .*store.db is corrupted \(database disk image is malformed\)"):
        with open_store(str(db), create=False) as st:
            st.list_tasks()


@pytest.fixture
def locked(tmp_path, monkeypatch):
    """A store whose write lock another connection holds (`BEGIN EXCLUSIVE`), with a short busy timeout."""
    db = tmp_path / "store.db"
    with open_store(str(db)) as st:
        st.record_validation(make_artifact(1), "toolz", make_report(n=1), origin="injector")
    monkeypatch.setattr(store_engine, "SQLITE_BUSY_TIMEOUT_MS", 200)
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    yield db
    holder.execute("ROLLBACK")
    holder.close()


def test_a_reader_reads_a_store_a_writer_holds(locked):
    with open_store(str(locked), create=False) as st:
        assert len(st.task_stats()) == 1


def test_a_writer_of_a_locked_store_is_told_another_process_holds_it(locked):
    with pytest.raises(StoreError, match=r"is locked by another process .*selfplay run.*wait for") as err:
        with open_store(str(locked)) as st:
            st.upsert_repo("toolz")
    assert "writable folder" not in str(err.value)


def test_a_writer_says_that_it_waits_for_the_lock_and_writes_once_it_is_free(tmp_path, monkeypatch, caplog):
    db = tmp_path / "store.db"
    with open_store(str(db)) as st:
        st.record_validation(make_artifact(1), "toolz", make_report(n=1), origin="injector")
    monkeypatch.setattr(store_engine, "SQLITE_QUIET_WAIT_MS", 200)
    holder = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")
    release = threading.Timer(1.5, lambda: holder.execute("ROLLBACK"))
    release.start()
    try:
        with caplog.at_level(logging.WARNING, logger="selfplay.store.engine"), open_store(str(db)) as st:
            st.upsert_repo("cachetools")
            assert "another process holds its write lock" in caplog.text and "store.db" in caplog.text
    finally:
        release.join()
        holder.close()
    with open_store(str(db), create=False) as st:
        assert st.get_repo("cachetools") is not None
