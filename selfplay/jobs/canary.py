"""Canary tests: an integrity check on each suite run that does not trust the code under test.

Every job (validation and grading alike, so an artifact cannot tell them apart) appends tests with
fresh random names to each Python oracle test file after the patches and restores: one that must pass
and one that must fail, twice: as a `unittest.TestCase` class, which pytest and unittest both collect,
and as plain functions, which pytest collects. A rewrite that spares one kind of test (every failure
made a pass except in TestCase classes, say) still flips the canary of the other kind.
After parsing, their ids are taken out of the status map (no check ever sees them) and compared with
what an honest run reports:
- a must-fail canary reported "passed": the run was tampered with (code under test rewrote the
  reports, the log, or the exit path; or the parser reports everything passed);
- a must-pass canary reported "failed" while no real test failed: tampered too (an honest import
  error in a test file fails that file's real tests with it);
- the TestCase must-fail canary absent: inconclusive (the script does not run whole files, or the parser
  drops unknown ids), which is reported, not punished. The plain pair's absence says nothing (unittest
  does not collect functions).

Detection only: code that reads the test files can tell the canaries from real tests (they are absent
from the git history) and spare them. The tamper screen (`selfplay.judge.tamper`) is the other layer.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Canary:
    """The random names of one job's canary tests."""

    cls: str
    """Class name token (every canary id contains at least one of the three tokens)."""
    passing: str
    """Token in the must-pass test's name."""
    failing: str
    """Token in the must-fail test's name."""
    plain_passing: str = ""
    """Token in the must-pass plain function's name."""
    plain_failing: str = ""
    """Token in the must-fail plain function's name."""

    @classmethod
    def new(cls) -> Canary:
        return cls(*(secrets.token_hex(6) for _ in range(5)))

    def source(self) -> str:
        """The Python text appended to each oracle test file (after a blank line, at module level)."""
        return (f"\n\n\nimport unittest as _unittest_{self.cls}\n\n\n"
                f"class TestC{self.cls}(_unittest_{self.cls}.TestCase):\n"
                f"    def test_p{self.passing}(self):\n        pass\n\n"
                f"    def test_f{self.failing}(self):\n        self.fail('f{self.failing}')\n\n\n"
                f"def test_p{self.plain_passing}():\n    pass\n\n\n"
                f"def test_f{self.plain_failing}():\n    raise AssertionError('f{self.plain_failing}')\n")

    def split(self, statuses: Mapping[str, str]) -> tuple[dict[str, str], str]:
        """(the map without canary ids, the integrity verdict: "ok", "inconclusive: ..." or "tampered: ...").

        The TestCase pair decides absence (every runner that runs whole files reports it); the plain pair,
        which only pytest collects, counts wherever it is reported."""
        real: dict[str, str] = {}
        passing, failing, class_failing = [], [], []
        for test, status in statuses.items():
            if self.passing in test or (self.plain_passing and self.plain_passing in test):
                passing.append(status)
            elif self.failing in test or (self.plain_failing and self.plain_failing in test):
                failing.append(status)
                if self.failing in test:
                    class_failing.append(status)
            elif self.cls not in test:
                real[test] = status
        if "passed" in failing:
            return real, ("tampered: a canary test that must fail was reported passed (the run's reports, "
                          "log or exit path were rewritten, or the parser reports tests it did not see)")
        if "failed" in passing and "failed" not in real.values():
            return real, ("tampered: a canary test that must pass was reported failed while every real test "
                          "passed")
        if not class_failing:
            return real, ("inconclusive: the canary tests appended to the oracle test files were not reported "
                          "(the script does not run whole files, or the parser drops unknown ids)")
        return real, "ok"
