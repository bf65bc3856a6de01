"""`code_revision` on checkouts of its own making: the commit, `+dirty` for changed code only, and the
installed version where the package has no checkout of its own."""

import importlib.metadata
import subprocess

import pytest

from selfplay import code_revision as cr


def _git(root, *args):
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    root = tmp_path / "project"
    (root / "selfplay").mkdir(parents=True)
    (root / "docs").mkdir()
    for path in ("pyproject.toml", "selfplay/x.py", "docs/a.md"):
        (root / path).write_text("1\n")
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    monkeypatch.setattr(cr, "ROOT", root)
    cr.code_revision.cache_clear()
    yield root
    cr.code_revision.cache_clear()


def test_a_checkout_names_its_commit_and_whether_its_code_differs(checkout):
    head = _git(checkout, "rev-parse", "HEAD")
    assert cr.code_revision() == f"git:{head}"
    (checkout / "docs/a.md").write_text("2\n")   # docs are no code
    (checkout / "selfplay/new.py").write_text("")  # nor is an untracked file
    cr.code_revision.cache_clear()
    assert cr.code_revision() == f"git:{head}"
    (checkout / "selfplay/x.py").write_text("2\n")
    cr.code_revision.cache_clear()
    assert cr.code_revision() == f"git:{head}+dirty"


def test_a_package_inside_another_repository_names_its_installed_version(checkout, monkeypatch):
    inner = checkout / "docs" / "site-packages"
    inner.mkdir()
    (inner / "pyproject.toml").write_text("")
    monkeypatch.setattr(cr, "ROOT", inner)  # git would answer with the outer repository's commit
    assert cr.code_revision() == f"selfplay-swe {importlib.metadata.version('selfplay-swe')}"
    monkeypatch.setattr(cr, "ROOT", checkout / "docs")  # no pyproject.toml: not a checkout of the project
    cr.code_revision.cache_clear()
    assert not cr.code_revision().startswith("git:")
    monkeypatch.setattr(importlib.metadata, "version", lambda name: (_ for _ in ()).throw(
        importlib.metadata.PackageNotFoundError(name)))
    cr.code_revision.cache_clear()
    assert cr.code_revision() == "unknown"


def test_no_git_on_the_machine_falls_back_to_the_version(checkout, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    assert cr.code_revision() == f"selfplay-swe {importlib.metadata.version('selfplay-swe')}"
