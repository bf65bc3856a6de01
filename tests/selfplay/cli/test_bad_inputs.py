"""Bad input across the commands, through the real `selfplay` entry point in a subprocess (as a user runs it).

Each row asserts the exit code (2 for bad usage or config, 1 where the verdict is "invalid", 0 where a
grade still ran), a message naming the bad input, no traceback on stderr, and nothing written: the
working folder holds the same files afterwards (no run directory, no store file, no folders), and no
sandbox container was started. A missing optional package is simulated by blocking its import
(`sys.modules[name] = None`), the way Python reports a module that is not installed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
VALID = FIXTURES / "artifacts" / "valid"
GOLD = FIXTURES / "predictions" / "correct.diff"
pytestmark = pytest.mark.slow  # ~40 CLI processes, about a minute on 2 cores
NOT_UTF8 = b"name: \xff\xfe broken\n"


@dataclass(frozen=True)
class Row:
    id: str
    args: tuple[str, ...]
    code: int
    names: str
    """Text the message must contain: the bad input, by name."""
    block: tuple[str, ...] = ()
    """Modules to make unimportable (a default install without an extra)."""


ROWS = [
    # the curriculum store: scheme, reachability, write access, driver; readers never create one
    Row("store-unreachable", ("tasks", "list", "--store", "postgresql://u:p@127.0.0.1:1/x"), 2, "127.0.0.1:1"),
    Row("store-unwritable", ("tasks", "list", "--store", "sqlite:////proc/x.db"), 2, "/proc/x.db"),
    Row("store-mysql", ("tasks", "list", "--store", "mysql://x"), 2, "mysql://x"),
    Row("store-no-driver", ("tasks", "list", "--store", "postgresql+psycopg://u:p@127.0.0.1:1/x"), 2,
        "selfplay-swe[postgres]", block=("psycopg", "psycopg2")),
    Row("store-missing-dir", ("tasks", "stats", "--store", "nosuchdir/x.db"), 2, "nosuchdir/x.db"),
    Row("export-no-store", ("tasks", "export", "--format", "swebench", "tasks.jsonl"), 2, "selfplay.db"),
    Row("export-format", ("tasks", "export", "--format", "csv", "tasks.jsonl"), 2, "csv"),
    Row("list-status", ("tasks", "list", "--status", "bogus"), 2, "bogus"),
    Row("import-not-json", ("tasks", "import", "notjson.jsonl"), 2, "notjson.jsonl:1"),
    Row("import-not-utf8", ("tasks", "import", "notutf8.jsonl"), 2, "notutf8.jsonl:1"),
    Row("demos-mysql", ("demos", "--repo", "toolz", "--store", "mysql://x"), 2, "mysql://x"),
    # evaluation datasets: checked line by line; the extra named when missing
    Row("eval-bad-line", ("eval", "swebench", "--dataset", "notjson.jsonl"), 2, "line 2"),
    Row("eval-missing", ("eval", "swebench", "--dataset", "missing.jsonl"), 2, "missing.jsonl"),
    Row("eval-no-extra", ("eval", "swebench", "--dataset", "notjson.jsonl"), 2, "selfplay-swe[eval]",
        block=("swebench",)),
    # solve: every input checked before a model loads
    Row("solve-issue-path", ("solve", "--repo", "repo", "--issue", "./missing.md"), 2, "./missing.md"),
    Row("solve-issue-at", ("solve", "--repo", "repo", "--issue", "@missing.md"), 2, "missing.md"),
    Row("solve-empty-issue", ("solve", "--repo", "repo", "--issue-file", "empty.md"), 2, "empty.md"),
    Row("solve-not-git", ("solve", "--repo", "nogit", "--issue", "add() is wrong"), 2, "nogit"),
    Row("solve-model-dir", ("solve", "--repo", "repo", "--issue", "add() is wrong", "--model", "./nomodel"), 2,
        "./nomodel does not exist"),
    Row("episode-model-dir", ("episode", "--role", "solver", "--model", "nogit"), 2, "nogit has no config.json"),
    Row("solve-commit", ("solve", "--repo", "repo", "--commit", "deadbeef", "--issue", "add() is wrong"), 2,
        "deadbeef"),
    # run: references validated before anything is made, --print-config included
    Row("run-repo-print", ("run", "repos=[nonexistent]", "--print-config"), 2, "nonexistent"),
    Row("run-repo", ("run", "repos=[nonexistent]"), 2, "nonexistent"),
    Row("run-store-scheme", ("run", "store_url=mysql://x"), 2, "mysql://x"),
    Row("run-repo-list", ("run", "repo_list=/missing.toml"), 2, "/missing.toml"),
    Row("run-runs-dir", ("run", "runs_dir=/proc/nope"), 2, "/proc/nope"),
    Row("run-endpoint", ("run", "policy.backend=openai", "policy.endpoints=[localhost:8000]"), 2,
        "'localhost:8000' names no http:// or https:// scheme"),
    Row("run-model-dir", ("run", "policy.model_dir=./nomodel"), 2, "./nomodel"),
    Row("rft-model-dir", ("rft", "--out", "rftout", "--model", "./nomodel"), 2, "./nomodel does not exist"),
    Row("rft-dtype", ("rft", "--out", "rftout", "--dtype", "fp16"), 2, "dtype must be auto, bf16 or fp32"),
    Row("run-config-utf8", ("run", "--config", "notutf8.yaml"), 2, "notutf8.yaml"),
    Row("run-preset", ("run", "--config", "smoek"), 2, "smoek"),
    Row("run-key", ("run", "learner.engine.lrr=1e-6"), 2, "learner.engine.lrr"),
    Row("run-value", ("run", "iterations=many"), 2, "iterations"),
    Row("resume-not-run", ("run", "--resume", "nodir"), 2, "nodir"),
    Row("resume-no-state", ("run", "--resume", "runs/nostate"), 2, "state.json"),
    Row("resume-corrupt-state", ("run", "--resume", "runs/corrupt"), 2, "state.json"),
    # artifacts and predictions
    Row("validate-missing", ("validate", "noartifact", "--repo", "toolz"), 2, "noartifact"),
    Row("validate-repo", ("validate", str(VALID), "--repo", "nosuchrepo"), 2, "nosuchrepo"),
    Row("validate-50mb", ("validate", "big", "--repo", "toolz"), 1, "bug_inject.diff"),
    # a store or --out that cannot take the result is refused before any suite runs
    Row("validate-store-dir", ("validate", str(VALID), "--repo", "toolz", "--store", "nogit"), 2, "nogit"),
    Row("seed-out-file", ("seed", "--repo", "toolz", "--out", "empty.md"), 2, "--out empty.md is a file"),
    # square brackets in a name are shown, not read as Rich markup
    Row("validate-brackets", ("validate", "no[bold]dir", "--repo", "toolz"), 2, "no[bold]dir"),
    Row("repos-list-brackets", ("repos", "list", "--list", "norepos.toml"), 2, "[defaults] table and [[repo]]"),
    # a limit of 0 or less is a usage error, not the artifact's failure
    Row("validate-suite-timeout", ("validate", str(VALID), "--repo", "toolz", "--suite-timeout", "-3"), 2,
        "suite_timeout must be > 0"),
    Row("validate-max-output", ("validate", str(VALID), "--repo", "toolz", "--max-test-output", "0"), 2,
        "max_test_output must be > 0"),
    Row("run-parser-timeout", ("run", "grader.parser_timeout=-1"), 2, "parser_timeout must be > 0"),
    Row("grade-not-diff", ("grade", str(VALID), "--repo", "toolz", "--patch", "notadiff.txt"), 0,
        "prediction is not a unified diff"),
    Row("grade-missing-patch", ("grade", str(VALID), "--repo", "toolz", "--patch", "nope.diff"), 2, "nope.diff"),
    Row("grade-patch-dir", ("grade", str(VALID), "--repo", "toolz", "--patch", "nogit"), 2,
        "--patch nogit: a directory"),
    Row("grade-new-store", ("grade", str(VALID), "--repo", "toolz", "--patch", str(GOLD), "--store", "new.db"), 2,
        "new.db"),
]


def _materials(root: Path) -> None:
    """The inputs the rows name, in the working folder."""
    (root / "notjson.jsonl").write_text('{"instance_id": "a"}\nnot json\n')
    (root / "notutf8.jsonl").write_bytes(b'{"instance_id": "\xff"}\n')
    (root / "notutf8.yaml").write_bytes(NOT_UTF8)
    (root / "empty.md").write_text("")
    (root / "norepos.toml").write_text("x = 1\n")
    (root / "notadiff.txt").write_text("I fixed it: add() now adds.\n")
    (root / "nogit").mkdir()
    repo = root / "repo"
    repo.mkdir()
    (repo / "a.py").write_text("x = 1\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "a"], check=True)
    config = subprocess.run([sys.executable, "-c", "from selfplay.cli import main; main()", "run", "--config",
                             "smoke", "--print-config"], capture_output=True, text=True, check=True).stdout
    for name in ("nostate", "corrupt"):
        run = root / "runs" / name
        (run / "trajectories").mkdir(parents=True)
        (run / "config.yaml").write_text(config)
        (run / "trajectories" / "it00000-solver.jsonl.gz").write_bytes(b"")
    (root / "runs" / "corrupt" / "state.json").write_text('{"run_id": "corrupt", "completed": ')
    big = root / "big"
    shutil.copytree(VALID, big)
    with (big / "bug_inject.diff").open("a") as fh:  # 50 MB of added lines after a real diff
        fh.write("+x = 1\n" * (50 * (1 << 20) // 7))


def _tree(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*") if ".git" not in p.parts}


def _containers_of(pid: int) -> set[str] | None:
    """Ids of sandbox containers owned by process `pid` (None when no Docker engine answers here). Other
    processes' containers (tests running beside this one) do not count."""
    if shutil.which("docker") is None:
        return None
    res = subprocess.run(["docker", "ps", "-aq", "--filter", "label=selfplay.sandbox",
                          "--filter", f"label=selfplay.owner.pid={pid}"], capture_output=True, text=True, timeout=30)
    return set(res.stdout.split()) if res.returncode == 0 else None


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("bad-inputs")
    _materials(root)
    return root


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_bad_input_is_named_with_nothing_written(row: Row, workdir: Path):
    work = workdir  # shared by the rows: each leaves it as it was, or fails
    before = _tree(work)
    blocker = "".join(f"sys.modules[{m!r}] = None; " for m in row.block)
    env = {k: v for k, v in os.environ.items() if k != "SELFPLAY_STORE"} | {"COLUMNS": "300"}
    with subprocess.Popen([sys.executable, "-c", f"import sys; {blocker}from selfplay.cli import main; main()",
                           *row.args], cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=env) as child:
        stdout, stderr = child.communicate(timeout=300)
    proc = subprocess.CompletedProcess(child.args, child.returncode, stdout, stderr)
    out = re.sub(r"[\s│]+", " ", proc.stdout + proc.stderr)
    assert proc.returncode == row.code, out
    assert row.names in out, out
    assert "Traceback" not in proc.stderr, proc.stderr
    assert _tree(work) == before, "files were written"
    assert not _containers_of(child.pid), "a container was left behind"


def test_grade_json_says_why_a_prediction_is_not_graded(workdir: Path):
    proc = subprocess.run([sys.executable, "-c", "from selfplay.cli import main; main()", "grade", str(VALID),
                           "--repo", "toolz", "--patch", "notadiff.txt", "--json"], cwd=workdir,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    graded = json.loads(proc.stdout)
    assert graded["reward"] == -1 and graded["resolved"] is False
    assert graded["error"] == "prediction is not a unified diff" and graded["tests"] == {}
