"""The offline dataset end to end through `selfplay eval swebench` with the scripted policy: one instance
resolved, one not, graded by swebench's own functions on logs from our sandboxes; the report's numbers;
resume; and the same predictions graded by the official `swebench.harness.run_evaluation`."""

from __future__ import annotations

import json

import pytest
from swebench_fixtures import FIXTURES, FREQUENCIES, KEYFILTER

from selfplay.code_revision import code_revision

pytestmark = [pytest.mark.docker, pytest.mark.slow]
pytest.importorskip("swebench")


def _eval(dataset, out, *extra):
    from typer.testing import CliRunner

    from selfplay.cli import app

    res = CliRunner().invoke(app, ["eval", "swebench", "--policy", "scripted", "--script",
                                   str(FIXTURES / "scripts.json"), "--dataset", str(dataset), "--out", str(out),
                                   "--max-turns", "6", *extra])
    assert res.exit_code == 0, res.output + repr(res.exception)
    return res


def test_scripted_policy_resolves_one_of_two_and_resumes(offline_dataset, tmp_path):
    out = tmp_path / "eval"
    res = _eval(offline_dataset, out)
    report = json.loads((out / "report.json").read_text())
    assert report["instances"] == 2 and report["runs"] == 1
    assert report["resolved_pct_per_run"] == [50.0] and report["resolved_pct_mean"] == 50.0
    assert report["resolved_pct_stderr"] == 0.0 and report["pass_at_k"] == 50.0
    rows = {r["instance_id"]: r for r in report["per_instance"]}
    assert rows[KEYFILTER]["resolved"] == [True] and rows[FREQUENCIES]["resolved"] == [False]
    assert rows[FREQUENCIES]["patch_applied"] == [True]  # applied, ran, and the F2P test still failed
    assert "mean 50.0%" in res.output and "pass@1 50.0%" in res.output
    # progress: a line per finished instance and phase (no terminal here, so no bar)
    text = " ".join(res.output.split())
    assert f"run 0, solving 1/2: {FREQUENCIES}: submitted after " in text or \
        f"run 0, solving 1/2: {KEYFILTER}: submitted after " in text, text
    assert "run 0, solving 2/2: " in text and "run 0, grading 2/2: " in text
    assert f"{KEYFILTER}: resolved" in text and f"{FREQUENCIES}: not resolved" in text

    # graded by swebench's functions: the harness report layout, with the markers in the log
    verdict = json.loads((out / "run-0" / "logs" / FREQUENCIES / "report.json").read_text())[FREQUENCIES]
    assert verdict["tests_status"]["FAIL_TO_PASS"]["failure"] == ["toolz/tests/test_itertoolz.py::test_frequencies"]
    log = (out / "run-0" / "logs" / KEYFILTER / "test_output.txt").read_text()
    for marker in (">>>>> Applied Patch", ">>>>> Start Test Output", ">>>>> End Test Output",
                   ">>>>> Test Exit Code: 0"):
        assert marker in log

    # predictions are the harness format; the resolving one is the keyfilter fix
    preds = {p["instance_id"]: p for p in map(json.loads, (out / "run-0" / "predictions.jsonl").read_text().splitlines())}
    assert set(preds[KEYFILTER]) == {"instance_id", "model_name_or_path", "model_patch"}
    assert "+        if predicate(k):" in preds[KEYFILTER]["model_patch"]

    # resume: nothing is solved or graded again, the report is the same
    episodes = (out / "run-0" / "episodes.jsonl").read_text()
    stamp = (out / "run-0" / "logs" / KEYFILTER / "report.json").stat().st_mtime_ns
    again = " ".join(_eval(offline_dataset, out).output.split())
    assert "solving" not in again and f"{KEYFILTER}: resolved" in again  # graded from the stored reports
    assert (out / "run-0" / "episodes.jsonl").read_text() == episodes
    assert (out / "run-0" / "logs" / KEYFILTER / "report.json").stat().st_mtime_ns == stamp
    report = json.loads((out / "report.json").read_text())
    assert report["resolved_pct_per_run"] == [50.0] and report["code"] == code_revision() != ""


def test_official_harness_grades_the_exported_tasks_unchanged(offline_dataset, tmp_path):
    """`--grader harness` runs swebench.harness.run_evaluation on the same dataset and predictions; it
    finds our task images locally (no pull) and agrees with the local grader."""
    out = tmp_path / "eval"
    # two workers: episodes in parallel threads, and the harness's own worker pool
    res = _eval(offline_dataset, out, "--grader", "harness", "--workers", "2", "--instances",
                f"{KEYFILTER},{FREQUENCIES}")
    text = " ".join(res.output.split())
    assert f"{KEYFILTER}: resolved" in text and f"{FREQUENCIES}: not resolved" in text
    report = json.loads((out / "report.json").read_text())
    assert report["grader"] == "harness" and report["resolved_pct_per_run"] == [50.0]
    assert report["infra_failures"] == []
    harness_report = next((out / "run-0" / "logs" / "run_evaluation").rglob(f"{KEYFILTER}/report.json"))
    assert json.loads(harness_report.read_text())[KEYFILTER]["resolved"] is True
