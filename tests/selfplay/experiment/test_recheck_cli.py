"""`scripts/bench_learning.py --arm recheck` refuses bad input before it plays any episode, each time naming
the flag or directory to fix."""

from __future__ import annotations

import json


def test_recheck_refuses_bad_input_before_playing(refused, tmp_path):
    assert "at least one --recheck" in refused("--arm", "recheck")
    assert "--eval-seed 0 would replay" in refused("--arm", "recheck", "--recheck", str(tmp_path))
    assert "no results.json" in refused("--arm", "recheck", "--recheck", str(tmp_path), "--eval-seed", "5")
    # a finished experiment first, then one whose control never ran: the second is refused before the first plays
    done, cut = tmp_path / "done", tmp_path / "cut"
    config = {"iterations": "2", "eval": str({"max_turns": 4, "max_new_tokens": 32, "temperature": 0.5})}
    for work, entries in ((done, ("rl@2", "control@2")), (cut, ("rl@2",))):
        work.mkdir()
        (work / "results.json").write_text(json.dumps({
            "config": config, "train_tasks": ["t"], "arms": {"rl": {"run_dir": str(work / "arms" / "rl")}},
            "train_evals": {e: {"model": "M"} for e in entries}}))
    msg = refused("--arm", "recheck", "--recheck", str(done), "--recheck", str(cut), "--eval-seed", "5")
    assert str(cut) in msg and "control@2" in msg
    # the finished one alone gets as far as its tasks: its rl arm's store is gone
    msg = refused("--arm", "recheck", "--recheck", str(done), "--eval-seed", "5")
    assert "store" in msg and "is gone" in msg
    assert "no training stratum" not in msg
    assert not (done / "recheck.json").exists()  # nothing played, nothing written
