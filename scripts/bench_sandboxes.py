"""Benchmark of the sandbox layer: medians over repeated runs, each against a baseline measured here.

    .venv/bin/python scripts/bench_sandboxes.py [--repeats 10] [--image IMAGE] [--suite-repeats 5]

Rows:
- create-to-first-exec: `DockerSandbox.create` + `exec("true")`, against `docker run --rm IMAGE true`;
- exec("true") against the `docker exec CID true` CLI (ratio: below 1 means faster than the CLI);
- reset of a dirtied repo (reset()) against recreating the container (recreate() + first exec);
- pool checkout (a warm, already reset sandbox) against create-to-first-exec;
- the toolz suite through `sandbox.exec` against the same pytest through `docker exec` (target <= 1.2).

The image defaults to the toolz repo image (built by `selfplay repos build toolz` when missing);
pass --image to use another one with --suite to name its test command.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

DIRTY = ("echo 'x = 1' >> $(git ls-files '*.py' | head -1); rm -f $(git ls-files | sed -n 2p); "
         "head -c 100000 /dev/urandom > new.bin; mkdir -p junk && touch junk/a /tmp/scratch")


def paired(fn: Callable[[], object], base: Callable[[], object], repeats: int,
           setup: Callable[[], object] | None = None) -> tuple[float, float]:
    """Medians of `fn` and of its baseline, run alternately so load drift on a shared machine hits both."""
    times: tuple[list[float], list[float]] = ([], [])
    for i in range(repeats):
        order = ((0, fn), (1, base)) if i % 2 == 0 else ((1, base), (0, fn))
        for k, f in order:
            if setup is not None:
                setup()
            t0 = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t0)
    return statistics.median(times[0]), statistics.median(times[1])


def cli(*args: str) -> None:
    subprocess.run(["docker", *args], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--suite-repeats", type=int, default=5)
    ap.add_argument("--image", help="image to use (default: the toolz repo image)")
    ap.add_argument("--suite", help="test command (default: the toolz spec's test_command)")
    args = ap.parse_args()

    from sandboxes.docker import DockerSandbox
    from sandboxes.pool import SandboxPool

    image, suite = args.image, args.suite
    if image is None or suite is None:
        from repos.listfile import get_repo
        from sandboxes.images import repo_image

        spec = get_repo("toolz")
        image = image or repo_image(spec)
        suite = suite or spec.test_command
    n = args.repeats
    rows: list[tuple[str, float, str, float]] = []

    def create_first_exec() -> None:
        with DockerSandbox.create(image) as sb:
            sb.exec("true")

    create, run = paired(create_first_exec, lambda: cli("run", "--rm", "--network", "none", image, "true"), n)
    rows.append(("create-to-first-exec", create, "docker run --rm IMAGE true", run))

    with DockerSandbox.create(image) as sb:
        sb.exec("true")
        ours, theirs = paired(lambda: sb.exec("true"), lambda: cli("exec", sb.id, "true"), n * 3)
        rows.append(('exec("true")', ours, "docker exec CID true", theirs))

        def recreate() -> None:
            sb.recreate()
            sb.exec("true")

        def dirty() -> None:
            sb.exec(DIRTY)

        reset, again = paired(sb.reset, recreate, n, setup=dirty)
        rows.append(("reset (dirtied repo)", reset, "recreate + first exec", again))
        reset, again = paired(sb.reset, recreate, n)
        rows.append(("reset (clean repo)", reset, "recreate + first exec", again))

        def through_sandbox() -> None:
            r = sb.exec(suite, timeout=600)
            assert r.ok, r.output[-2000:]

        sb.exec(suite, timeout=600)  # warm the page cache for both
        via, direct = paired(through_sandbox,
                             lambda: cli("exec", "-w", sb.workdir, sb.id, "bash", "-c", suite), args.suite_repeats)
        rows.append(("toolz suite via sandbox.exec", via, "same pytest via docker exec", direct))

    with SandboxPool(image, 2) as pool:
        def checkout() -> None:
            with pool.checkout() as sb:
                sb.exec("true")

        checkout()
        checkouts = []
        for _ in range(n):
            time.sleep(0.3)  # let the background reset finish, as between real episodes
            t0 = time.perf_counter()
            checkout()
            checkouts.append(time.perf_counter() - t0)
        rows.append(("pool checkout + exec", statistics.median(checkouts), "create-to-first-exec", create))

    print(f"image: {image}   repeats: {n} (suite: {args.suite_repeats})")
    print(f"| {'what':30} | {'median s':>9} | {'baseline':30} | {'median s':>9} | {'ratio':>6} |")
    print(f"|{'-' * 32}|{'-' * 11}:|{'-' * 32}|{'-' * 11}:|{'-' * 7}:|")
    for what, t, base, b in rows:
        print(f"| {what:30} | {t:9.3f} | {base:30} | {b:9.3f} | {t / b:6.2f} |")


if __name__ == "__main__":
    main()
