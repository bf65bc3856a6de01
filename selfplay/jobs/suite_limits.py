"""`SuiteLimits`: the limits of one suite run and the tamper screen of the diff under test, shared by
validation (`ValidationConfig`) and grading (`GraderConfig`), which inherit them as keys of their own."""

from __future__ import annotations

from dataclasses import dataclass, field

from selfplay.config.bounds import check_bounds
from selfplay.jobs.job import MAX_TEST_OUTPUT
from selfplay.judge.tamper import TamperConfig


@dataclass(frozen=True)
class SuiteLimits:
    """Time and output limits of a suite job, and the runner-tampering screen of the diff it runs."""

    suite_timeout: float = 120.0
    """Seconds one run of test_script.sh may take (SSR asks injectors for < 90 s)."""
    parser_timeout: float = 30.0
    """Seconds test_parser.py may take on one output."""
    max_test_output: int = MAX_TEST_OUTPUT
    """Bytes of test output one run may print; more fails that run (the artifact's fault in validation, -1
    for the prediction in grading)."""
    tamper: TamperConfig = field(default_factory=TamperConfig)
    """The runner-tampering screen: of bug_inject.diff in validation (at the patch_hygiene check), of the
    kept sections of each prediction in grading."""

    def __post_init__(self) -> None:
        # A limit of 0 or less would not limit: `timeout 0` waits forever, and a negative one reaches the
        # artifact's verdict as a failure of its own (an empty parse, an output "flood" of 1 byte).
        check_bounds(self, above={"suite_timeout": 0, "parser_timeout": 0, "max_test_output": 0})
