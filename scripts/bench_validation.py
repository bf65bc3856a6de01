"""Validation wall time per artifact against its floor.

Floors, where "one suite run" is the median time of the artifact's own test_script.sh through `docker exec`
in a warm sandbox (run as the runner uid, as validation runs it), measured in the same process:
- sequential floor: the validation's suite runs done one after another in one warm
  container = runs x one suite run. Target: validation (default parallelism) <= 1.2x of it.
- parallel floor: runs x one suite run / cores used. Target <= 1.5x.
Also printed: the same validation run sequentially (parallelism 1).

Usage: python scripts/bench_validation.py [--repo toolz] [--artifact tests/fixtures/artifacts/valid] [--repeats 5]
"""

from __future__ import annotations

import argparse
import inspect
import statistics
import time
from dataclasses import replace
from pathlib import Path

from repos.listfile import get_repo
from sandboxes.docker import DockerSandbox
from sandboxes.images import repo_image
from sandboxes.pool import SandboxPool
from selfplay.artifact import load_artifact
from selfplay.jobs import SCRATCH, prepare
from selfplay.validation import ValidationConfig, validate

if "user" in inspect.signature(DockerSandbox.exec).parameters:  # hardened: the script runs as the runner uid
    from sandboxes.users import RUNNER_UID, drop_privileges

    RUN_AS, USER = drop_privileges(RUNNER_UID) + " ", {"user": "root"}
else:  # older trees (A/B runs with PYTHONPATH=<checkout>): as root
    RUN_AS, USER = "", {}


def suite_time(pool: SandboxPool, artifact, repeats: int) -> float:
    times = []
    with pool.checkout() as sb:
        prepare(sb, artifact)
        for _ in range(repeats + 1):
            start = time.monotonic()
            res = sb.exec(f"{RUN_AS}bash /dev/fd/3 3<{SCRATCH}/test_script.sh > /dev/null 2>&1", timeout=300, **USER)
            times.append(time.monotonic() - start)
            assert not res.timed_out
    return statistics.median(times[1:])  # the first run warms the page cache


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", default="toolz")
    ap.add_argument("--artifact", default=str(Path(__file__).resolve().parent.parent
                                              / "tests/fixtures/artifacts/valid"))
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--cores", type=int, default=2, help="Parallelism of the validation (cores used).")
    ap.add_argument("--pool", type=int, default=0, help="Pool size (default 2 x cores, so a validation never "
                                                       "waits for the background reset of the previous one).")
    args = ap.parse_args()

    spec = get_repo(args.repo)
    artifact = load_artifact(args.artifact)
    config = ValidationConfig(parallelism=args.cores)
    with SandboxPool(repo_image(spec), size=args.pool or 2 * args.cores, workdir=spec.workdir) as pool:
        validate(artifact, spec, config, pool=pool)  # warm-up
        rows = []
        for _ in range(args.repeats):
            t_suite = suite_time(pool, artifact, 3)
            report = validate(artifact, spec, config, pool=pool)
            assert report.valid, report.to_json()
            seq = validate(artifact, spec, replace(config, parallelism=1), pool=pool)
            floor = report.suite_runs * t_suite / args.cores
            rows.append((t_suite, report.duration, seq.duration, floor, report.suite_runs))
    t_suite = statistics.median(r[0] for r in rows)
    wall = statistics.median(r[1] for r in rows)
    seq = statistics.median(r[2] for r in rows)
    ratio = statistics.median(r[1] / r[3] for r in rows)
    runs = rows[0][4]
    print(f"repo {args.repo}, artifact {Path(args.artifact).name}, {args.repeats} repeats, medians, "
          f"pool of {args.pool or 2 * args.cores}")
    print(f"one suite run (docker exec, warm sandbox): {t_suite:.2f} s")
    print(f"suite runs per validation: {runs}; cores used: {args.cores}; floor: {runs * t_suite / args.cores:.2f} s")
    print(f"validation wall time, parallelism {args.cores}: {wall:.2f} s = {ratio:.2f}x parallel floor "
          f"(target <= 1.5x) = {wall / (runs * t_suite):.2f}x sequential floor ({runs * t_suite:.2f} s; "
          "target <= 1.2x)")
    print(f"validation wall time, parallelism 1: {seq:.2f} s = {seq / (runs * t_suite):.2f}x sequential floor "
          f"({runs * t_suite:.2f} s); speed-up from the pool {seq / wall:.2f}x")


if __name__ == "__main__":
    main()
