"""Benchmark repo images: reuse lookup and full build, each against a baseline measured in the same run.

- reuse: `repo_image(spec)` when the image exists (source cache lookup, tree hash, image inspect) against
  the `docker image inspect` CLI on the same tag;
- build: `repo_image(spec, rebuild=True)` (copy in, venv, one pip install, git bookkeeping, commit) against
  a bare `docker run` of the same venv + pip install with the same pip cache and CA bundle mounted.

Usage: .venv/bin/python scripts/bench_images.py [--repo toolz] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time
from pathlib import Path

from repos.cache import cache_root
from repos.listfile import get_repo
from repos.sources import fetch_source
from sandboxes.image_build import HOST_CA_BUNDLE
from sandboxes.images import ensure_base_image, repo_image


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", default="toolz")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    spec = get_repo(args.repo)
    tag = repo_image(spec)
    source = fetch_source(spec)
    base = ensure_base_image()

    reuse = [timed(lambda: repo_image(spec)) for _ in range(max(5, args.repeats))]
    inspect = [timed(lambda: subprocess.run(["docker", "image", "inspect", tag], check=True,
                                            capture_output=True)) for _ in range(max(5, args.repeats))]

    requirements = " ".join(spec.install) or "pytest"
    bare = (f"python3 -m venv /opt/venv && PIP_CACHE_DIR=/pipcache PIP_CERT=/ca.crt "
            f"/opt/venv/bin/pip install -q -e /src {requirements}")
    pip_cache = cache_root() / "pip"

    def bare_build() -> None:
        subprocess.run(["docker", "run", "--rm", "-v", f"{source}:/src-ro:ro", "-v", f"{pip_cache}:/pipcache",
                        "-v", f"{HOST_CA_BUNDLE}:/ca.crt:ro", base, "bash", "-c",
                        f"cp -r /src-ro /src && {bare}"], check=True, capture_output=True)

    builds, bares = [], []
    for _ in range(args.repeats):  # interleaved so machine load hits both alike
        builds.append(timed(lambda: repo_image(spec, rebuild=True, log_dir=Path("/tmp/bench-images-logs"))))
        bares.append(timed(bare_build))

    rows = [("repo_image reuse (image exists)", reuse, "docker image inspect CLI", inspect),
            ("repo_image build (--rebuild)", builds, "bare docker run venv + pip install", bares)]
    print(f"repo {spec.name} ({tag}), medians over {args.repeats}+ runs")
    print("| What | Median | Baseline (same run) | Ratio |\n|---|---|---|---|")
    for what, ours, base_name, theirs in rows:
        a, b = statistics.median(ours), statistics.median(theirs)
        print(f"| {what} | {a:.3f} s | {base_name}: {b:.3f} s | {a / b:.2f} |")


if __name__ == "__main__":
    main()
