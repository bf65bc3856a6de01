"""`BugArtifact`: SSR's five-file bug artifact (paper section 2.2), held in memory.

Loading, saving and the format check live in this module too; consistency validation (does the bug
really break tests, ...) lives in `selfplay.validation`.
"""

from __future__ import annotations

from dataclasses import dataclass

ARTIFACT_FILES: tuple[str, ...] = (
    "test_script.sh",
    "test_files.txt",
    "test_parser.py",
    "bug_inject.diff",
    "test_weaken.diff",
)


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
