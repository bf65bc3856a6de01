"""`ValidationConfig`: thresholds, timeouts, parallelism and the flaky-test policy of validation."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from selfplay.config.bounds import check_bounds
from selfplay.jobs.suite_limits import SuiteLimits
from selfplay.judge.tamper import BUG_PATTERNS, TamperConfig

FlakyPolicy = Literal["drop", "reject"]


@dataclass(frozen=True)
class ValidationConfig(SuiteLimits):
    """How strict and how fast consistency validation is (the suite limits and tamper screen: `SuiteLimits`)."""

    min_passing_tests: int = 5
    """test_script: the original code must pass at least this many tests (and fail none)."""
    min_changed_files: int = 1
    """bug_scope: bug_inject.diff must change at least this many files."""
    min_failing_tests: int = 1
    """bug_validity: at least this many tests passing on the original must fail with the bug."""
    parallelism: int = 2
    """Sandboxes used at once; independent suite runs (the two original runs, the buggy and weakened
    runs, the inverse-mutation runs) go in parallel up to this many."""
    flaky_policy: FlakyPolicy = "drop"
    """What to do with tests whose status differs between the two runs of the original: "drop" leaves
    them out of F2P/P2P and rejects only when every bug-failing test is flaky; "reject" rejects the
    artifact at the parser check."""
    original_runs: int = 2
    """Runs of the original suite used to detect flaky tests (1 disables the check)."""
    speculative_verification: bool = True
    """Start a verification run as soon as its main run ends, while the main output is still in the
    parser box, instead of after the parse says its verdict can still count. It takes a parse (about
    0.2 s) off the critical path of each wave of a valid artifact, and costs one suite run of sandbox
    time when the verdict turns out not to count (its output is then never parsed or used)."""

    bug_screen: TamperConfig = field(default_factory=lambda: TamperConfig(patterns=BUG_PATTERNS))
    """patch_hygiene: constructs bug_inject.diff may not add on top of `tamper`'s, because they make a bug
    behave differently from run to run or between the solver's sandbox and grading (the clock, random
    numbers, the process id, the repository's git state); a solve rate on such a bug is luck."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_bounds(self, at_least={"min_passing_tests": 0, "min_changed_files": 0, "min_failing_tests": 0,
                                     "parallelism": 1, "original_runs": 1})
        if self.flaky_policy not in ("drop", "reject"):
            raise ValueError(f"ValidationConfig.flaky_policy must be 'drop' or 'reject', got {self.flaky_policy!r}")
