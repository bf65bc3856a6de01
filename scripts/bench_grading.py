"""Grading (and validation) time of this tree against another checkout (hardening must not cost speed;
target <= 1.2x).

Each side runs in its own worker process with its own tree on sys.path (so the two never share code), on
the same machine, interleaved round by round so that load drift hits both alike. A worker starts a pool of
warm sandboxes, validates the artifact once (for FAIL_TO_PASS/PASS_TO_PASS, and to start the parser box),
warms up, then times `grade()` of each prediction through the pool, as the run loop does, and `validate()`.

Also the false-positive rate of the hardening (`--gold`): the gold fix (the reverse of bug_inject.diff) of
the valid fixture artifact and of fresh procedural seeds on the named repos must earn +1; any -1 (tamper
screen, canary, or otherwise) is a false positive, printed with its reason.

Grades alternate the fixture's correct and partial predictions (correct first in every worker); the
summary gives each prediction's median, min and max apart, since the verification run follows only a
main run that passes. `--unverified` adds a third side: this tree grading with `GraderConfig(verify=False)`
(its validation is the same as this tree's). `--out` keeps every timing as JSON.

Usage:
  git worktree add /tmp/base 46eee51
  python scripts/bench_grading.py --base /tmp/base [--rounds 5] [--grades 6] [--unverified] [--out t.json]
  python scripts/bench_grading.py --gold toolz cachetools parse [--seeds 4]
  python scripts/bench_grading.py --screen toolz cachetools parse [--bugs]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
PREDICTIONS = ("correct", "partial")


def worker(args: argparse.Namespace) -> None:
    from repos.listfile import get_repo
    from sandboxes.images import repo_image
    from sandboxes.pool import SandboxPool
    from selfplay.artifact import load_artifact
    from selfplay.judge.grader import GraderConfig, grade
    from selfplay.validation import validate

    config = GraderConfig(verify=False) if args.no_verify else GraderConfig()
    spec = get_repo(args.repo)
    artifact = load_artifact(args.artifact)
    preds = {n: (Path(args.predictions) / f"{n}.diff").read_text() for n in PREDICTIONS}
    out: dict[str, list[float]] = {"grade": [], "validate": []}
    with SandboxPool(repo_image(spec), size=4, workdir=spec.workdir) as pool:
        report = validate(artifact, spec, pool=pool)
        assert report.valid, report.to_json()
        f2p, p2p = report.fail_to_pass, report.pass_to_pass
        grade(artifact, preds["correct"], f2p, p2p, spec=spec, pool=pool)  # warm-up
        for i in range(args.grades):
            name = PREDICTIONS[i % len(PREDICTIONS)]
            start = time.monotonic()
            result = grade(artifact, preds[name], f2p, p2p, spec=spec, pool=pool, config=config)
            out["grade"].append(time.monotonic() - start)
            assert result.reward == (1 if name == "correct" else -1), result.to_json()
        for _ in range(args.validations):
            start = time.monotonic()
            assert validate(artifact, spec, pool=pool).valid
            out["validate"].append(time.monotonic() - start)
    print("BENCH " + json.dumps(out))


def run_worker(tree: Path, args: argparse.Namespace, no_verify: bool = False) -> dict[str, list[float]]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    # each tree's own worker: module paths differ between commits (selfplay/grader.py -> selfplay/judge/)
    cmd = [sys.executable, str(tree / "scripts" / "bench_grading.py"), "--worker", "--repo", args.repo, "--artifact",
           args.artifact, "--predictions", args.predictions, "--grades", str(args.grades),
           "--validations", str(args.validations)] + (["--no-verify"] if no_verify else [])
    res = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=1800)
    line = next((x for x in res.stdout.splitlines() if x.startswith("BENCH ")), None)
    if line is None:
        raise SystemExit(f"worker in {tree} failed (exit {res.returncode}):\n{res.stderr[-3000:]}")
    return json.loads(line[6:])


def gold(repos: list[str], seeds: int, artifact_dir: str) -> None:
    import tempfile

    from repos.listfile import get_repo
    from sandboxes.images import repo_image
    from sandboxes.pool import SandboxPool
    from selfplay.artifact import load_artifact
    from selfplay.diffs import reverse_diff
    from selfplay.judge.grader import grade
    from selfplay.procedural.seed import SeedConfig, seed
    from selfplay.validation import validate

    tasks = []  # (label, repo, artifact, report)
    fixture = load_artifact(artifact_dir)
    for name in repos:
        spec = get_repo(name)
        with SandboxPool(repo_image(spec), size=2, workdir=spec.workdir) as pool:
            if name == "toolz":
                tasks.append((f"fixture {Path(artifact_dir).name}", spec, fixture, validate(fixture, spec, pool=pool)))
            with tempfile.TemporaryDirectory() as out:
                for r in seed(spec, seeds, out, pool=pool, config=SeedConfig(seed=7)):
                    tasks.append((f"seed {name}:{r.file}:{r.operator}", spec, r.artifact, r.report))
            for i, (label, s, artifact, report) in enumerate(tasks):
                if s is not spec:
                    continue
                assert report.valid, (label, report.to_json())
                result = grade(artifact, reverse_diff(artifact.bug_inject), report.fail_to_pass, report.pass_to_pass,
                               spec=spec, pool=pool)
                tasks[i] = (label, s, artifact, result)
    bad = [(label, r) for label, _, _, r in tasks if r.reward != 1]
    for label, _, _, r in tasks:
        print(f"{r.reward:+d}  {label}  integrity: {r.integrity}" + (f"  error: {r.error}" if r.error else ""))
    print(f"gold fixes: {len(tasks)}, earning +1: {len(tasks) - len(bad)}, false positives: {len(bad)} "
          f"({len(bad) / max(1, len(tasks)):.0%})")


def screen_rate(repos: list[str], out: str | None = None, *, bugs: bool = False) -> None:
    """Static false-positive rate of the tamper screen: the gold fix of every procedural mutant (every
    operator at every site) of each repo, screened without running anything. Two denominators: the files
    procedural seeding mutates (`mutable_files`: code with a related test file), and every code file.
    `bugs`: the mutant itself (bug_inject.diff) through validation's screens of a bug instead (the tamper
    screen, then `ValidationConfig.bug_screen`): the procedural bugs those screens would refuse."""
    import ast

    from agent_scaffold.mutation_operators import OPERATORS, mutate
    from repos.listfile import get_repo
    from sandboxes.docker import DockerSandbox
    from sandboxes.images import repo_image
    from selfplay.diffs import matches_any, reverse_diff
    from selfplay.judge.tamper import screen
    from selfplay.procedural.seed import file_diff, mutable_files
    from selfplay.validation import ValidationConfig

    def verdict(bug: str) -> str | None:
        if not bugs:
            return screen(reverse_diff(bug))
        return screen(bug) or screen(bug, ValidationConfig().bug_screen, what="the bug screen")

    counts: dict[str, dict[str, int]] = {}
    flagged: list[str] = []
    for name in repos:
        spec = get_repo(name)
        with DockerSandbox.create(repo_image(spec), workdir=spec.workdir) as sb:
            files = sb.exec("git ls-files '*.py'", timeout=60).output.split()
            seeded = {f for f, _ in mutable_files(files, spec.test_patterns)}
            c = counts[name] = {"seeded": 0, "seeded_flagged": 0, "all": 0, "all_flagged": 0}
            for rel in files:
                if matches_any(rel, spec.test_patterns) or rel.startswith(("docs/", "doc/", "benchmarks/")):
                    continue
                src = sb.read_file(rel).decode()
                try:
                    tree = ast.parse(src)
                except SyntaxError:
                    continue
                for op in OPERATORS:
                    for i in range(len(op.sites(tree))):
                        try:
                            hit = verdict(file_diff(rel, src, mutate(src, op, i)))
                        except (ValueError, IndexError):
                            continue
                        c["all"] += 1
                        c["all_flagged"] += hit is not None
                        if rel in seeded:
                            c["seeded"] += 1
                            c["seeded_flagged"] += hit is not None
                        if hit is not None:
                            flagged.append(f"{name}{' (seeded)' if rel in seeded else ''}: {hit[:150]}")
    for key in ("seeded", "all"):
        total = sum(c[key] for c in counts.values())
        hits = sum(c[f"{key}_flagged"] for c in counts.values())
        what = "bugs" if bugs else "gold fixes"
        print(f"{key} files: procedural {what} screened {total}, flagged {hits} ({hits / max(1, total):.2%})")
    for name, c in counts.items():
        print(f"  {name}: seeded {c['seeded_flagged']}/{c['seeded']}, all {c['all_flagged']}/{c['all']}")
    for line in flagged:
        print("  ", line)
    if out:
        Path(out).write_text(json.dumps({"repos": counts, "flagged": flagged}, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", help="Checkout to compare with (e.g. a worktree of 46eee51).")
    ap.add_argument("--repo", default="toolz")
    ap.add_argument("--artifact", default=str(HERE / "tests/fixtures/artifacts/valid"))
    ap.add_argument("--predictions", default=str(HERE / "tests/fixtures/predictions"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--grades", type=int, default=6, help="Timed grade() calls per worker.")
    ap.add_argument("--validations", type=int, default=2, help="Timed validate() calls per worker.")
    ap.add_argument("--gold", nargs="*", help="Measure gold-fix false positives on these repos instead.")
    ap.add_argument("--seeds", type=int, default=4, help="Procedural seeds per repo for --gold.")
    ap.add_argument("--screen", nargs="*", help="Static false-positive rate of the tamper screen on these repos.")
    ap.add_argument("--bugs", action="store_true",
                    help="With --screen: screen the procedural bugs with validation's screens of a bug instead.")
    ap.add_argument("--unverified", action="store_true",
                    help="Also time this tree grading with the verification run off (a third side).")
    ap.add_argument("--out", help="Write every timing (per side, per call) to this JSON file.")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--no-verify", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.screen:
        screen_rate(args.screen, args.out, bugs=args.bugs)
        return
    if args.gold:
        gold(args.gold, args.seeds, args.artifact)
        return
    if args.worker:
        worker(args)
        return
    if not args.base:
        raise SystemExit("--base is required: a checkout of the commit to compare with")
    sides = {"hardened": (HERE, False), "base": (Path(args.base).resolve(), False)}
    if args.unverified:
        sides["unverified"] = (HERE, True)
    keys = ("grade", "validate", *(f"grade_{n}" for n in PREDICTIONS))
    times: dict[str, dict[str, list[float]]] = {k: {key: [] for key in keys} for k in sides}
    for r in range(args.rounds):
        for name in (list(sides) if r % 2 == 0 else reversed(list(sides))):
            tree, no_verify = sides[name]
            got = run_worker(tree, args, no_verify=no_verify)
            for key, values in got.items():
                times[name][key].extend(values)
            for i, value in enumerate(got["grade"]):  # each worker alternates from the first prediction
                times[name][f"grade_{PREDICTIONS[i % len(PREDICTIONS)]}"].append(value)
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    if args.out:
        Path(args.out).write_text(json.dumps({"args": vars(args), "times": times}, indent=1))
    print(f"repo {args.repo}, artifact {Path(args.artifact).name}, {args.rounds} rounds "
          f"(grade: {len(times['base']['grade'])} calls per side; validate: {len(times['base']['validate'])})")
    for key in keys:
        cells = []
        for name in sides:
            values = times[name][key]
            cells.append(f"{name} {statistics.median(values):.3f} s [{min(values):.3f}-{max(values):.3f}]"
                         if values else f"{name} -")
        base = statistics.median(times["base"][key]) if times["base"][key] else None
        ratios = "  ".join(f"{name}/base {statistics.median(times[name][key]) / base:.2f}x"
                           for name in sides if name != "base" and times[name][key] and base)
        print(f"{key:14s} median [min-max]: " + "  ".join(cells) + f"  ratio {ratios}")
    if args.unverified:
        for key in ("grade", *(f"grade_{n}" for n in PREDICTIONS)):
            hard, off = statistics.median(times["hardened"][key]), statistics.median(times["unverified"][key])
            print(f"{key:14s} hardened/unverified {hard / off:.2f}x")
    print("RAW " + json.dumps(times))


if __name__ == "__main__":
    main()
