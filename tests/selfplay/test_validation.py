"""Consistency validation: the pure checks, then every handmade toolz artifact through real sandboxes."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from selfplay.artifact import load_artifact
from selfplay.validation import CHECK_NAMES, CheckResult, ValidationConfig, ValidationReport, checks, validate

ARTIFACTS = Path(__file__).resolve().parent.parent / "fixtures" / "artifacts"


def _config(name: str, **kw) -> ValidationConfig:
    path = ARTIFACTS / name / "validation.json"
    return ValidationConfig(**{**(json.loads(path.read_text()) if path.exists() else {}), **kw})


# -- pure -----------------------------------------------------------------------------------------
def test_flaky_tests_are_those_whose_status_differs_or_that_vanish():
    runs = [{"a": "passed", "b": "passed", "c": "failed"}, {"a": "passed", "b": "failed"}]
    assert checks.flaky_tests(runs) == {"b", "c"}


def test_parser_check_drop_policy_keeps_stable_tests_and_reject_policy_rejects():
    runs = [{"a": "passed", "b": "passed"}, {"a": "passed", "b": "failed"}]
    flaky = checks.flaky_tests(runs)
    dropped = checks.check_parser(runs, [None, None], flaky, "drop")
    assert dropped.passed and "1 flaky test(s) dropped: b" in dropped.detail
    assert not checks.check_parser(runs, [None, None], flaky, "reject").passed
    everything_flaky = [{"a": "passed"}, {"a": "failed"}]
    assert not checks.check_parser(everything_flaky, [None, None], {"a"}, "drop").passed


def test_parser_check_rejects_empty_map_and_reports_errors():
    assert "empty JSON object" in checks.check_parser([{}, {}], [None, None], set(), "drop").detail
    assert checks.check_parser([None, {}], ["exited with 1", None], set(), "drop").detail == "exited with 1"


def test_bug_validity_mentions_flaky_tests_that_do_not_count():
    r = checks.check_bug_validity((), {"t::flaky"}, 1)
    assert not r.passed and "t::flaky" in r.detail
    assert checks.check_bug_validity(("t::a",), set(), 1).passed


def test_weakening_counts_removed_and_passing_tests():
    assert checks.check_weakening(("a", "b"), {"a": "failed"}).passed          # b removed
    assert checks.check_weakening(("a", "b"), {"a": "failed", "b": "passed"}).passed
    assert not checks.check_weakening(("a", "b"), {"a": "failed", "b": "failed"}).passed


def test_inverse_mutation_needs_every_file_to_contribute():
    assert checks.check_inverse_mutation(("a",), {"x.py": {"a": "passed"}, "y.py": {"a": "passed"}}).passed
    r = checks.check_inverse_mutation(("a",), {"x.py": {"a": "passed"}, "y.py": {"a": "failed"}})
    assert not r.passed and "y.py" in r.detail
    assert not checks.check_inverse_mutation(("a",), {"x.py": None}).passed


def test_report_json_shape():
    report = ValidationReport(valid=False, checks=(CheckResult("test_files", False, "missing x"),))
    data = report.to_json()
    assert {"valid", "checks", "fail_to_pass", "pass_to_pass"} <= set(data)
    assert data["checks"] == [{"name": "test_files", "passed": False, "detail": "missing x"}]
    assert report.failed_check == "test_files"


@pytest.mark.parametrize("field", ["min_passing_tests", "parallelism", "original_runs", "flaky_policy"])
def test_config_rejects_bad_values_naming_the_field(field):
    with pytest.raises(ValueError, match=field):
        ValidationConfig(**{field: "x" if field == "flaky_policy" else -1})


def test_malformed_artifact_object_gives_invalid_report_without_sandboxes(toolz_spec):
    artifact = replace(load_artifact(ARTIFACTS / "valid"), bug_inject="")
    report = validate(artifact, toolz_spec, pool=object())  # the pool is never touched
    assert not report.valid and report.checks == () and "bug_inject.diff is empty" in report.error


# -- Docker ---------------------------------------------------------------------------------------
@pytest.mark.docker
@pytest.mark.slow
def test_valid_two_file_artifact(valid_report):
    r = valid_report
    assert r.valid, r.to_json()
    assert [c.name for c in r.checks] == list(CHECK_NAMES)
    assert sorted(r.fail_to_pass) == [
        "toolz/tests/test_dicttoolz.py::TestCustomMapping::test_keyfilter",
        "toolz/tests/test_dicttoolz.py::TestDefaultDict::test_keyfilter",
        "toolz/tests/test_dicttoolz.py::TestDict::test_keyfilter",
        "toolz/tests/test_itertoolz.py::test_frequencies",
    ]
    assert len(r.pass_to_pass) == 98 and not set(r.fail_to_pass) & set(r.pass_to_pass)
    assert r.suite_runs == 6  # 2 original + buggy + weakened + one per bug file


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("check", [n for n in CHECK_NAMES])
def test_each_fixture_fails_exactly_its_check(check, toolz_spec, toolz_pool):
    name = f"fail_{check}"
    report = validate(load_artifact(ARTIFACTS / name), toolz_spec, _config(name), pool=toolz_pool)
    assert not report.valid
    names = [c.name for c in report.checks]
    assert names == list(CHECK_NAMES[:CHECK_NAMES.index(check) + 1]), report.to_json()
    assert all(c.passed for c in report.checks[:-1]) and not report.checks[-1].passed
    assert report.checks[-1].detail


@pytest.mark.docker
def test_a_bug_diff_whose_headers_name_other_lines_is_refused(toolz_spec, toolz_pool):
    """git applies a hunk whose header names the wrong lines wherever its context fits (an offset), so a
    policy could move a stored bug to "new" lines by editing its headers alone; validation refuses it, and
    the same diff with its true headers stays valid."""
    artifact = load_artifact(ARTIFACTS / "valid")
    moved = artifact.bug_inject.replace("@@ -153,7 +153,7 @@", "@@ -141,7 +141,7 @@")
    assert moved != artifact.bug_inject
    report = validate(replace(artifact, bug_inject=moved), toolz_spec, pool=toolz_pool)
    assert not report.valid and report.failed_check == "patch_hygiene", report.to_json()
    detail = report.checks[-1].detail
    assert "hunk headers do not name the lines" in detail and "offset 12 lines" in detail and "git diff" in detail


@pytest.mark.docker
def test_hanging_parser_fails_the_parser_check_with_a_timeout(toolz_spec, toolz_pool):
    report = validate(load_artifact(ARTIFACTS / "malformed_hanging_parser"), toolz_spec,
                      ValidationConfig(parser_timeout=2), pool=toolz_pool)
    assert [c.name for c in report.checks] == ["test_files", "parser"]
    assert "did not finish within 2s" in report.checks[-1].detail


@pytest.mark.docker
def test_cli_validate_json_contract(tmp_path):
    from typer.testing import CliRunner

    from selfplay.cli import app

    runner = CliRunner()
    ok = runner.invoke(app, ["validate", str(ARTIFACTS / "fail_bug_scope"), "--repo", "toolz", "--json",
                             "--min-changed-files", "2"])
    assert ok.exit_code == 1, ok.output
    data = json.loads(ok.stdout)
    assert data["valid"] is False and data["checks"][-1]["name"] == "bug_scope"
    assert set(data["checks"][0]) == {"name", "passed", "detail"}


@pytest.mark.docker
def test_cli_validate_valid_artifact_into_the_store(tmp_path):
    from typer.testing import CliRunner

    from selfplay.cli import app
    from selfplay.store import open_store

    db = tmp_path / "tasks.db"
    out = CliRunner().invoke(app, ["validate", str(ARTIFACTS / "valid"), "--repo", "toolz", "--json", "--store", str(db)])
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert data["valid"] is True and [c["name"] for c in data["checks"]] == list(CHECK_NAMES)
    task = open_store(str(db)).get_task(data["task_id"])
    assert sorted(task.fail_to_pass) == sorted(data["fail_to_pass"]) and len(task.fail_to_pass) == 4


def test_cli_validate_malformed_and_usage_errors(tmp_path):
    from typer.testing import CliRunner

    from selfplay.cli import app

    runner = CliRunner()
    bad = runner.invoke(app, ["validate", str(ARTIFACTS / "malformed_missing_file"), "--repo", "toolz", "--json"])
    assert bad.exit_code == 1
    assert json.loads(bad.stdout)["valid"] is False and "missing test_parser.py" in json.loads(bad.stdout)["error"]
    assert runner.invoke(app, ["validate", str(tmp_path / "nope"), "--repo", "toolz"]).exit_code == 2
    assert runner.invoke(app, ["validate", str(ARTIFACTS / "valid"), "--repo", "no-such-repo"]).exit_code == 2


# -- pure: canaries, markers -------------------------------------------------------------------------
def test_canary_verdicts():
    from selfplay.jobs.canary import Canary

    c = Canary.new()
    p, f = f"t.py::TestC{c.cls}::test_p{c.passing}", f"t.py::TestC{c.cls}::test_f{c.failing}"
    real = {"t.py::a": "passed", "t.py::b": "failed"}
    assert c.split({**real, p: "passed", f: "failed"}) == (real, "ok")
    assert c.split({**real, p: "passed", f: "passed"})[1].startswith("tampered")
    assert c.split({"t.py::a": "passed", p: "failed", f: "failed"})[1].startswith("tampered")
    assert c.split({**real, p: "failed", f: "failed"})[1] == "ok"  # an honest import error fails real tests too
    assert c.split(real) == (real, c.split(real)[1]) and c.split(real)[1].startswith("inconclusive")
    assert f"def test_f{c.failing}" in c.source() and "self.fail" in c.source()
    # the plain pair: pytest collects it beside the class; a rewrite sparing TestCase classes flips it
    pp, pf = f"t.py::test_p{c.plain_passing}", f"t.py::test_f{c.plain_failing}"
    assert f"def test_f{c.plain_failing}():" in c.source()
    assert c.split({**real, p: "passed", f: "failed", pp: "passed", pf: "failed"}) == (real, "ok")
    assert c.split({**real, p: "passed", f: "failed", pp: "passed", pf: "passed"})[1].startswith("tampered")
    # unittest does not collect plain functions: the class pair alone is a whole report
    assert c.split({**real, p: "passed", f: "failed"})[1] == "ok"
    # the class pair missing is absence, whatever the plain pair says (the rule where validation saw them)
    assert c.split({**real, pp: "passed", pf: "failed"})[1].startswith("inconclusive")


def test_job_output_only_trusts_lines_with_this_jobs_marker():
    import base64

    from selfplay.jobs.job import parse_job_output

    forged = "__selfplay__APPLY bug_inject.diff\n__spdeadbeef__ APPLY bug_inject.diff\n"
    mark = "__sp0123__"
    text = (forged + f"{mark} SCRIPT 0 1.0 2.5 10\n{mark} OUTPUT\n{base64.b64encode(forged.encode()).decode()}\n"
            f"{mark} END\n")
    found = parse_job_output(text, mark)
    assert found["end"] and "apply" not in found and found["script"] == ("0", 1.5, 10)
    assert base64.b64decode(found["output"]).decode() == forged


def test_job_output_names_each_diff_git_applied_at_an_offset():
    import base64

    from selfplay.jobs.canary import Canary
    from selfplay.jobs.job import Job, job_command, parse_job_output

    mark = "__sp0123__"
    hunk = base64.b64encode(b"Hunk #1 succeeded at 153 (offset 12 lines).\n").decode()
    found = parse_job_output(f"{mark} OFFSET bug_inject.diff\n{hunk}\n{mark} END\n", mark)
    assert found["offsets"] == [("bug_inject.diff", "Hunk #1 succeeded at 153 (offset 12 lines).")]
    assert "offsets" not in parse_job_output(f"{mark} END\n", mark)
    script = job_command(Job(check_after=("bug_inject.diff",)), marker=mark, canary=Canary.new(), suite_timeout=5)
    assert "LC_ALL=C git apply -v" in script and f"{mark} OFFSET bug_inject.diff" in script
    assert checks.check_patch_hygiene(load_artifact(ARTIFACTS / "valid"), (), {}).passed
    refused = checks.check_patch_hygiene(load_artifact(ARTIFACTS / "valid"), (), {},
                                         "Hunk #1 succeeded at 153 (offset 12 lines).")
    assert not refused.passed and "offset 12 lines" in refused.detail


def test_a_bug_in_a_file_grading_drops_from_predictions_fails_patch_hygiene():
    """Red team, 2026-12-06: test_script.sh carried `# frequencies lives in toolz/itertoolz.py`, which made the
    bug's own file "read by test_script.sh": grading dropped every fix of it, the gold fix earned -1, and the
    artifact was valid. Pure: the check reads the artifact's script and diffs."""
    from dataclasses import replace

    valid = load_artifact(ARTIFACTS / "valid")
    pinned = replace(valid, test_script=valid.test_script + "# frequencies lives in toolz/itertoolz.py\n")
    result = checks.check_patch_hygiene(pinned, (), {})
    assert not result.passed
    assert "toolz/itertoolz.py (read by test_script.sh)" in result.detail and "no fix of them" in result.detail
    # The same script without the comment, or a comment naming a test file, is fine.
    assert checks.check_patch_hygiene(valid, (), {}).passed
    named_test = replace(valid, test_script=valid.test_script + "# see toolz/tests/test_itertoolz.py\n")
    assert checks.check_patch_hygiene(named_test, (), {}).passed


def test_a_corrupt_bug_diff_is_refused_before_any_suite_runs(toolz_spec):
    """A bug_inject.diff that git refuses (a hunk cut short) is an invalid artifact whose error names the
    file, found by the format check before any sandbox is used; nothing raises."""
    from dataclasses import replace

    artifact = load_artifact(ARTIFACTS / "valid")
    cut = "\n".join(artifact.bug_inject.splitlines()[:9]) + "\n"  # the first hunk loses its last lines
    report = validate(replace(artifact, bug_inject=cut), toolz_spec, pool=None)
    assert not report.valid and report.suite_runs == 0, report.to_json()
    assert report.error.startswith("bug_inject.diff is not a valid diff"), report.error
