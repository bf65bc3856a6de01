"""Pure grading: parser output -> status map -> verdict."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from selfplay.judge.grader import SKIPPED
from selfplay.judge.verdict import (
    GradeResult,
    ParserOutputError,
    failed_grade,
    grade_statuses,
    parse_status_map,
    split_tests,
)

F2P = ("t::a", "t::b")
P2P = ("t::c",)


def test_all_passed_is_plus_one():
    r = grade_statuses({"t::a": "passed", "t::b": "passed", "t::c": "passed", "t::extra": "failed"}, F2P, P2P)
    assert (r.reward, r.resolved, r.error) == (1, True, None)
    assert r.tests == {"t::a": "passed", "t::b": "passed", "t::c": "passed"}  # only the oracle set is graded


@pytest.mark.parametrize("statuses", [
    {"t::a": "passed", "t::b": "failed", "t::c": "passed"},  # a F2P test still fails
    {"t::a": "passed", "t::b": "passed", "t::c": "failed"},  # the fix broke a P2P test
    {"t::a": "passed", "t::c": "passed"},                    # t::b missing (deselected/deleted) counts as failed
    {},
])
def test_any_failure_or_missing_test_is_minus_one(statuses):
    r = grade_statuses(statuses, F2P, P2P)
    assert (r.reward, r.resolved) == (-1, False)
    assert "failed" in r.tests.values()


def test_no_tests_to_grade_cannot_resolve():
    assert grade_statuses({"x": "passed"}, (), ()).reward == -1


def test_failed_grade_keeps_reason_and_drops():
    r = failed_grade("does not apply", dropped_hunks=("conftest.py (1 hunk): conftest.py",), fail_to_pass=F2P)
    assert r.to_json() == {"reward": -1, "resolved": False, "tests": {"t::a": "failed", "t::b": "failed"},
                           "dropped_hunks": ["conftest.py (1 hunk): conftest.py"], "error": "does not apply",
                           "tamper": None, "integrity": None, "verification": None}


def test_parse_status_map_accepts_json_after_log_lines():
    assert parse_status_map('collecting...\n{"a": "passed", "b": "failed"}\n') == {"a": "passed", "b": "failed"}


@pytest.mark.parametrize("stdout, message", [
    ("", "printed nothing"),
    ("not json", "not JSON"),
    ('["a"]', "JSON list"),
    ('{"a": "ok"}', "not 'passed'/'failed'"),
])
def test_parse_status_map_rejects_bad_output(stdout, message):
    with pytest.raises(ParserOutputError, match=message):
        parse_status_map(stdout)


def test_split_tests():
    original = {"a": "passed", "b": "passed", "c": "passed", "d": "failed"}
    buggy = {"a": "failed", "c": "passed", "d": "failed"}
    assert split_tests(original, buggy) == (("a", "b"), ("c",))


def test_json_carries_tamper_and_integrity():
    r = failed_grade("runner tampering: x", tamper="x", integrity="tampered: y")
    data = r.to_json()
    assert (data["reward"], data["tamper"], data["integrity"]) == (-1, "x", "tampered: y")
    assert grade_statuses({"t::a": "passed"}, ("t::a",), (), integrity="ok").to_json()["integrity"] == "ok"


def test_json_round_trips_every_field():
    """A resumed iteration reads its earlier attempts' grades back from the trajectory file."""
    graded = replace(grade_statuses({"t::a": "passed", "t::b": "failed"}, ("t::a",), ("t::b",), integrity="ok"),
                     dropped_hunks=("tests/x.py (1 hunks): test file",), verification=SKIPPED)
    refused = failed_grade("runner tampering: x", tamper="x", integrity="tampered: y")
    for r in (graded, refused):
        assert GradeResult.from_json(json.loads(json.dumps(r.to_json()))) == r
