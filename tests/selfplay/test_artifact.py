"""Loading, saving and format-checking the five-file artifact (no Docker)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from selfplay.artifact import ARTIFACT_FILES, BugArtifact, check_format, load_artifact, save_artifact
from selfplay.errors import ArtifactError

ARTIFACTS = Path(__file__).resolve().parent.parent / "fixtures" / "artifacts"


def test_load_valid_fixture_reads_all_five_files():
    a = load_artifact(ARTIFACTS / "valid")
    assert a.test_files == ("toolz/tests/test_itertoolz.py", "toolz/tests/test_dicttoolz.py")
    assert "pytest" in a.test_script and "json" in a.test_parser
    assert a.bug_inject.startswith("diff --git") and a.test_weaken.startswith("diff --git")


def test_save_then_load_round_trips(tmp_path):
    a = load_artifact(ARTIFACTS / "valid")
    save_artifact(a, tmp_path / "copy")
    assert sorted(p.name for p in (tmp_path / "copy").iterdir()) == sorted(ARTIFACT_FILES)
    assert load_artifact(tmp_path / "copy") == a
    assert load_artifact(tmp_path / "copy").digest() == a.digest()


@pytest.mark.parametrize("name, message", [
    ("malformed_missing_file", "missing test_parser.py"),
    ("malformed_empty_diff", "bug_inject.diff is empty"),
    ("malformed_non_utf8", "bug_inject.diff in .* is not valid UTF-8"),
])
def test_malformed_artifacts_raise_a_clear_error(name, message):
    with pytest.raises(ArtifactError, match=message):
        load_artifact(ARTIFACTS / name)


def test_missing_directory_is_a_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_artifact(tmp_path / "nope")


def test_a_linked_artifact_file_is_refused_before_it_is_read(tmp_path):
    """A link would have the host read a file outside the artifact and send it into a sandbox."""
    copy = tmp_path / "linked"
    shutil.copytree(ARTIFACTS / "valid", copy)
    secret = tmp_path / "secret.txt"
    secret.write_text("host-only\n")
    (copy / "test_script.sh").unlink()
    (copy / "test_script.sh").symlink_to(secret)
    with pytest.raises(ArtifactError, match="test_script.sh in .* is a symbolic link; artifact files must be regular"):
        load_artifact(copy)


def _valid() -> BugArtifact:
    return load_artifact(ARTIFACTS / "valid")


@pytest.mark.parametrize("change, message", [
    ({"test_parser": "def broken(:\n"}, "test_parser.py is not valid Python"),
    ({"test_files": ()}, "lists no test file"),
    ({"test_files": ("/etc/passwd",)}, "relative to the repo root"),
    ({"test_files": ("../x.py",)}, "relative to the repo root"),
    ({"test_weaken": "not a diff at all\n"}, "test_weaken.diff contains no file diff"),
    ({"bug_inject": "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n-a\n"}, "bug_inject.diff is not a valid"),
    ({"test_script": "  \n"}, "test_script.sh is empty"),
])
def test_format_check_names_the_bad_file(change, message):
    from dataclasses import replace

    with pytest.raises(ArtifactError, match=message):
        check_format(replace(_valid(), **change))


def test_test_files_txt_ignores_blanks_comments_and_dot_slash(tmp_path):
    shutil.copytree(ARTIFACTS / "valid", tmp_path / "a")
    (tmp_path / "a" / "test_files.txt").write_text(
        "# oracle\n./toolz/tests/test_itertoolz.py\n\ntoolz/tests/test_dicttoolz.py\ntoolz/tests/test_dicttoolz.py\n")
    assert load_artifact(tmp_path / "a").test_files == _valid().test_files


def test_from_files_names_the_missing_files():
    """An injector that submits fewer than five files gets an ArtifactError (an invalid verdict), not a KeyError."""
    files = load_artifact(ARTIFACTS / "valid").files()
    del files["test_parser.py"], files["test_weaken.diff"]
    with pytest.raises(ArtifactError, match="missing test_parser.py, test_weaken.diff"):
        BugArtifact.from_files(files)
