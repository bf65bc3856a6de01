"""`--arm compare` (`selfplay.experiment.compare`): two checkpoints' held-out rows paired by (task, sample)
and by task, and the script's refusals of bad input before any episode plays."""

from __future__ import annotations

import json

import pytest

from selfplay.experiment.compare import by_repo, compare_rows, compare_table


def row(task: str, mode: str, sample: int, solved: bool, failure: str | None = None) -> dict:
    return {"task": task, "repo": task.split("-")[0], "mode": mode, "sample": sample,
            "reward": 1.0 if solved else -1.0, "failure": failure or ("solved" if solved else "wrong_path")}


def test_sampled_pairs_by_task_and_sample_and_greedy_by_task():
    before = [row("a-1", "greedy", 0, False), row("b-1", "greedy", 0, True),
              row("a-1", "sample", 0, False), row("a-1", "sample", 1, True), row("b-1", "sample", 0, False),
              row("b-1", "sample", 1, False, "infra")]
    after = [row("a-1", "greedy", 0, True), row("b-1", "greedy", 0, True),
             row("a-1", "sample", 0, True), row("a-1", "sample", 1, True), row("b-1", "sample", 0, True),
             row("b-1", "sample", 1, True)]
    out = compare_rows(after, before)
    s, g = out["sampled"], out["greedy"]
    # (b-1, 1) is dropped: the before side lost it to infrastructure
    assert (s["pairs"], s["after_solved"], s["before_solved"], s["only_after"], s["only_before"]) == (3, 3, 1, 2, 0)
    assert s["p_greater"] == pytest.approx(0.25)  # 2 discordant pairs, both one way: 0.5 ** 2
    assert (g["pairs"], g["only_after"], g["only_before"]) == (2, 1, 0)
    assert by_repo(before) == {"a": {"solved": 1, "n": 3}, "b": {"solved": 1, "n": 2}}
    summaries = {"before": {"greedy": {"solved": 1, "n": 2}, "sample": {"solved": 1, "n": 3, "ci95": (0.06, 0.79)},
                            "failures": {"solved": 2, "wrong_path": 3}}}
    table = compare_table(summaries, out)
    assert "| before | 1/2 |" in table and "wrong_path 3" in table and "solved 2" not in table
    assert "only after 2, only before 0" in table


def test_compare_refuses_bad_input_before_playing(refused, tmp_path):
    out = str(tmp_path / "c.json")
    assert "needs --out" in refused("--arm", "compare", "--before", str(tmp_path))
    assert "--before DIR is needed" in refused("--arm", "compare", "--out", out, "--after", str(tmp_path))
    gone = str(tmp_path / "gone")
    assert f"--after {gone}: no such checkpoint directory" in refused("--arm", "compare", "--out", out, "--phase",
                                                                     "after", "--after", gone)
    assert f"--before {tmp_path}: {tmp_path} has no config.json" in refused(
        "--arm", "compare", "--out", out, "--before", str(tmp_path), "--phase", "before")
    ckpt = tmp_path / "ckpt"  # a folder transformers would take for a checkpoint: the checks past it run
    ckpt.mkdir()
    (ckpt / "config.json").write_text(json.dumps({"model_type": "llama"}))
    assert "--samples must be >= 0" in refused("--arm", "compare", "--out", out, "--before", str(ckpt),
                                            "--phase", "before", "--samples", "-1")
    assert "held-out repos 'nosuch' are not in the bundled repos/default.toml" in refused("--arm", "compare", "--out", out, "--before", str(ckpt),
                                                              "--phase", "before", "--repos", "parse,nosuch")
    assert "workers must be >= 1, got 0" in refused("--arm", "compare", "--out", out, "--before", str(ckpt),
                                                    "--phase", "before", "--workers", "0")
    assert not (tmp_path / "c.json").exists()
    # a phase played with other draws cannot be paired with the saved one
    (tmp_path / "c.json").write_text(json.dumps({"settings": {"sample_seed": 3, "temperature": 0.5, "workers": 1}}))
    msg = refused("--arm", "compare", "--out", out, "--after", str(ckpt), "--phase", "after", "--eval-seed", "4",
               "--temperature", "0.5")
    assert "played with other sample_seed (sample_seed=3)" in msg and "another --out" in msg
    # a file saved before a setting existed was played with its default: it cannot pair with another value
    (tmp_path / "c.json").write_text(json.dumps({"settings": {"sample_seed": 4, "temperature": 0.5, "workers": 1}}))
    msg = refused("--arm", "compare", "--out", out, "--after", str(ckpt), "--phase", "after", "--eval-seed", "4",
                  "--temperature", "0.5", "--submit-on-limit")
    assert "played with other submit_on_limit (submit_on_limit=False)" in msg
    msg = refused("--arm", "compare", "--out", out, "--after", str(ckpt), "--phase", "after", "--eval-seed", "4",
                  "--temperature", "0.5", "--max-repeats", "2")
    assert "played with other max_repeats (max_repeats=None)" in msg
    assert "--max-repeats must be 1 or more, got 0" in refused("--arm", "compare", "--out", out, "--after",
                                                               str(ckpt), "--max-repeats", "0")
