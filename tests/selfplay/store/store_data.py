"""Synthetic artifacts and reports shared by the store tests and their worker scripts."""

from __future__ import annotations

from selfplay.artifact import BugArtifact


def make_artifact(n: int, *, file: str = "pkg/core.py") -> BugArtifact:
    """A distinct, well-formed artifact for each n (the bug changes line n of `file`)."""
    bug = (
        f"diff --git a/{file} b/{file}\n--- a/{file}\n+++ b/{file}\n@@ -{n},1 +{n},1 @@\n"
        f"-    return x + {n}\n+    return x - {n}\n"
    )
    weaken = (
        "diff --git a/tests/test_core.py b/tests/test_core.py\n--- a/tests/test_core.py\n"
        f"+++ b/tests/test_core.py\n@@ -{n},1 +{n},1 @@\n-    assert f({n}) == {2 * n}\n+    pass\n"
    )
    return BugArtifact(
        test_script="python -m pytest -rA tests/test_core.py\n",
        test_files=("tests/test_core.py",),
        test_parser="import sys, json\nprint(json.dumps({}))\n",
        bug_inject=bug,
        test_weaken=weaken,
    )


def make_report(valid: bool = True, n: int = 0):
    """A `selfplay.validation.ValidationReport` (the real type)."""
    from selfplay.validation.report import CheckResult, ValidationReport

    checks = (
        CheckResult("test_files", True, "1 file"),
        CheckResult("bug_validity", valid, f"{n} tests fail"),
    )
    if not valid:
        return ValidationReport(valid=False, checks=checks)
    return ValidationReport(
        valid=True,
        checks=checks,
        fail_to_pass=(f"tests/test_core.py::test_{n}",),
        pass_to_pass=("tests/test_core.py::test_ok", "tests/test_core.py::test_other"),
    )
