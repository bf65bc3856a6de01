"""The official harness's invocation (no Docker): argv and the report layout it is read back from."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from selfplay.eval.harness import harness_command, harness_log_dir, read_harness_reports


def test_harness_command_is_run_evaluation_on_our_dataset_and_predictions():
    cmd = harness_command(Path("/d/dataset.jsonl"), Path("/d/run-0/predictions.jsonl"), "eval-ab12-run0",
                          instance_ids=["a__b-1", "c__d-2"], workers=3, timeout=600)
    assert cmd[:3] == [sys.executable, "-m", "swebench.harness.run_evaluation"]
    args = dict(zip(cmd[3::2], cmd[4::2]))
    assert args["--dataset_name"] == "/d/dataset.jsonl" and args["--predictions_path"] == "/d/run-0/predictions.jsonl"
    assert (args["--run_id"], args["--max_workers"], args["--timeout"]) == ("eval-ab12-run0", "3", "600")
    assert cmd[cmd.index("--instance_ids") + 1:] == ["a__b-1", "c__d-2"]


def test_reports_are_read_from_the_harness_layout(tmp_path):
    d = harness_log_dir(tmp_path, "r1", "org/model", "a__b-1")
    assert d == tmp_path / "logs" / "run_evaluation" / "r1" / "org__model" / "a__b-1"  # `/` -> `__`, as the harness
    d.mkdir(parents=True)
    (d / "report.json").write_text(json.dumps({"a__b-1": {"resolved": True}}))
    assert read_harness_reports(tmp_path, "r1", "org/model", ["a__b-1", "c__d-2"]) == {
        "a__b-1": {"resolved": True}, "c__d-2": None}
