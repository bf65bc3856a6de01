"""`selfplay grade`: where FAIL_TO_PASS/PASS_TO_PASS come from (docs/security.md, class 8), several --patch, exit codes."""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from selfplay.artifact import load_artifact
from selfplay.cli import app
from selfplay.store import open_store

sys.path.insert(0, str(Path(__file__).parents[1] / "store"))
from store_data import make_artifact, make_report

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
VALID = FIXTURES / "artifacts" / "valid"
GOLD = FIXTURES / "predictions" / "correct.diff"
PARTIAL = FIXTURES / "predictions" / "partial.diff"


def _flat(text: str) -> str:
    return " ".join(text.split())  # rich wraps long lines


def test_store_lookup_is_by_the_content_of_all_five_files(tmp_path):
    with open_store(str(tmp_path / "s.db")) as st:
        art = make_artifact(1)
        st.record_validation(art, "toolz", make_report(n=1), origin="injector")
        assert st.validated_tests("toolz", art) == (("tests/test_core.py::test_1",),
                                                    ("tests/test_core.py::test_ok", "tests/test_core.py::test_other"))
        # same diffs (same BugArtifact.digest), another parser: a different artifact, never validated
        other = dataclasses.replace(art, test_parser="print('{}')\n")
        assert other.digest() == art.digest() and st.validated_tests("toolz", other) is None
        assert st.validated_tests("cachetools", art) is None
        bad = make_artifact(2)
        st.record_validation(bad, "toolz", make_report(valid=False), origin="injector")
        assert st.validated_tests("toolz", bad) is None


def test_grade_usage_errors_exit_2(tmp_path):
    runner = CliRunner()
    res = runner.invoke(app, ["grade", str(VALID), "--repo", "toolz", "--patch", str(tmp_path / "nope.diff")])
    assert res.exit_code == 2 and "nope.diff: no such file" in _flat(res.output)
    broken = tmp_path / "broken"
    shutil.copytree(VALID, broken)
    (broken / "test_parser.py").unlink()
    res = runner.invoke(app, ["grade", str(broken), "--repo", "toolz", "--patch", str(GOLD)])
    assert res.exit_code == 2 and "missing test_parser.py" in _flat(res.output)


@pytest.mark.docker
@pytest.mark.slow
def test_grade_never_trusts_a_report_json_beside_the_artifact(tmp_path):
    """A model-written report.json that names one always-passing test as the whole oracle would make the empty
    prediction earn +1; grade validates the artifact itself instead."""
    art = tmp_path / "art"
    shutil.copytree(VALID, art)
    (art / "report.json").write_text(json.dumps({
        "valid": True, "fail_to_pass": ["toolz/tests/test_itertoolz.py::test_remove"], "pass_to_pass": []}))
    empty = tmp_path / "empty.diff"
    empty.write_text("")
    res = CliRunner().invoke(app, ["grade", str(art), "--repo", "toolz", "--patch", str(empty), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["reward"] == -1 and out["tests"]["toolz/tests/test_itertoolz.py::test_frequencies"] == "failed"
    assert "from validating the artifact" in _flat(res.stderr)


@pytest.mark.docker
@pytest.mark.slow
def test_grade_takes_the_oracle_from_the_store_for_exactly_this_artifact(tmp_path):
    db = str(tmp_path / "tasks.db")
    runner = CliRunner()
    assert runner.invoke(app, ["validate", str(VALID), "--repo", "toolz", "--store", db]).exit_code == 0
    # several --patch: a JSON list of the single objects, in order, each naming its patch
    res = runner.invoke(app, ["grade", str(VALID), "--repo", "toolz", "--store", db, "--json",
                              "--patch", str(GOLD), "--patch", str(PARTIAL), "--patch", str(GOLD)])
    assert res.exit_code == 0, res.output
    assert "from the store's validation of this artifact" in _flat(res.stderr)
    out = json.loads(res.stdout)
    # a file given twice is graded twice, each verdict in its own place
    assert [(o["patch"], o["reward"]) for o in out] == [(str(GOLD), 1), (str(PARTIAL), -1), (str(GOLD), 1)]
    assert out[0]["tests"] == out[2]["tests"]
    assert {"patch", "reward", "resolved", "tests", "dropped_hunks", "error"} <= set(out[0])
    with open_store(db) as st:
        f2p, p2p = st.validated_tests("toolz", load_artifact(VALID))
    assert set(out[0]["tests"]) == set(f2p) | set(p2p)
    # the same diffs with another parser are another artifact: the store's lists are not used for it
    other = tmp_path / "other"
    shutil.copytree(VALID, other)
    (other / "test_parser.py").write_text((VALID / "test_parser.py").read_text() + "# another parser\n")
    res = runner.invoke(app, ["grade", str(other), "--repo", "toolz", "--store", db, "--patch", str(GOLD)])
    assert res.exit_code == 0 and "validating it" in _flat(res.stderr) and "reward +1" in res.stdout, res.output
