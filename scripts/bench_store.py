"""Benchmark: sample a batch of 256 tasks from a store of 100,000 tasks and 1,000,000 attempts.

Ours: `TaskStore.sample_tasks` (incremental `task_stats` + a random walk over its covering index
`(status, rand_key, ...)`, then the pure sampler over ~(pool_factor + 2) x n candidates, then loading the
256 tasks with their artifacts).
Baseline, same run, same data: aggregate solve statistics from `attempts` with GROUP BY, then run the same
pure sampler over all tasks (what a store without incremental statistics or the index would do).

    .venv/bin/python scripts/bench_store.py                       # SQLite and PostgreSQL (if reachable)
    .venv/bin/python scripts/bench_store.py --engines sqlite --tasks 10000 --attempts 100000

PostgreSQL: $SELFPLAY_TEST_POSTGRES_URL, else the URL `scripts/postgres.sh` prints. Prints medians over
--repeats runs and the query plans of the candidate query.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import create_engine, func, select, text

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from selfplay.store import SamplingConfig, open_store, sample
from selfplay.store.models import AttemptRow, TaskRow, TaskStatsRow
from selfplay.store.queries import sqlite_unseen_sql, tier_conditions, tier_select
from selfplay.store.records import TaskStats

BUG = (
    "diff --git a/m{r}.py b/m{r}.py\n--- a/m{r}.py\n+++ b/m{r}.py\n@@ -{i},1 +{i},1 @@\n-x = {i}\n+x = -{i}\n"
)


def synth(n_tasks: int, n_attempts: int, seed: int = 0):
    """Tasks over 20 repos with Beta-distributed difficulty; 5% unseen; attempts spread over the rest."""
    rng = random.Random(seed)
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    tasks, artifacts, p = [], [], []
    for i in range(n_tasks):
        repo, aid, tid = f"repo{i % 20}", f"a{i:08d}", f"repo{i % 20}-{i:016x}"
        artifacts.append(
            (
                aid,
                repo,
                "pytest",
                "tests/test_m.py\n",
                "print('{}')",
                BUG.format(r=i % 20, i=i),
                "",
                "{}",
                f"h{i:063x}",
                "injector",
                1,
                "removal",
                None,
                None,
                True,
                None,
                now,
            )
        )
        fam = f"fam{i // 3}"  # three tasks per family
        tasks.append(
            (
                tid,
                repo,
                aid,
                '["t::f2p"]',
                '["t::p2p"]',
                "active",
                "injector",
                1,
                None,
                None,
                f"h{i:063x}",
                fam,
                "{}",
                None,
                now,
            )
        )
        p.append(rng.betavariate(0.7, 0.9))
    seen = [i for i in range(n_tasks) if rng.random() >= 0.05]
    attempts, stats = [], {i: [0, 0, ""] for i in range(n_tasks)}
    for k in range(n_attempts):
        i = rng.choice(seen)
        solved = rng.random() < p[i]
        attempts.append(
            (
                tasks[i][0],
                None,
                None,
                "solver",
                k // 10_000,
                1.0 if solved else -1.0,
                solved,
                10,
                5000,
                "submitted",
                None,
                30.0,
                now,
            )
        )
        s = stats[i]
        s[0] += 1
        s[1] += solved
        s[2] = (s[2] + ("1" if solved else "0"))[-32:]
    stats_rows = [
        (
            tasks[i][0],
            "active",
            rng.random(),
            tasks[i][1],
            tasks[i][11],
            tasks[i][10],
            a,
            s,
            r,
            now if a else None,
        )
        for i, (a, s, r) in stats.items()
    ]
    return artifacts, tasks, stats_rows, attempts


ART_COLS = (
    "artifact_id, repo, test_script, test_files, test_parser, bug_inject, test_weaken, hashes, diff_hash, "
    'origin, "order", strategy, parent_id, episode_id, valid, error, created_at'
)
TASK_COLS = (
    'task_id, repo, artifact_id, fail_to_pass, pass_to_pass, status, origin, "order", parent_id, pred_patch, '
    "diff_hash, family, meta, retired_reason, created_at"
)
STAT_COLS = "task_id, status, rand_key, repo, family, diff_hash, attempts, solves, recent, last_attempt_at"
ATT_COLS = (
    "task_id, artifact_id, run_id, role, policy_version, reward, solved, turns, tokens, termination, "
    "trajectory_path, wall_time, created_at"
)


def bulk_load(store, data) -> float:
    artifacts, tasks, stats_rows, attempts = data
    t0 = time.perf_counter()
    raw = store.engine.raw_connection()
    try:
        cur = raw.cursor()
        repos = sorted({a[1] for a in artifacts})
        if store.engine.dialect.name == "sqlite":
            cur.execute("BEGIN")
            cur.executemany(
                "INSERT INTO repos (name, created_at) VALUES (?, ?)", [(r, artifacts[0][-1]) for r in repos]
            )
            for table, cols, rows in (
                ("artifacts", ART_COLS, artifacts),
                ("tasks", TASK_COLS, tasks),
                ("task_stats", STAT_COLS, stats_rows),
                ("attempts", ATT_COLS, attempts),
            ):
                marks = ", ".join("?" * len(rows[0]))
                cur.executemany(f"INSERT INTO {table} ({cols}) VALUES ({marks})", rows)
            cur.execute("COMMIT")
            cur.execute("ANALYZE")
        else:
            cur.executemany(
                "INSERT INTO repos (name, created_at) VALUES (%s, %s)", [(r, artifacts[0][-1]) for r in repos]
            )
            for table, cols, rows in (
                ("artifacts", ART_COLS, artifacts),
                ("tasks", TASK_COLS, tasks),
                ("task_stats", STAT_COLS, stats_rows),
                ("attempts", ATT_COLS, attempts),
            ):
                with cur.copy(f"COPY {table} ({cols}) FROM STDIN") as copy:
                    for row in rows:
                        copy.write_row(row)
            raw.commit()
            # What autovacuum does shortly after a bulk load; it sets the visibility map that lets the
            # sampling walk be an index-only scan.
            raw.driver_connection.autocommit = True
            cur.execute("VACUUM ANALYZE")
    finally:
        raw.close()
    return time.perf_counter() - t0


def baseline_sample(store, n: int, config: SamplingConfig, rng: random.Random) -> list:
    """Aggregate statistics from the attempts table, then the same pure sampler over every task."""
    solved = func.sum(
        func.cast(
            AttemptRow.solved,
            store.engine.dialect.name == "sqlite" and AttemptRow.turns.type or AttemptRow.turns.type,
        )
    )
    agg = (
        select(AttemptRow.task_id, func.count().label("n"), solved.label("s"))
        .where(AttemptRow.role == "solver")
        .group_by(AttemptRow.task_id)
        .subquery()
    )
    stmt = (
        select(
            TaskRow.task_id,
            TaskRow.repo,
            TaskRow.status,
            TaskRow.family,
            TaskRow.diff_hash,
            func.coalesce(agg.c.n, 0),
            func.coalesce(agg.c.s, 0),
        )
        .outerjoin(agg, agg.c.task_id == TaskRow.task_id)
        .where(TaskRow.status == "active")
    )
    with store.engine.connect() as conn:
        rows = conn.execute(stmt).all()
    cands = [TaskStats(*r[:6], solves=int(r[6])) for r in rows]  # columns in TaskStats field order
    # recent is unknown without a window query; the baseline bands on the overall rate.
    result = sample(cands, n, SamplingConfig(**{**config.__dict__, "rate": "overall"}), rng)
    return store.get_tasks(list(result.chosen))


def plans(store, n: int, config: SamplingConfig) -> str:
    """Query plans of the unseen and the in-band candidate queries, as the store runs them."""
    from sqlalchemy.dialects import postgresql, sqlite

    dialect = store.engine.dialect
    compiler = sqlite.dialect() if dialect.name == "sqlite" else postgresql.dialect()
    unseen, in_band, _ = tier_conditions(config)
    out = []
    for name, cond, limit in (("unseen", unseen, n), ("in-band", in_band, config.pool_factor * n)):
        stmt = tier_select(cond).where(TaskStatsRow.rand_key >= 0.5).limit(limit)
        sql = str(stmt.compile(dialect=compiler, compile_kwargs={"literal_binds": True}))
        if name == "unseen" and dialect.name == "sqlite":
            sql = sqlite_unseen_sql(stmt)
        with store.engine.connect() as conn:
            if dialect.name == "sqlite":
                rows = [r[-1] for r in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql)]
            else:
                rows = [r[0] for r in conn.exec_driver_sql("EXPLAIN (ANALYZE, COSTS OFF) " + sql)]
        out.append(f"{name} tier:\n" + "\n".join(f"  {r}" for r in rows))
    return "\n".join(out)


def timed(fn, repeats: int) -> tuple[float, int]:
    times, size = [], 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        size = len(fn())
        times.append(time.perf_counter() - t0)
    return statistics.median(times), size


def bench(url: str, name: str, data, args) -> None:
    store = open_store(url)
    load = bulk_load(store, data)
    cfg = SamplingConfig(retire_solved_last_k=0, retire_unsolved_after_m=0)  # keep the store unchanged
    rng = random.Random(1)
    store.sample_tasks(args.batch, config=cfg, rng=rng)  # warm caches
    ours, got = timed(lambda: store.sample_tasks(args.batch, config=cfg, rng=rng), args.repeats)
    base, got_b = timed(lambda: baseline_sample(store, args.batch, cfg, rng), max(3, args.repeats // 5))
    print(f"\n== {name}: {len(data[1]):,} tasks, {len(data[3]):,} attempts (bulk load {load:.1f} s)")
    print(f"sample_tasks({args.batch}): median {ours * 1000:.1f} ms ({got} tasks)")
    print(f"baseline GROUP BY + sample all: median {base * 1000:.1f} ms ({got_b} tasks)")
    print(f"speed-up vs baseline: {base / ours:.1f}x")
    print(plans(store, args.batch, cfg))
    store.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", type=int, default=100_000)
    ap.add_argument("--attempts", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=25)
    ap.add_argument("--engines", default="sqlite,postgres")
    args = ap.parse_args()
    t0 = time.perf_counter()
    data = synth(args.tasks, args.attempts)
    # The synthetic rows (millions of tuples) belong to the harness, not to the store: keep the garbage
    # collector from re-scanning them during the timed calls.
    gc.collect()
    gc.freeze()
    print(f"synthesised data in {time.perf_counter() - t0:.1f} s")
    engines = args.engines.split(",")
    if "sqlite" in engines:
        with tempfile.TemporaryDirectory() as tmp:
            bench(f"sqlite:///{tmp}/bench.db", "SQLite", data, args)
    if "postgres" in engines:
        base = (
            os.environ.get("SELFPLAY_TEST_POSTGRES_URL")
            or subprocess.run(
                ["bash", str(Path(__file__).with_name("postgres.sh"))],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
        )
        schema = f"bench_{uuid.uuid4().hex[:8]}"
        admin = create_engine(base, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text(f"CREATE SCHEMA {schema}"))
        try:
            sep = "&" if "?" in base else "?"
            bench(f"{base}{sep}options=-csearch_path%3D{schema}", "PostgreSQL", data, args)
        finally:
            with admin.connect() as conn:
                conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))


if __name__ == "__main__":
    main()
