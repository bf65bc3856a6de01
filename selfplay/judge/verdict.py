"""Pure grading: parser output -> status map -> verdict (`GradeResult`). No Docker here.

Follows SSR's solver reward (+1 iff all tests pass) made exact: "all tests" is FAIL_TO_PASS ∪
PASS_TO_PASS from validation, and a test id missing from the run counts as failed. Departure from the
paper: the grader also reports the prediction hunks it dropped as test infrastructure (see
`selfplay.diffs.drop_infrastructure`); the paper only restores the files in test_files.txt.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from selfplay.judge.rewards import solver_reward

STATUSES = ("passed", "failed")


@dataclass(frozen=True)
class GradeResult:
    """The verdict on one prediction."""

    reward: int
    """`selfplay.judge.rewards.solver_reward(resolved)`: +1 when resolved, else -1."""
    resolved: bool
    """Every FAIL_TO_PASS and PASS_TO_PASS test was reported passed."""
    tests: dict[str, str] = field(default_factory=dict)
    """Status of every graded test id ("passed"/"failed"; missing ones are "failed")."""
    dropped_hunks: tuple[str, ...] = ()
    """Prediction file sections dropped as test infrastructure, `path (N hunks): reason`."""
    error: str | None = None
    """Why the prediction could not be graded normally (did not apply, parser failed, ...)."""
    tamper: str | None = None
    """Set when runner tampering was detected (the screen of the prediction, or the canary tests)."""
    integrity: str | None = None
    """The run's canary verdict: "ok", "inconclusive: ..." (the script or parser skipped the canaries)
    or "tampered: ..."; None when no run was parsed."""
    verification: str | None = None
    """The verification run's verdict (`selfplay.jobs.verification`): "agree", or "disagree: ..." naming
    the tests whose status differs under the perturbed environment; "skipped: the main run failed" when
    the main run's -1 made it moot (it did not run); None when grading ended before a run, or with the
    verification off."""

    def to_json(self) -> dict[str, Any]:
        """The `selfplay grade --json` object."""
        return {"reward": self.reward, "resolved": self.resolved, "tests": dict(self.tests),
                "dropped_hunks": list(self.dropped_hunks), "error": self.error, "tamper": self.tamper,
                "integrity": self.integrity, "verification": self.verification}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GradeResult:
        """The inverse of `to_json` (a trajectory file's `grade` metadata)."""
        return cls(reward=int(data["reward"]), resolved=bool(data["resolved"]), tests=dict(data.get("tests") or {}),
                   dropped_hunks=tuple(data.get("dropped_hunks") or ()), error=data.get("error"),
                   tamper=data.get("tamper"), integrity=data.get("integrity"),
                   verification=data.get("verification"))


class ParserOutputError(ValueError):
    """test_parser.py printed something that is not a {test_id: "passed"|"failed"} JSON object."""


def parse_status_map(stdout: str) -> dict[str, str]:
    """Decode the parser's stdout into a status map; raises ParserOutputError saying what is wrong."""
    text = stdout.strip()
    if not text:
        raise ParserOutputError("the parser printed nothing; it must print one JSON object")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        # Tolerate log lines before the JSON: take the last line that parses as an object.
        for line in reversed(text.splitlines()):
            try:
                data = json.loads(line)
                break
            except json.JSONDecodeError:
                continue
        else:
            raise ParserOutputError(f"the parser's output is not JSON ({exc.msg} at char {exc.pos})") from None
    if not isinstance(data, dict):
        raise ParserOutputError(f"the parser printed a JSON {type(data).__name__}, expected an object")
    bad = {k: v for k, v in data.items() if v not in STATUSES}
    if bad:
        key, value = next(iter(bad.items()))
        raise ParserOutputError(f"{len(bad)} value(s) are not 'passed'/'failed', e.g. {key!r}: {value!r}")
    return {str(k): v for k, v in data.items()}


def grade_statuses(statuses: Mapping[str, str], fail_to_pass: tuple[str, ...] | list[str],
                   pass_to_pass: tuple[str, ...] | list[str], *, dropped_hunks: tuple[str, ...] = (),
                   error: str | None = None, integrity: str | None = None) -> GradeResult:
    """+1 iff every test in F2P ∪ P2P is reported passed; a missing id counts as failed."""
    wanted = list(dict.fromkeys([*fail_to_pass, *pass_to_pass]))
    tests = {t: ("passed" if statuses.get(t) == "passed" else "failed") for t in wanted}
    resolved = bool(wanted) and all(s == "passed" for s in tests.values()) and error is None
    return GradeResult(reward=solver_reward(resolved), resolved=resolved, tests=tests,
                       dropped_hunks=tuple(dropped_hunks), error=error, integrity=integrity)


def failed_grade(error: str, *, dropped_hunks: tuple[str, ...] = (), fail_to_pass: tuple[str, ...] = (),
                 pass_to_pass: tuple[str, ...] = (), tamper: str | None = None,
                 integrity: str | None = None, verification: str | None = None) -> GradeResult:
    """-1 with a reason, e.g. when the prediction does not apply or tampering was detected."""
    tests = {t: "failed" for t in dict.fromkeys([*fail_to_pass, *pass_to_pass])}
    return GradeResult(reward=solver_reward(False), resolved=False, tests=tests, dropped_hunks=tuple(dropped_hunks), error=error,
                       tamper=tamper, integrity=integrity, verification=verification)


def disagreement(main: Mapping[str, str], verify: Mapping[str, str], expected: Mapping[str, str]) -> str | None:
    """None when the verification run agrees with the main run on every test of `expected` (test id ->
    the status the verdict needs), else a reason naming the tests the two runs disagree on. A test missing
    from a run counts as failed, as in `grade_statuses`."""
    differ = [t for t, want in expected.items()
              if (main.get(t) == "passed") != (verify.get(t) == "passed") and main.get(t, "failed") == want]
    if not differ:
        return None
    shown = ", ".join(f"{t} ({'passed' if main.get(t) == 'passed' else 'failed'} in the main run)"
                      for t in differ[:3])
    return (f"disagree: {len(differ)} test(s) change status under the verification environment (writable copy, "
            f"the agent uid, another path and HOME, no canaries): {shown}{', ...' if len(differ) > 3 else ''}; "
            "the code behaves differently when it can tell it is being graded")


def split_tests(original: Mapping[str, str], buggy: Mapping[str, str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(FAIL_TO_PASS, PASS_TO_PASS): tests passing on the original that fail (or vanish) / still pass."""
    passing = [t for t, s in original.items() if s == "passed"]
    f2p = tuple(t for t in passing if buggy.get(t) != "passed")
    p2p = tuple(t for t in passing if buggy.get(t) == "passed")
    return f2p, p2p
