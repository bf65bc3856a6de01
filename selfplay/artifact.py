"""`BugArtifact`: SSR's five-file bug artifact (paper section 2.2), held in memory.

Loading, saving and the format check live in this module too; consistency validation (does the bug
really break tests, ...) lives in `selfplay.validation`.

Departure from the paper: the paper does not define a format check. Ours rejects, before any sandbox
runs, a missing file, a file that is not UTF-8, an empty or unparsable diff, an empty test list and
absolute or `..` paths in it, each with an error naming the file.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from agent_scaffold.roles import ARTIFACT_FILES
from selfplay.diffs import normalised_hash, parse_diff
from selfplay.errors import ArtifactError, DiffError

MAX_FILE_BYTES = 4 << 20
"""Largest artifact file accepted: SSR's bugs are a few hunks; a multi-megabyte diff is an attack on the
validator's time (every check would parse, apply and run it), not a bug."""


@dataclass(frozen=True)
class BugArtifact:
    """The five files, as text."""

    test_script: str
    """test_script.sh: run from the repo root, runs the chosen tests."""
    test_files: tuple[str, ...]
    """test_files.txt: the oracle test files, relative to the repo root."""
    test_parser: str
    """test_parser.py: reads test output on stdin, prints {test_id: "passed"|"failed"} JSON on stdout."""
    bug_inject: str
    """bug_inject.diff: git diff over code files that introduces the bug."""
    test_weaken: str
    """test_weaken.diff: git diff over test files that hides the bug."""

    def files(self) -> dict[str, str]:
        """The five files' names mapped to their text, as they are written to disk."""
        return {
            "test_script.sh": self.test_script,
            "test_files.txt": "".join(f"{p}\n" for p in self.test_files),
            "test_parser.py": self.test_parser,
            "bug_inject.diff": self.bug_inject,
            "test_weaken.diff": self.test_weaken,
        }

    @classmethod
    def from_files(cls, files: Mapping[str, str]) -> BugArtifact:
        """The inverse of `files()`: the five files' texts by name (test_files.txt as its text).

        Raises `ArtifactError` naming the missing files: an injector that submits fewer than five files
        gets an invalid verdict, not a KeyError."""
        missing = [name for name in ARTIFACT_FILES if name not in files]
        if missing:
            raise ArtifactError(f"the artifact is missing {', '.join(missing)} "
                                f"(an artifact needs all of: {', '.join(ARTIFACT_FILES)})")
        return cls(
            test_script=files["test_script.sh"],
            test_files=_parse_test_files(files["test_files.txt"]),
            test_parser=files["test_parser.py"],
            bug_inject=files["bug_inject.diff"],
            test_weaken=files["test_weaken.diff"],
        )

    def digest(self) -> str:
        """Stable sha256 over the normalised diffs' text (task ids, seeding's dedup). Two bugs writing the same
        text on other lines share it; the store tells them apart by their lines (`selfplay.diffs.site_hash`)."""
        h = hashlib.sha256()
        h.update(normalised_hash(self.bug_inject).encode())
        h.update(normalised_hash(self.test_weaken).encode())
        return h.hexdigest()


def _parse_test_files(text: str) -> tuple[str, ...]:
    paths = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        line = line.removeprefix("./")
        paths.append(line)
    return tuple(dict.fromkeys(paths))  # de-duplicated, order kept


def load_artifact(directory: str | Path) -> BugArtifact:
    """Read the five files from `directory` and format-check them.

    Raises `ArtifactError` naming the missing or malformed file; `FileNotFoundError` when the directory
    itself does not exist (a usage error, not a bad artifact).
    """
    root = Path(directory)
    if not root.is_dir():
        raise FileNotFoundError(f"artifact directory {str(root)!r} does not exist or is not a directory")
    texts: dict[str, str] = {}
    missing = [name for name in ARTIFACT_FILES if not (root / name).is_file()]
    if missing:
        raise ArtifactError(f"artifact {root} is missing {', '.join(missing)} "
                            f"(an artifact needs all of: {', '.join(ARTIFACT_FILES)})")
    # An artifact may come from anywhere (a model's output, an import): a link would have the host read,
    # and send into a sandbox, a file outside the artifact.
    linked = [name for name in ARTIFACT_FILES if (root / name).is_symlink()]
    if linked:
        raise ArtifactError(f"{', '.join(linked)} in {root} {'is a symbolic link' if len(linked) == 1 else 'are symbolic links'}; "
                            "artifact files must be regular files: copy the file in")
    for name in ARTIFACT_FILES:
        size = (root / name).stat().st_size
        if size > MAX_FILE_BYTES:  # checked before reading: a 50 MB diff is refused, not parsed and run
            raise ArtifactError(_too_large(name, size))
        raw = (root / name).read_bytes()
        try:
            texts[name] = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ArtifactError(f"{name} in {root} is not valid UTF-8 (byte {exc.start}: {exc.reason}); "
                                "write it as UTF-8 text") from None
    artifact = BugArtifact.from_files(texts)
    check_format(artifact)
    return artifact


def save_artifact(artifact: BugArtifact, directory: str | Path) -> Path:
    """Write the five files into `directory` (created if needed); returns the directory."""
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    for name, text in artifact.files().items():
        (root / name).write_text(text, encoding="utf-8")
    (root / "test_script.sh").chmod(0o755)
    return root


def _too_large(name: str, size: int) -> str:
    return (f"{name} is {size / (1 << 20):.1f} MiB, over the {MAX_FILE_BYTES >> 20} MiB an artifact file may "
            "be; a bug and its oracle tests fit in far less (shrink the diff to the code the bug needs)")


def check_format(artifact: BugArtifact) -> None:
    """Raise `ArtifactError` naming the first malformed file; return None when the format is fine."""
    for name, text in artifact.files().items():
        if len(text) > MAX_FILE_BYTES:  # characters, a lower bound on the bytes
            raise ArtifactError(_too_large(name, len(text)))
    if not artifact.test_script.strip():
        raise ArtifactError("test_script.sh is empty; it must run the chosen tests from the repo root")
    if not artifact.test_parser.strip():
        raise ArtifactError("test_parser.py is empty; it must turn test output on stdin into JSON on stdout")
    try:
        compile(artifact.test_parser, "test_parser.py", "exec")
    except SyntaxError as exc:
        raise ArtifactError(f"test_parser.py is not valid Python (line {exc.lineno}: {exc.msg})") from None
    if not artifact.test_files:
        raise ArtifactError("test_files.txt lists no test file; list the oracle test files, one per line")
    for path in artifact.test_files:
        if path.startswith("/") or ".." in Path(path).parts:
            raise ArtifactError(f"test_files.txt: {path!r} must be relative to the repo root, without '..'")
    for name, text in (("bug_inject.diff", artifact.bug_inject), ("test_weaken.diff", artifact.test_weaken)):
        if not text.strip():
            raise ArtifactError(f"{name} is empty; it must be a git diff")
        try:
            patch = parse_diff(text, name=name)
        except DiffError as exc:
            raise ArtifactError(str(exc)) from None
        if len(patch) == 0:
            raise ArtifactError(f"{name} contains no file diff (expected `diff --git a/... b/...` sections)")
