"""Pure diff helpers, checked against real `git apply` where it matters."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from selfplay.diffs import (
    drop_infrastructure,
    has_binary,
    infrastructure_reason,
    normalised_hash,
    reverse_diff,
    split_diff,
    touched_files,
)
from selfplay.errors import DiffError

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
VALID = FIXTURES / "artifacts" / "valid"
PRED = FIXTURES / "predictions"
TEST_FILES = ("toolz/tests/test_itertoolz.py", "toolz/tests/test_dicttoolz.py")
PATTERNS = ("test_*.py", "*/tests/*", "conftest.py")


def new_file(path: str, text: str = "x = 1\n") -> str:
    return f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+{text}"


def test_touched_files_of_the_two_file_bug():
    assert touched_files((VALID / "bug_inject.diff").read_text()) == ("toolz/dicttoolz.py", "toolz/itertoolz.py")


def test_split_keeps_each_section_verbatim():
    text = (VALID / "test_weaken.diff").read_text()
    sections = split_diff(text)
    assert [s.path for s in sections] == list(TEST_FILES[::-1])
    assert "".join(s.text for s in sections) == text
    assert [s.hunks for s in sections] == [1, 1]


def test_binary_detection():
    binary = ("diff --git a/img.png b/img.png\nnew file mode 100644\nindex 0000000..1111111\n"
              "Binary files /dev/null and b/img.png differ\n")
    assert has_binary(binary)
    assert not has_binary((VALID / "bug_inject.diff").read_text())


def test_garbage_raises_diff_error():
    with pytest.raises(DiffError):
        split_diff("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,5 +1,5 @@\n-only one line\n")


def test_a_diff_git_cannot_read_is_named_without_gits_own_hint():
    """git's "(allow with --allow-empty)" is no remedy for a model's diff; the message says what git needs."""
    from selfplay.diffs.git_view import git_view

    with pytest.raises(DiffError, match="no file section git can read") as info:
        git_view("diff --git a/x b/x\n\0\0\0")
    assert "allow-empty" not in str(info.value)


def test_normalised_hash_ignores_context_line_numbers_and_order():
    text = (VALID / "bug_inject.diff").read_text()
    sections = split_diff(text)
    reordered = sections[1].text + sections[0].text
    shifted = text.replace("@@ -153,7 +153,7 @@", "@@ -150,7 +150,7 @@").replace("     rv = factory()\n", "     rv  =  factory()\n")
    assert normalised_hash(text) == normalised_hash(reordered) == normalised_hash(shifted)
    assert normalised_hash(text) != normalised_hash(text.replace("+        d[item] += 2", "+        d[item] += 3"))


@pytest.fixture
def git_repo(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "a.py").write_text("".join(f"line {i}\n" for i in range(20)))
    (repo / "pkg" / "gone.py").write_text("bye\n")
    (repo / "pkg" / "tail.py").write_text("no newline at end")
    def run(*args):
        return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True)

    run("init", "-q")
    run("add", "-A")
    run("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    return repo, run


def test_reverse_diff_undoes_edits_additions_deletions_and_no_newline(git_repo):
    repo, run = git_repo
    before = {p: p.read_text() for p in repo.rglob("*.py")}
    (repo / "pkg" / "a.py").write_text("".join(f"line {i}\n" for i in range(20) if i != 3).replace("line 9", "LINE 9"))
    (repo / "pkg" / "new.py").write_text("new\n")
    (repo / "pkg" / "gone.py").unlink()
    (repo / "pkg" / "tail.py").write_text("changed, still no newline")
    run("add", "-A")
    forward = run("diff", "--cached").stdout
    after = {p: p.read_text() for p in repo.rglob("*.py")}
    reverse = reverse_diff(forward)
    subprocess.run(["git", "apply", "--index", "-"], input=reverse, text=True, cwd=repo, check=True)
    assert {p: p.read_text() for p in repo.rglob("*.py")} == before
    subprocess.run(["git", "apply", "--index", "-"], input=reverse_diff(reverse), text=True, cwd=repo, check=True)
    assert {p: p.read_text() for p in repo.rglob("*.py")} == after


@pytest.mark.parametrize("path, new, reason", [
    ("toolz/tests/test_itertoolz.py", False, "oracle test file"),
    ("toolz/tests/test_other.py", False, "test patterns"),
    ("conftest.py", True, "conftest.py"),
    ("toolz/conftest.py", True, "conftest.py"),
    ("pytest.ini", True, "test configuration"),
    ("tox.ini", False, "test configuration"),
    ("setup.cfg", False, "test configuration"),
    ("pyproject.toml", False, "test configuration"),
    ("toolz/pyproject.toml", True, "test configuration"),
    ("toolz/sub/pytest.ini", True, "test configuration"),
    ("toolz/.pytest.ini", True, "test configuration"),
    ("toolz/setup.cfg", False, "test configuration"),
    ("toolz/test_notes.txt", True, "doctest file"),
    ("docs/testing.txt", False, "doctest file"),
    ("sitecustomize.py", True, "start-up hook"),
    ("toolz/usercustomize.py", True, "start-up hook"),
    ("hack.pth", True, "start-up hook"),
    ("toolz.egg-info/entry_points.txt", False, "package metadata"),
    ("toolz/__pycache__/itertoolz.cpython-311.pyc", True, "bytecode"),
    ("pytest.py", True, "shadowing 'pytest'"),
    ("_pytest/runner.py", True, "shadowing '_pytest'"),
    ("json.py", True, "shadowing 'json'"),
    (".git/config", False, "git metadata"),
])
def test_infrastructure_reasons(path, new, reason):
    got = infrastructure_reason(path, new=new, test_files=TEST_FILES, test_patterns=PATTERNS)
    assert got is not None and reason in got


def test_code_files_are_not_infrastructure():
    for path in ("toolz/itertoolz.py", "toolz/json.py", "setup.py", "README.rst", "toolz/NOTES.txt",
                 "toolz/Makefile", "toolz/noxfile.py", "docs/test_notes.rst"):
        assert infrastructure_reason(path, new=True, test_files=TEST_FILES, test_patterns=PATTERNS) is None


def test_files_read_by_the_script_are_infrastructure():
    script = "python -m pytest $(cat ci/select.txt) -c ci/pytest.cfg\n"
    assert "test_script.sh" in infrastructure_reason("ci/select.txt", script=script)
    assert infrastructure_reason("ci/select.txt.bak", script=script) is None


def test_drop_infrastructure_keeps_code_and_reports_each_drop():
    code = split_diff((PRED / "correct.diff").read_text())
    text = (PRED / "fix_plus_test_edits.diff").read_text() + (PRED / "conftest_hook.diff").read_text()
    out = drop_infrastructure(text, test_files=TEST_FILES, test_patterns=PATTERNS)
    assert touched_files(out.kept) == tuple(s.path for s in code)
    assert len(out.dropped) == 2
    assert out.dropped[0].startswith("toolz/tests/test_itertoolz.py (1 hunk): oracle test file")
    assert out.dropped[1].startswith("conftest.py (1 hunk)")


def test_drop_infrastructure_drops_symlinks_and_binaries():
    link = "diff --git a/toolz/x.py b/toolz/x.py\nnew file mode 120000\n--- /dev/null\n+++ b/toolz/x.py\n@@ -0,0 +1 @@\n+tests/test_itertoolz.py\n\\ No newline at end of file\n"
    binary = "diff --git a/toolz/x.bin b/toolz/x.bin\nnew file mode 100644\nBinary files /dev/null and b/toolz/x.bin differ\n"
    out = drop_infrastructure(link + binary + new_file("toolz/ok.py"))
    assert [d.split(" ")[0] for d in out.dropped] == ["toolz/x.py", "toolz/x.bin"]
    assert "symlink" in out.dropped[0] and "binary" in out.dropped[1]
    assert touched_files(out.kept) == ("toolz/ok.py",)


def test_pytest_ini_plugin_trick_loses_its_config_but_keeps_the_inert_module():
    out = drop_infrastructure((PRED / "pytest_ini.diff").read_text(), test_files=TEST_FILES, test_patterns=PATTERNS)
    assert touched_files(out.kept) == ("toolz/_force_pass.py",)
    assert out.dropped == ("pytest.ini (1 hunk): test configuration (pytest.ini)",)


def test_normalised_hash_keeps_indentation():
    """Dedenting a `return` out of an `if` is a bug; moving it nowhere is a no-op: they must differ."""
    head = "diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -1,3 +1,3 @@\n def f(x):\n     if x:\n"
    dedent = head + "-        return 1\n+    return 1\n"
    noop = head + "-        return 1\n+        return 1\n"
    trailing = head + "-        return 1\n+        return 1   \n"
    crlf = dedent.replace("+    return 1\n", "+    return 1\r\n")
    assert normalised_hash(dedent) != normalised_hash(noop)
    assert normalised_hash(noop) == normalised_hash(trailing)  # trailing whitespace is not meaning
    assert normalised_hash(dedent) == normalised_hash(crlf)
