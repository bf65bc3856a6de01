"""`CheckResult` and `ValidationReport`: the outcome of consistency validation, as the CLI prints it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from selfplay.facts import TaskFacts

CHECK_NAMES: tuple[str, ...] = (
    "test_files",
    "parser",
    "test_script",
    "patch_hygiene",
    "bug_scope",
    "bug_validity",
    "weakening",
    "inverse_mutation",
)

UNREADABLE_SPEC = "spec too long for the solver"
"""How `ValidationReport.error` begins for an artifact the rollout refuses before validation
(`RolloutConfig.refuse_unreadable_specs`); the injector's outcome label `spec_too_long`
(`selfplay.experiment.failures.injector_outcome`) reads it."""


def unreadable_spec_error(room: int, min_turn_tokens: int) -> str:
    """The refusal of a bug whose solver prompt leaves `room` tokens of the context for a first turn."""
    fits = (f"is {-room} tokens longer than the solver's context" if room < 0
            else f"leaves {room} tokens of the solver's context for a first turn")
    return (f"{UNREADABLE_SPEC}: the solver's prompt with this spec (the reversed test_weaken.diff) {fits}, and a "
            f"turn needs {min_turn_tokens}: weaken fewer or shorter tests, so that the spec fits")


@dataclass(frozen=True)
class CheckResult:
    """One named check."""

    name: str
    """One of CHECK_NAMES."""
    passed: bool
    detail: str
    """What was found, e.g. "12 tests fail with the bug, 3 pass after weakening"."""


@dataclass(frozen=True)
class ValidationReport:
    """All checks run (they stop at the first failure) and, when valid, the task's test split."""

    valid: bool
    checks: tuple[CheckResult, ...] = ()
    fail_to_pass: tuple[str, ...] = ()
    """Pass on the original, fail (or vanish) with the bug (with oracle tests, before weakening)."""
    pass_to_pass: tuple[str, ...] = ()
    """Pass on the original and with the bug."""
    error: str | None = None
    """Why validation stopped before or outside the checks (malformed artifact), None otherwise."""
    flaky: tuple[str, ...] = ()
    """Tests whose status differed between the two runs of the original; left out of F2P/P2P."""
    duration: float = 0.0
    """Wall-clock seconds the validation took."""
    suite_runs: int = 0
    """How many suite jobs ran (main runs of test_script.sh; verification runs are not counted)."""
    suite_time: float | None = None
    """Wall seconds of the slowest run of test_script.sh (main or verification runs); grading budgets
    derive from it (`selfplay.facts`)."""
    suite_cpu: float | None = None
    """CPU seconds of the most CPU-hungry run (None when not measured)."""
    canaries_reported: bool = False
    """Every run reported its canary tests, so grading requires them."""

    @property
    def facts(self) -> TaskFacts:
        """What grading holds this task's predictions to (budgets, canaries)."""
        return TaskFacts(self.suite_time, self.suite_cpu, self.canaries_reported)

    @property
    def failed_check(self) -> str | None:
        return next((c.name for c in self.checks if not c.passed), None)

    def to_json(self) -> dict[str, Any]:
        """The `selfplay validate --json` object (the four contract keys, plus error and flaky)."""
        return {
            "valid": self.valid,
            "checks": [{"name": c.name, "passed": c.passed, "detail": c.detail} for c in self.checks],
            "fail_to_pass": list(self.fail_to_pass),
            "pass_to_pass": list(self.pass_to_pass),
            "error": self.error,
            "flaky": list(self.flaky),
        }
