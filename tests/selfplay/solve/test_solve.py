"""`selfplay solve` on a local repository with the scripted policy: the expected patch and branch, the
user's tree untouched; and bad input failing clearly with no output (dirty tree with --branch, issue URL
without network, a repo that does not install)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ISSUE = "add() subtracts\n\n`calc.add(2, 3)` returns -1 instead of 5.\n"
FIX = ("```edit\nstr_replace calc/__init__.py\n<<<<<<< SEARCH\n    return a - b\n=======\n    return a + b\n"
       ">>>>>>> REPLACE\n```")
ACTIONS = ["```bash\ncat calc/__init__.py\n```", FIX, "```bash\npython -m pytest -q tests\n```", "```submit\n```"]


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          check=True, capture_output=True, text=True).stdout


def _repo(root: Path, *, setup_py: str | None = None) -> Path:
    repo = root / "calc-repo"
    (repo / "calc").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "calc" / "__init__.py").write_text("def add(a, b):\n    return a - b\n")
    (repo / ".gitignore").write_text(".pytest_cache/\n__pycache__/\n*.egg-info/\n")  # as most repos have
    (repo / "tests" / "test_calc.py").write_text("from calc import add\n\n\ndef test_add():\n"
                                                 "    assert add(2, 3) == 5\n")
    if setup_py is None:
        (repo / "pyproject.toml").write_text('[build-system]\nrequires = ["setuptools>=61"]\n'
                                             'build-backend = "setuptools.build_meta"\n\n[project]\n'
                                             'name = "calc"\nversion = "0.1"\n')
    else:
        (repo / "setup.py").write_text(setup_py)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "calc")
    return repo


def _solve(tmp_path: Path, repo: Path, *extra: str, actions: list[str] = ACTIONS):
    from typer.testing import CliRunner

    from selfplay.cli import app

    script = tmp_path / "actions.json"
    script.write_text(json.dumps(actions))
    return CliRunner().invoke(app, ["solve", "--repo", str(repo), "--policy", "scripted", "--script",
                                    str(script), "--max-turns", "6", *extra])


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


@pytest.mark.docker
@pytest.mark.slow
def test_solve_local_repo_writes_the_patch_and_a_branch(tmp_path):
    repo = _repo(tmp_path)
    head = _git(repo, "rev-parse", "HEAD").strip()
    issue = tmp_path / "issue.md"
    issue.write_text(ISSUE)
    out = tmp_path / "fix.diff"
    res = _solve(tmp_path, repo, "--issue", str(issue), "--out", str(out), "--branch", "fix-add")
    assert res.exit_code == 0, res.output + repr(res.exception)
    patch = out.read_text()
    assert "-    return a - b\n+    return a + b\n" in patch and "diff --git a/calc/__init__.py" in patch
    text = _flat(res.output)
    assert "files changed: calc/__init__.py" in text and "after 4 turns" in text
    assert "tests the agent ran: python -m pytest -q tests" in text
    assert "turn 1: bash: " in text and "turn 4: submit" in text  # each turn as a line (no terminal here)
    # the branch holds the fix on top of HEAD; the working tree, index and HEAD are untouched
    assert _git(repo, "rev-parse", "fix-add~1").strip() == head
    assert "return a + b" in _git(repo, "show", "fix-add:calc/__init__.py")
    assert _git(repo, "rev-parse", "HEAD").strip() == head and _git(repo, "status", "--porcelain") == ""
    assert (repo / "calc" / "__init__.py").read_text().endswith("return a - b\n")


@pytest.mark.docker
@pytest.mark.slow
def test_max_repeats_ends_a_loop_of_one_action_with_an_empty_patch(tmp_path):
    """The agent reads the same file again and again: with --max-repeats 2 the third equal turn ends the
    episode as `repeated`, and nothing is written as a fix."""
    repo = _repo(tmp_path)
    out = tmp_path / "fix.diff"
    res = _solve(tmp_path, repo, "--issue", ISSUE, "--out", str(out), "--max-repeats", "2",
                 actions=["```bash\ncat calc/__init__.py\n```"] * 6)
    assert res.exit_code == 0, res.output + repr(res.exception)
    text = _flat(res.output)
    assert "ended: repeated after 3 turns" in text and "the patch is empty" in text, text
    assert out.read_text() == ""


def test_a_limit_out_of_range_is_refused_before_any_work(tmp_path):
    repo = _repo(tmp_path)
    out = tmp_path / "fix.diff"
    for option in ("--max-repeats", "--max-turns", "--max-new-tokens"):
        res = _solve(tmp_path, repo, "--issue", ISSUE, "--out", str(out), option, "0")
        assert res.exit_code == 2 and f"Invalid value for '{option}'" in _flat(res.output), res.output
        assert not out.exists()


@pytest.mark.docker
@pytest.mark.slow
def test_a_repo_that_fails_to_install_gets_the_build_log_tail_and_no_patch(tmp_path):
    repo = _repo(tmp_path, setup_py="raise SystemExit('calc cannot be built: missing compiler')\n")
    out = tmp_path / "fix.diff"
    res = _solve(tmp_path, repo, "--issue", ISSUE, "--out", str(out))
    text = _flat(res.output)
    assert res.exit_code == 1 and "the repo does not install (`pip install -e .`" in text, res.output
    assert "missing compiler" in text and "Build log:" in text and "--setup CMD" in text
    assert not out.exists()


def test_dirty_tree_with_branch_is_refused_before_any_work(tmp_path):
    repo = _repo(tmp_path)
    (repo / "calc" / "__init__.py").write_text("# local edit\n")
    out = tmp_path / "fix.diff"
    res = _solve(tmp_path, repo, "--issue", ISSUE, "--out", str(out), "--branch", "fix-add")
    assert res.exit_code == 2 and "has uncommitted changes" in _flat(res.output), res.output
    assert not out.exists() and "fix-add" not in _git(repo, "branch")


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare(1) for an empty network namespace")
def test_issue_url_without_network_suggests_a_file(tmp_path):
    """Really offline: the CLI runs in a new network namespace (`unshare -n`, only a down loopback)."""
    repo = _repo(tmp_path)
    out = tmp_path / "fix.diff"
    script = tmp_path / "actions.json"
    script.write_text(json.dumps(ACTIONS))
    cmd = ["unshare", "-n", sys.executable, "-c", "from selfplay.cli import main; main()", "solve", "--repo", str(repo), "--policy",
           "scripted", "--script", str(script), "--issue", "https://github.com/pytoolz/toolz/issues/1",
           "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if "unshare failed" in proc.stderr:
        pytest.skip(f"cannot create a network namespace here: {proc.stderr.strip()}")
    text = _flat(proc.stdout + proc.stderr)
    assert proc.returncode == 2 and "could not fetch https://api.github.com/repos/pytoolz/toolz/issues/1" in text, text
    assert "--issue-file FILE" in text and not out.exists()
