"""Several processes writing at once lose and duplicate nothing; a writer killed mid-transaction leaves
no trace and no lock behind. Real processes, each with its own store, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import func, select, text
from store_data import make_artifact, make_report

from selfplay.store import open_store
from selfplay.store.models import ArtifactRow, AttemptRow, CheckResultRow, TaskRow

WORKERS = Path(__file__).with_name("workers.py")
PROCESSES, WRITES = 4, 200


def _count(store, model, *where) -> int:
    with store.engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(model).where(*where)).scalar_one()


@pytest.mark.slow
def test_concurrent_writers_lose_and_duplicate_nothing(store):
    seeded = [
        store.record_validation(make_artifact(i, file="seed.py"), "seed", make_report(n=i), origin="injector")
        for i in range(1, 11)
    ]
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(WORKERS),
                "write",
                store.engine.url.render_as_string(False),
                str(w),
                str(WRITES),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(PROCESSES)
    ]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        results.append(json.loads(out))

    per_proc = WRITES // 4
    attempt_ids = [a for r in results for a in r["attempts"]]
    assert len(attempt_ids) == len(set(attempt_ids)) == PROCESSES * per_proc * 2
    assert _count(store, AttemptRow) == PROCESSES * per_proc * 2
    # Every worker got the same task id for each shared artifact, and it is stored once.
    shared = [r["shared"] for r in results]
    assert all(s == shared[0] for s in shared) and len(set(shared[0].values())) == per_proc
    assert _count(store, TaskRow, TaskRow.repo == "shared") == per_proc
    assert _count(store, ArtifactRow, ArtifactRow.repo == "shared") == per_proc
    assert _count(store, TaskRow, TaskRow.repo == "own") == PROCESSES * per_proc
    # Check results were replaced, not appended, by the workers re-validating the same artifact.
    assert _count(store, CheckResultRow) == 2 * (10 + per_proc + PROCESSES * per_proc)
    # Incremental statistics agree with the attempts table.
    attempts = store.attempts()
    by_task = Counter(a.task_id for a in attempts)
    solves = Counter(a.task_id for a in attempts if a.solved)
    for stats in store.task_stats(seeded):
        assert stats.attempts == by_task[stats.task_id]
        assert stats.solves == solves[stats.task_id]
        assert len(stats.recent) == min(32, stats.attempts)
    assert Counter(a.run_id for a in attempts) == {f"run-{w}": per_proc * 2 for w in range(PROCESSES)}


@pytest.mark.slow
def test_writer_killed_mid_transaction_leaves_store_consistent(store):
    url = store.engine.url.render_as_string(False)
    proc = subprocess.Popen(
        [sys.executable, str(WORKERS), "hang", url], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        line = proc.stdout.readline()
        assert line.strip() == "ready", proc.stderr.read()
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    # Nothing of the killed transaction is visible: no repo, artifact, check, task or statistics row.
    fresh = open_store(url)
    assert (
        _count(fresh, TaskRow) == 0 and _count(fresh, ArtifactRow) == 0 and _count(fresh, CheckResultRow) == 0
    )
    assert fresh.get_repo("killed") is None
    # No lock is left behind: the same write now succeeds, whole.
    task_id = fresh.record_validation(make_artifact(7), "killed", make_report(n=7), origin="injector")
    assert fresh.get_task(task_id).repo == "killed"
    assert [s.attempts for s in fresh.task_stats([task_id])] == [0]
    if fresh.engine.dialect.name == "sqlite":
        with fresh.engine.connect() as conn:
            assert conn.execute(text("PRAGMA integrity_check")).scalar_one() == "ok"
    fresh.close()
