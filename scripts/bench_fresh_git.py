"""What the run's fresh `.git` costs a suite job (`Job.clean`, `sandboxes.shell.FRESH_GIT`), per repo image.

    .venv/bin/python scripts/bench_fresh_git.py [--repos toolz boltons ...] [--repeats 5]

For each repo: a job's root shell on the original tree, with and without `fresh_git` (medians, paired
and alternated), and the sandbox's reset afterwards (which puts the image's `.git` back), with and without.
Baseline: the same job shell without the line. Images are built when missing (`selfplay repos build`).
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from repos.listfile import get_repo
from sandboxes.docker import DockerSandbox
from sandboxes.images import repo_image
from sandboxes.shell import FRESH_GIT
from selfplay.jobs import SCRATCH, git_env_line
from selfplay.jobs.job import FRESH_GIT_LINE

BASE = "git reset -q --hard selfplay-base && git clean -qfd || exit 90"


def _timed(sb: DockerSandbox, script: str) -> tuple[float, float]:
    """Seconds of the job shell, then of the reset after it."""
    t0 = time.perf_counter()
    res = sb.exec("bash -c " + shlex.quote(script), timeout=300, user="root")
    t1 = time.perf_counter()
    assert res.exit_code == 0, res.output
    sb.reset()
    return t1 - t0, time.perf_counter() - t1


def bench(name: str, repeats: int) -> dict:
    spec = get_repo(name)
    sb = DockerSandbox.create(repo_image(spec), workdir=spec.workdir)
    try:
        files = sb.exec("git ls-files | wc -l", timeout=60).output.strip()
        with_git = "\n".join([git_env_line(), FRESH_GIT, BASE, f"mkdir -p {SCRATCH}", FRESH_GIT_LINE])
        without = "\n".join([git_env_line(), FRESH_GIT, BASE])
        runs: dict[str, list[tuple[float, float]]] = {"fresh": [], "base": []}
        _timed(sb, without)  # warm the page cache
        for i in range(repeats):
            order = (("fresh", with_git), ("base", without)) if i % 2 == 0 else (("base", without), ("fresh", with_git))
            for key, script in order:
                runs[key].append(_timed(sb, script))
    finally:
        sb.close()
    med = {k: (statistics.median(j for j, _ in v), statistics.median(r for _, r in v)) for k, v in runs.items()}
    return {"repo": name, "files": files, "job_fresh": med["fresh"][0], "job_base": med["base"][0],
            "reset_fresh": med["fresh"][1], "reset_base": med["base"][1]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repos", nargs="+", default=["toolz"])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    print("| Repo | Tracked files | Job shell: with / without (s) | Reset after: with / without (s) | Added per job (s) |")
    print("|---|---|---|---|---|")
    for name in args.repos:
        r = bench(name, args.repeats)
        added = (r["job_fresh"] - r["job_base"]) + (r["reset_fresh"] - r["reset_base"])
        print(f"| {r['repo']} | {r['files']} | {r['job_fresh']:.3f} / {r['job_base']:.3f} | "
              f"{r['reset_fresh']:.3f} / {r['reset_base']:.3f} | {added:.3f} |", flush=True)


if __name__ == "__main__":
    main()
