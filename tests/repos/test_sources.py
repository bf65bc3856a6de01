"""Fetching sources into git repositories: real PyPI sdists (with a release history), git and local."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from repos.errors import RepoError
from repos.sources import fetch_source, release_history, tree_digest
from repos.spec import RepoSpec


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SELFPLAY_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.mark.slow
def test_pypi_history_builds_one_commit_per_release(cache):
    """inflection's sdists are ~15 kB; three releases become three commits, HEAD the pinned one."""
    spec = RepoSpec(name="inflection", source="pypi", version="0.5.1", history=3)
    assert release_history("inflection", "0.5.1", 3) == ["0.4.0", "0.5.0", "0.5.1"]
    repo = fetch_source(spec)
    subjects = git(repo, "log", "--format=%s").splitlines()
    assert subjects == ["inflection 0.5.1", "inflection 0.5.0", "inflection 0.4.0"]
    assert "Version: 0.5.1" in (repo / "PKG-INFO").read_text()
    assert git(repo, "status", "--porcelain") == ""
    # Real changes between releases, to revert: the library module changed in each step.
    assert "inflection" in git(repo, "diff", "--stat", "HEAD~1", "HEAD")
    assert set(git(repo, "tag").split()) == {"v0.4.0", "v0.5.0", "v0.5.1"}
    # Deterministic: a fresh fetch gives the same commit ids (stable image hashes).
    head, digest = git(repo, "rev-parse", "HEAD"), tree_digest(repo)
    again = fetch_source(spec, refresh=True)
    assert git(again, "rev-parse", "HEAD") == head and tree_digest(again) == digest


@pytest.mark.slow
def test_pypi_unknown_version_is_a_clear_error(cache):
    with pytest.raises(RepoError, match="toolz==0.0.0-nope"):
        fetch_source(RepoSpec(name="toolz", source="pypi", version="0.0.0-nope"))


def test_git_source_keeps_full_history(cache, tmp_path):
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    git(upstream, "init", "-q")
    for i in range(3):
        (upstream / "mod.py").write_text(f"X = {i}\n")
        git(upstream, "add", "-A")
        git(upstream, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", f"c{i}")
    first_two = git(upstream, "rev-parse", "HEAD~1").strip()
    repo = fetch_source(RepoSpec(name="up", source="git", url=upstream.as_uri(), commit=first_two))
    assert git(repo, "rev-parse", "HEAD").strip() == first_two
    assert (repo / "mod.py").read_text() == "X = 1\n"
    assert len(git(repo, "log", "--format=%H", "--all").split()) == 3


def test_local_source_copies_tree_and_inits_git(cache, tmp_path):
    src = tmp_path / "proj"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "a.py").write_text("A = 1\n")
    repo = fetch_source(RepoSpec(name="proj", source="local", path=str(src)))
    assert git(repo, "status", "--porcelain") == "" and (repo / "pkg" / "a.py").read_text() == "A = 1\n"
    first = tree_digest(repo)
    (src / "pkg" / "a.py").write_text("A = 2\n")  # local sources are re-copied: edits show up
    assert tree_digest(fetch_source(RepoSpec(name="proj", source="local", path=str(src)))) != first


def test_missing_local_path_and_image_source(cache, tmp_path):
    with pytest.raises(RepoError, match="not a directory"):
        fetch_source(RepoSpec(name="x", source="local", path=str(tmp_path / "nope")))
    assert fetch_source(RepoSpec(name="x", source="image", image="some/image:tag")) is None
