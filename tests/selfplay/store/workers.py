"""Worker processes for the store concurrency tests (run as scripts: `python workers.py MODE URL ...`).

write URL WORKER N     N writes: solver attempts on the 10 seeded tasks, artifacts shared by every worker
                       (deduplication races) and artifacts of this worker alone; prints a JSON summary.
hang URL               records a validation, and stops inside the transaction, after the task row is
                       written and before commit; prints "ready" and sleeps until killed.
"""

from __future__ import annotations

import json
import sys
import time

from store_data import make_artifact, make_report

from selfplay.store import open_store


def write(url: str, worker: int, n: int) -> None:
    store = open_store(url)
    seeded = sorted(s.task_id for s in store.task_stats() if s.repo == "seed")
    shared: dict[int, str] = {}
    attempts = []
    for j in range(n):
        kind = j % 4
        if kind in (0, 1):
            task = seeded[j % len(seeded)]
            attempts.append(
                store.record_attempt(
                    task,
                    role="solver",
                    policy_version=worker,
                    reward=1.0 if (worker + j) % 3 == 0 else -1.0,
                    turns=j,
                    tokens=10 * j,
                    termination="submitted",
                    run_id=f"run-{worker}",
                )
            )
        elif kind == 2:
            shared[j] = store.record_validation(
                make_artifact(1000 + j), "shared", make_report(n=j), origin="injector"
            )
        else:
            store.record_validation(
                make_artifact(100_000 * (worker + 1) + j), "own", make_report(n=j), origin="procedural"
            )
    store.close()
    print(json.dumps({"attempts": attempts, "shared": shared}))


def hang(url: str) -> None:
    from selfplay.store import rows

    original = rows.put_task

    def put_task_then_hang(*args, **kwargs):
        task_id = original(*args, **kwargs)
        print("ready", flush=True)
        time.sleep(600)
        return task_id

    rows.put_task = put_task_then_hang
    open_store(url).record_validation(make_artifact(7), "killed", make_report(n=7), origin="injector")


if __name__ == "__main__":
    mode, url, *rest = sys.argv[1:]
    if mode == "write":
        write(url, int(rest[0]), int(rest[1]))
    else:
        hang(url)
