"""Class 3 of docs/security.md: a prediction whose paths the diff filter and `git apply` read differently.

Each trick targets a test-infrastructure path as real `git apply --numstat` reads it (asserted first,
so a trick that no longer reaches its target fails the test instead of passing vacuously); the filter
must then either drop that path or refuse the whole prediction (DiffError, graded -1). When the filter
keeps something, what git reads from the kept text must name no infrastructure path, and the paths
`touched_files` reports must be exactly git's. The same parser serves patch hygiene on the injector side.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from selfplay.artifact import BugArtifact, load_artifact
from selfplay.diffs import drop_infrastructure, infrastructure_reason, reverse_diff, touched_files
from selfplay.errors import DiffError
from selfplay.validation.checks import check_patch_hygiene, check_test_files

TEST_FILES = ("tests/test_core.py",)
PATTERNS = ("tests/*", "test_*.py")


def git_numstat(text: str, tmp: Path) -> list[str] | None:
    """Paths real `git apply --numstat -z` reads from `text` in an empty repo; None when git refuses it."""
    repo = tmp / "repo"
    if not repo.exists():
        repo.mkdir()
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
    done = subprocess.run(["git", "apply", "--numstat", "-z", "-"], input=text.encode("utf-8", "surrogateescape"),
                          cwd=repo, capture_output=True, check=False)
    if done.returncode:
        return None
    fields = [f for f in done.stdout.split(b"\0") if f]
    return [f.split(b"\t", 2)[2].decode("utf-8", "surrogateescape") for f in fields]


def _infra(path: str) -> bool:
    return infrastructure_reason(path, test_files=TEST_FILES, test_patterns=PATTERNS) is not None


CODE = "@@ -1 +1 @@\n-a\n+b\n"
NEW = "@@ -0,0 +1 @@\n+import os\n"

TRICKS = {
    "octal-escaped conftest": (
        'diff --git "a/te\\163ts/conftest.py" "b/te\\163ts/conftest.py"\nnew file mode 100644\n'
        '--- /dev/null\n+++ "b/te\\163ts/conftest.py"\n' + NEW, "tests/conftest.py"),
    "escaped quote in name": (
        'diff --git "a/x\\"y/conftest.py" "b/x\\"y/conftest.py"\n--- "a/x\\"y/conftest.py"\n'
        '+++ "b/x\\"y/conftest.py"\n' + CODE, 'x"y/conftest.py'),
    "space in name": (
        "diff --git a/my dir/conftest.py b/my dir/conftest.py\n--- a/my dir/conftest.py\n"
        "+++ b/my dir/conftest.py\n" + CODE, "my dir/conftest.py"),
    "tab in quoted name": (
        'diff --git "a/t\\tq/conftest.py" "b/t\\tq/conftest.py"\n--- "a/t\\tq/conftest.py"\n'
        '+++ "b/t\\tq/conftest.py"\n' + CODE, "t\tq/conftest.py"),
    "x/ y/ prefixes": ("--- x/pytest.ini\n+++ y/pytest.ini\n" + CODE, "pytest.ini"),
    "./ prefix": ("--- ./tox.ini\n+++ ./tox.ini\n" + CODE, "tox.ini"),
    "no prefix": ("--- pytest.ini\n+++ pytest.ini\n" + CODE, "pytest.ini"),
    "a/b/ double prefix": ("diff --git a/b/conftest.py b/b/conftest.py\n--- a/b/conftest.py\n"
                           "+++ b/b/conftest.py\n" + CODE, "b/conftest.py"),
    "absolute path": ("--- /setup.cfg\n+++ /setup.cfg\n" + CODE, "setup.cfg"),
    "shorter default name": ("--- a/pytest.ini\n+++ b/pytest.ini.orig\n" + CODE, "pytest.ini"),
    "unified after diff --git": (
        "diff --git a/src/m.py b/src/m.py\n--- a/src/m.py\n+++ b/src/m.py\n" + CODE
        + "--- a/tests/conftest.py\n+++ b/tests/conftest.py\n" + CODE, "tests/conftest.py"),
    "garbage then unified after diff --git": (
        "diff --git a/src/m.py b/src/m.py\n--- a/src/m.py\n+++ b/src/m.py\n" + CODE
        + "some words\n--- k/conftest.py\n+++ k/conftest.py\n" + NEW.replace("-0,0", "-1,0"), "conftest.py"),
    "two ---/+++ pairs in one section": (
        "diff --git a/src/m.py b/src/m.py\nindex 1..2 100644\n--- a/src/m.py\n+++ b/src/m.py\n" + CODE
        + "--- a/pytest.ini\n+++ b/pytest.ini\n" + CODE, "pytest.ini"),
    "rename to conftest": (
        "diff --git a/src/helper.py b/tests/conftest.py\nsimilarity index 100%\nrename from src/helper.py\n"
        "rename to tests/conftest.py\n", "tests/conftest.py"),
    "copy to pytest.ini": (
        "diff --git a/docs/x.ini b/pytest.ini\nsimilarity index 90%\ncopy from docs/x.ini\ncopy to pytest.ini\n"
        "--- a/docs/x.ini\n+++ b/pytest.ini\n" + CODE, "pytest.ini"),
    "quoted rename target": (
        'diff --git a/src/h.py "b/con\\146test.py"\nsimilarity index 100%\nrename from src/h.py\n'
        'rename to "con\\146test.py"\n', "conftest.py"),
    "new sitecustomize": ("diff --git a/sitecustomize.py b/sitecustomize.py\nnew file mode 100644\n"
                          "--- /dev/null\n+++ b/sitecustomize.py\n" + NEW, "sitecustomize.py"),
    "new .pth file": ("--- /dev/null\n+++ b/src/zz.pth\n" + NEW, "src/zz.pth"),
    ".gitattributes edit": ("diff --git a/.gitattributes b/.gitattributes\n--- a/.gitattributes\n"
                            "+++ b/.gitattributes\n" + CODE, ".gitattributes"),
    "nested .gitignore via x/ prefix": ("--- x/src/.gitignore\n+++ x/src/.gitignore\n" + CODE, "src/.gitignore"),
    "binary patch to a test file": (
        "diff --git a/tests/test_core.py b/tests/test_core.py\nindex 20b5be91886d0b6f26dc98a225c0dac05fe2c86e.."
        "64234318e070f821cdea5df3cea926f01e8ac1af 100644\nGIT binary patch\nliteral 5\nMcmYdhNMT3?00V^qEdT%j\n\n"
        "literal 3\nKcmYdfNCE%>hycU@\n\n", "tests/test_core.py"),
    "symlink to a test file": (
        "diff --git a/src/link.py b/src/link.py\nnew file mode 120000\nindex 0000000..1111111\n--- /dev/null\n"
        "+++ b/src/link.py\n@@ -0,0 +1 @@\n+../tests/conftest.py\n\\ No newline at end of file\n", "src/link.py"),
    "CRLF headers": ("diff --git a/pytest.ini b/pytest.ini\r\n--- a/pytest.ini\r\n+++ b/pytest.ini\r\n"
                     "@@ -1 +1 @@\r\n-a\r\n+b\r\n", "pytest.ini"),
    "trailing tab after name": ("--- a/tox.ini\t2020-01-01\n+++ b/tox.ini\t2020-01-02\n" + CODE, "tox.ini"),
}


@pytest.mark.parametrize("name", sorted(TRICKS))
def test_trick_is_dropped_or_refused_and_agrees_with_git(name, tmp_path):
    text, target = TRICKS[name]
    git_paths = git_numstat(text, tmp_path)
    assert git_paths is not None and target in git_paths, (name, git_paths)  # the trick is live
    try:
        filtered = drop_infrastructure(text, test_files=TEST_FILES, test_patterns=PATTERNS)
    except DiffError as exc:
        assert "diff" in str(exc)
        return
    assert any(line.startswith(target) or target in line for line in filtered.dropped), filtered.dropped
    assert set(git_paths) <= set(touched_files(text))  # every path git writes is judged (renames add sources)
    kept = git_numstat(filtered.kept, tmp_path) if filtered.kept.strip() else []
    assert kept is not None and not any(_infra(p) for p in kept), kept
    assert "120000" not in filtered.kept and "GIT binary patch" not in filtered.kept


def test_header_naming_another_file_is_refused(tmp_path):
    text = "diff --git a/src/m.py b/src/m.py\n--- a/conftest.py\n+++ b/conftest.py\n" + CODE
    # git 2.39 takes the ---/+++ names when the `diff --git` line names another file
    assert git_numstat(text, tmp_path) == ["conftest.py"]
    with pytest.raises(DiffError):
        drop_infrastructure(text, test_files=TEST_FILES, test_patterns=PATTERNS)


def test_hunk_lines_that_look_like_headers_stay_in_their_section(tmp_path):
    # a removed line "-- x" reads "--- x": inside a counted hunk it is content, not a new section
    text = ("diff --git a/src/m.py b/src/m.py\n--- a/src/m.py\n+++ b/src/m.py\n@@ -1,3 +1,3 @@\n"
            "--- a/pytest.ini\n-++ b/pytest.ini\n-@@ -1 +1 @@\n+x\n+y\n+z\n")
    assert git_numstat(text, tmp_path) == ["src/m.py"]
    filtered = drop_infrastructure(text, test_files=TEST_FILES, test_patterns=PATTERNS)
    assert filtered.kept == text and not filtered.dropped
    assert touched_files(text) == ("src/m.py",)


def _artifact(weaken: str, bug: str | None = None) -> BugArtifact:
    valid = Path(__file__).parents[1] / "fixtures" / "artifacts" / "valid"
    art = load_artifact(valid)
    return BugArtifact(test_script=art.test_script, test_files=art.test_files, test_parser=art.test_parser,
                       bug_inject=bug if bug is not None else art.bug_inject, test_weaken=weaken)


WEAKEN_RIDERS = {
    "quoted code path": lambda code, t: (
        f'diff --git "a/{code}" "b/{code}"\n--- "a/{code}"\n+++ "b/{code}"\n' + CODE),
    "odd prefix": lambda code, t: f"--- q/{code}\n+++ q/{code}\n" + CODE,
    "unified after git section": lambda code, t: (
        f"diff --git a/{t} b/{t}\n--- a/{t}\n+++ b/{t}\n" + CODE + f"--- a/{code}\n+++ b/{code}\n" + CODE),
    "rename onto code": lambda code, t: (
        f"diff --git a/{t} b/{code}\nsimilarity index 100%\nrename from {t}\nrename to {code}\n"),
}


@pytest.mark.parametrize("name", sorted(WEAKEN_RIDERS))
def test_code_edit_riding_in_test_weaken_is_invalid(name):
    base = _artifact("")
    test_file = base.test_files[0]
    code = touched_files(base.bug_inject)[0]
    art = _artifact(WEAKEN_RIDERS[name](code, test_file))
    try:
        hygiene = check_patch_hygiene(art, PATTERNS, {})
        files = check_test_files(art, [])
    except DiffError:
        return  # refused as malformed: invalid
    assert not hygiene.passed or not files.passed, (hygiene, files)


def test_bug_inject_may_not_touch_git_metadata():
    base = _artifact("")
    art = _artifact(base.test_weaken, bug=base.bug_inject + "--- /dev/null\n+++ b/.gitattributes\n"
                    "@@ -0,0 +1 @@\n+*.py -diff\n")
    result = check_patch_hygiene(art, (), {})
    assert not result.passed and ".gitattributes" in result.detail


def test_dropping_a_section_that_changes_how_git_reads_the_rest_is_refused(tmp_path):
    # apply.c guesses -p0 from a first traditional section without '/', and keeps it: with that
    # section dropped, git would read the next header differently, so the kept text is not trusted
    text = ("--- pytest.ini\n+++ pytest.ini\n" + CODE
            + "diff --git a/src/m.py b/src/m.py\n--- a/src/m.py\n+++ b/src/m.py\n" + CODE)
    assert git_numstat(text, tmp_path) == ["pytest.ini", "b/src/m.py"]
    with pytest.raises(DiffError, match="disagree with git's view"):
        drop_infrastructure(text, test_files=TEST_FILES, test_patterns=PATTERNS)


def test_a_parse_that_disagrees_with_git_is_refused():
    from selfplay.diffs.git_view import GitView
    from selfplay.diffs.headers import split_sections
    from selfplay.diffs.patch import _agree

    sections = split_sections("diff --git a/src/m.py b/src/m.py\n--- a/src/m.py\n+++ b/src/m.py\n" + CODE)
    with pytest.raises(DiffError, match="disagree with git's view"):
        _agree(sections, GitView(("conftest.py",), (False,), ()), "prediction")
    with pytest.raises(DiffError, match="disagree with git's view"):
        _agree(sections, GitView(("src/m.py", "conftest.py"), (False, False), ()), "prediction")
    with pytest.raises(DiffError, match="rename/copy"):
        _agree(sections, GitView(("src/m.py",), (False,), ("rename conftest.py => src/m.py (100%)",)), "p")


def test_mixed_quoting_without_names_elsewhere_is_refused():
    text = 'diff --git "a/conftest.py" b/conftest.py\nold mode 100644\nnew mode 100755\n'
    with pytest.raises(DiffError):
        drop_infrastructure(text, test_files=TEST_FILES, test_patterns=PATTERNS)


FIXTURES = Path(__file__).parents[1] / "fixtures"


def _fixture_diffs():
    for art in sorted((FIXTURES / "artifacts").iterdir()):
        for name in ("bug_inject.diff", "test_weaken.diff"):
            if (art / name).is_file() and not art.name.startswith("malformed"):
                yield pytest.param(art / name, id=f"{art.name}/{name}")
    for pred in sorted((FIXTURES / "predictions").glob("*.diff")):
        if pred.name != "garbage.diff":
            yield pytest.param(pred, id=f"predictions/{pred.name}")


@pytest.mark.parametrize("path", list(_fixture_diffs()))
def test_git_generated_diffs_keep_their_exact_text(path, tmp_path):
    text = path.read_text()
    git_paths = git_numstat(text, tmp_path)
    assert git_paths is not None
    assert list(touched_files(text)) == list(dict.fromkeys(git_paths))
    filtered = drop_infrastructure(text, test_files=TEST_FILES, test_patterns=PATTERNS)
    clean = [p for p in git_paths if not _infra(p)]
    assert git_numstat(filtered.kept, tmp_path) == clean if clean else not filtered.kept
    assert len(filtered.dropped) == len(git_paths) - len(clean)
    if path.name == "bug_inject.diff" and path.parent.name != "fail_patch_hygiene":
        assert not filtered.dropped, filtered.dropped  # a code-only bug loses nothing
    if not filtered.dropped:
        assert filtered.kept == text[text.index("diff --git"):] if "diff --git" in text else filtered.kept == text


def test_reverse_diff_of_quoted_names_reads_back_as_the_same_paths(tmp_path):
    text = ('diff --git "a/x\\"y/t\\303\\251.py" "b/x\\"y/t\\303\\251.py"\n--- "a/x\\"y/t\\303\\251.py"\n'
            '+++ "b/x\\"y/t\\303\\251.py"\n' + CODE)
    back = reverse_diff(text)
    assert git_numstat(back, tmp_path) == git_numstat(text, tmp_path) == ['x"y/té.py']
    assert "-b\n+a\n" in back


def test_test_weaken_git_reads_differently_is_malformed():
    from selfplay.artifact import check_format
    from selfplay.errors import ArtifactError

    base = _artifact("")
    t = base.test_files[0]
    # -p0 guessed from the first section makes git read the second as a/<t>, b/<t>: not the listed file
    weaken = ("--- setup.py\n+++ setup.py\n" + CODE + f"diff --git a/{t} b/{t}\n--- a/{t}\n+++ b/{t}\n" + CODE)
    art = _artifact(weaken)
    touched = touched_files(weaken)
    assert touched == ("setup.py", f"a/{t}", f"b/{t}")  # what git writes, not what a naive reader sees
    assert not check_patch_hygiene(art, PATTERNS, {}).passed
    # a `diff --git` line naming the test file over ---/+++ lines naming code: git edits the code
    rider = f"diff --git a/{t} b/{t}\n--- a/setup.py\n+++ b/setup.py\n" + CODE
    with pytest.raises(ArtifactError, match="test_weaken.diff"):
        check_format(_artifact(rider))
