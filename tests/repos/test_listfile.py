"""Repo list parsing: the bundled default, every field, and malformed entries with their messages."""

from __future__ import annotations

from pathlib import Path

import pytest

from repos.errors import RepoError, RepoNotFound
from repos.listfile import DEFAULT_LIST, get_repo, load_repo_list
from repos.spec import RepoSpec


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "repos.toml"
    path.write_text(text)
    return path


def test_default_list_has_toolz_and_eight_pypi_repos():
    specs = load_repo_list()
    assert len(specs) >= 8
    assert all(s.source == "pypi" and s.version for s in specs)
    toolz = get_repo("toolz")
    assert (toolz.source, toolz.version, toolz.workdir) == ("pypi", "1.2.0", "/testbed")
    assert any(r.startswith("pytest==") for r in toolz.install)  # defaults apply


def test_every_field_parses(tmp_path):
    path = write(tmp_path, """
[defaults]
install = ["pytest==9.2.0"]

[[repo]]
name = "a"
source = "pypi"
version = "1.0"
package = "a-dist"
history = 2
workdir = "/src"
test_command = "python -m pytest tests"
test_patterns = ["tests/*"]
env = { B = "2", A = "1" }

[[repo]]
name = "b"
source = "local"
path = "sub/dir"
install = ["pytest", "freezegun"]

[[repo]]
name = "c"
source = "git"
url = "file:///x.git"
commit = "abc123"

[[repo]]
name = "d"
source = "image"
image = "swebench/sweb.eval.x86_64.foo:latest"
""")
    a, b, c, d = load_repo_list(path)
    assert a == RepoSpec(name="a", source="pypi", version="1.0", package="a-dist", history=2, workdir="/src",
                         install=("pytest==9.2.0",), test_command="python -m pytest tests",
                         test_patterns=("tests/*",), env=(("A", "1"), ("B", "2")))
    assert a.distribution == "a-dist"
    assert b.path == str((tmp_path / "sub" / "dir").resolve())  # relative to the list file
    assert b.install == ("pytest", "freezegun")  # an entry's own list replaces the default
    assert (c.url, c.commit) == ("file:///x.git", "abc123")
    assert d.image.startswith("swebench/")


@pytest.mark.parametrize("entry, words", [
    ('name = "x"', ["entry #1", "'source'", "missing"]),
    ('name = "x"\nsource = "svn"', ["'source'", "valid sources: pypi, git, local, image"]),
    ('name = "x"\nsource = "pypi"', ["'version'", "required for source 'pypi'"]),
    ('name = "x"\nsource = "git"\nurl = "u"', ["'commit'", "required for source 'git'"]),
    ('name = "x"\nsource = "pypi"\nversion = "1"\nhistroy = 3',
     ["'histroy'", "not a known field", "history"]),
    ('name = "x"\nsource = "pypi"\nversion = 1.0', ["'version'", "non-empty string"]),
    ('name = "x"\nsource = "pypi"\nversion = "1"\nhistory = -1', ["'history'", ">= 0"]),
    ('name = "x"\nsource = "local"\npath = "."\nhistory = 2', ["'history'", "only applies to source 'pypi'"]),
    ('name = "x"\nsource = "pypi"\nversion = "1"\ninstall = "pytest"', ["'install'", "list of non-empty"]),
    ('name = "Bad Name"\nsource = "pypi"\nversion = "1"', ["'name'", "lowercase"]),
    ('name = "x"\nsource = "pypi"\nversion = "1"\nworkdir = "rel"', ["'workdir'", "absolute"]),
    ('name = "x"\nsource = "pypi"\nversion = "1"\nenv = { A = 1 }', ["'env'", "string values"]),
])
def test_malformed_entry_names_entry_and_field(tmp_path, entry, words):
    path = write(tmp_path, f"[[repo]]\n{entry}\n")
    with pytest.raises(RepoError) as info:
        load_repo_list(path)
    message = str(info.value)
    assert str(path) in message
    for word in words:
        assert word in message


def test_duplicate_names_and_empty_and_bad_toml(tmp_path):
    dup = write(tmp_path, '[[repo]]\nname="x"\nsource="pypi"\nversion="1"\n' * 2)
    with pytest.raises(RepoError, match="'x' appears twice"):
        load_repo_list(dup)
    with pytest.raises(RepoError, match="no \\[\\[repo\\]\\] entries"):
        load_repo_list(write(tmp_path, "[defaults]\nsource = 'pypi'\n"))
    with pytest.raises(RepoError, match="not valid TOML"):
        load_repo_list(write(tmp_path, "[[repo]\n"))
    with pytest.raises(RepoError, match="unknown top-level"):
        load_repo_list(write(tmp_path, "[[repos]]\nname='x'\n"))
    with pytest.raises(RepoError, match="cannot read repo list"):
        load_repo_list(tmp_path / "missing.toml")


def test_get_repo_unknown_lists_valid_names():
    with pytest.raises(RepoNotFound) as info:
        get_repo("no-such-repo")
    assert isinstance(info.value, KeyError)
    assert "no-such-repo" in str(info.value) and "toolz" in str(info.value)
    assert str(DEFAULT_LIST) in str(info.value)
