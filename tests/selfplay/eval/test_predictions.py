"""The predictions file is the harness's format, read by swebench's own loader; resume tolerates a torn line."""

from __future__ import annotations

import json

import pytest

from selfplay.eval.predictions import KEYS, Prediction, append_prediction, read_predictions


def test_prediction_lines_have_exactly_the_harness_keys_and_swebench_reads_them(tmp_path):
    path = tmp_path / "predictions.jsonl"
    append_prediction(path, Prediction("toolz__selfplay-keyfilter", "org/model", "diff --git a/x b/x\n"))
    append_prediction(path, Prediction("toolz__selfplay-frequencies", "org/model", ""))
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [tuple(sorted(line)) for line in lines] == [tuple(sorted(KEYS))] * 2
    assert all(isinstance(line[k], str) for line in lines for k in KEYS)
    utils = pytest.importorskip("swebench.harness.utils")
    preds = utils.get_predictions_from_file(str(path), "unused", "test")
    assert [p["instance_id"] for p in preds] == ["toolz__selfplay-keyfilter", "toolz__selfplay-frequencies"]


def test_a_torn_last_line_is_ignored_so_resume_solves_it_again(tmp_path):
    path = tmp_path / "predictions.jsonl"
    append_prediction(path, Prediction("a", "m", "p"))
    with path.open("a") as fh:
        fh.write('{"instance_id": "b", "model_na')
    assert set(read_predictions(path)) == {"a"}
