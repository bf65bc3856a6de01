"""`selfplay.experiment.splits`: one checkpoint's splits pooled with each (task, mode, sample) counted once,
and the refusals of files that are not one checkpoint's same draws; `scripts/pool_heldout.py` on files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from selfplay.experiment.splits import pool_pairs, pool_splits, pool_table

ROOT = Path(__file__).resolve().parents[3]
SETTINGS = {"samples": 2, "temperature": 0.5, "sample_seed": 301, "workers": 12}


def row(task: str, mode: str, sample: int, solved: bool, failure: str | None = None) -> dict:
    return {"task": task, "repo": task.split("-")[0], "mode": mode, "sample": sample, "termination": "submitted",
            "reward": 1.0 if solved else -1.0, "turns": 3, "format_errors": 0,
            "failure": failure or ("solved" if solved else "wrong_fix"), "empty_diff": False, "search_refusals": 0,
            "wall_s": 1.0, "later_key": "ignored"}


def split(tasks: dict[str, list[bool]], model: str = "M", **settings) -> dict:
    """A result file: each task greedy (its first outcome) and sampled (all of them)."""
    rows = [row(t, "greedy", 0, o[0]) for t, o in tasks.items()]
    rows += [row(t, "sample", i, s) for t, o in tasks.items() for i, s in enumerate(o)]
    return {"models": {"before": None, "after": model}, "settings": {**SETTINGS, **settings},
            "rows": {"after": rows}}


def test_a_task_in_two_splits_counts_once():
    a = split({"h-1": [True, True], "p-1": [False, False]})
    b = split({"h-1": [True, True], "i-1": [False, True]}, workers=4)  # workers do not change the draws
    pool = pool_splits([a, b])
    assert [s["solved"] for s in pool["per_split_sample"]] == [2, 3]      # the sum would say 5 of 8
    p = pool["pooled"]
    assert (p["sample"]["solved"], p["sample"]["n"]) == (3, 6)            # h-1's two draws once
    assert (p["greedy"]["solved"], p["greedy"]["n"]) == (1, 3) and p["pass_at_k"]["solved"] == 2
    assert (pool["tasks"], pool["shared_tasks"], pool["episodes"]) == (3, ["h-1"], 9)
    assert (pool["repeated_episodes"], pool["repeats_ending_otherwise"]) == (3, 0)
    table = pool_table(pool, ["s0", "s1"])
    assert "| s1 | 3/4, 75.0%" in table and "| **distinct episodes** (3 tasks; greedy 1/3, pass@k 2/3) | 3/6, 50.0%" in table
    assert "1 task(s) in more than one split, 3 repeated episode(s) counted once (0 of them" in table


def both(before: dict[str, list[bool]], after: dict[str, list[bool]], before_model: str = "B") -> dict:
    """A compare file: checkpoint `before_model` then M on the same tasks and draws."""
    res = split(after)
    res["models"]["before"] = before_model
    res["rows"]["before"] = split(before)["rows"]["after"]
    return res


def test_two_checkpoints_pair_over_distinct_draws():
    """A shared draw that only `after` solves is one discordant pair, not one per split."""
    s0 = both({"h-1": [False, False], "p-1": [False]}, {"h-1": [True, False], "p-1": [False]})
    s1 = both({"h-1": [False, False], "i-1": [True]}, {"h-1": [True, False], "i-1": [True]})
    pairs = pool_pairs([s0, s1])
    sampled = pairs["paired"]["sampled"]
    assert (sampled["pairs"], sampled["only_after"], sampled["only_before"]) == (4, 1, 0)  # per split: 2 and 0
    assert pairs["paired"]["greedy"]["only_after"] == 1 and pairs["paired"]["greedy"]["pairs"] == 3
    assert pairs["after"]["pooled"]["sample"]["solved"] == 2 and pairs["before"]["pooled"]["sample"]["solved"] == 1
    with pytest.raises(ValueError, match="s1 played C, not B"):
        pool_pairs([s0, both({"h-1": [False]}, {"h-1": [True]}, before_model="C")], names=["s0", "s1"])


def test_a_repeat_that_ended_otherwise_keeps_the_first_and_is_counted():
    a = split({"h-1": [True, False]})
    b = split({"h-1": [True, True]})  # its second draw timed out under load the first time, say
    pool = pool_splits([a, b])
    assert pool["pooled"]["sample"]["solved"] == 1 and pool["repeats_ending_otherwise"] == 1


def test_files_that_are_not_one_checkpoints_same_draws_are_refused():
    a = split({"h-1": [True]})
    with pytest.raises(ValueError, match="s1 played N, not M: pool one checkpoint's splits"):
        pool_splits([a, split({"h-1": [True]}, model="N")], names=["s0", "s1"])
    with pytest.raises(ValueError, match=r"s1 played other draws than s0 \(settings sample_seed, temperature differ\)"):
        pool_splits([a, split({"h-1": [True]}, temperature=1.0, sample_seed=7)], names=["s0", "s1"])
    with pytest.raises(ValueError, match="s0 has no 'before' episodes; pick the phase with --phase \\(it has: after\\)"):
        pool_splits([a], phase="before", names=["s0"])
    with pytest.raises(ValueError, match="no split files"):
        pool_splits([])
    with pytest.raises(ValueError, match=r"s0 is no result file \(a JSON object with `rows`\)"):
        pool_splits([[a]], names=["s0"])
    broken = split({"h-1": [True]})
    del broken["rows"]["after"][0]["failure"]
    with pytest.raises(ValueError, match="s0: a row is not a held-out episode"):
        pool_splits([broken], names=["s0"])
    del broken["rows"]["after"][0]["task"]
    with pytest.raises(ValueError, match="s0: a row is not a held-out episode"):
        pool_splits([broken, broken], names=["s0", "s1"])


def test_the_script_prints_the_pool_and_writes_its_json(tmp_path):
    files = []
    for i, tasks in enumerate(({"h-1": [True, False]}, {"h-1": [True, False], "p-1": [False, False]})):
        files.append(tmp_path / f"s{i}.json")
        files[-1].write_text(json.dumps(split(tasks)))
    out = tmp_path / "pool.json"
    run = subprocess.run([sys.executable, "scripts/pool_heldout.py", *map(str, files), "--json", str(out)],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "(2 tasks; greedy 1/2, pass@k 1/2) | 1/4, 25.0%" in run.stdout
    assert json.loads(out.read_text())["shared_tasks"] == ["h-1"]
    assert "Both checkpoints" not in run.stdout  # one phase only
    paired = [tmp_path / "b0.json", tmp_path / "b1.json"]
    paired[0].write_text(json.dumps(both({"h-1": [False]}, {"h-1": [True]})))
    paired[1].write_text(json.dumps(both({"h-1": [False]}, {"h-1": [True]})))
    run = subprocess.run([sys.executable, "scripts/pool_heldout.py", *map(str, paired), "--json", str(out)],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "Both checkpoints over distinct draws, paired" in run.stdout
    assert "sampled: 1 pairs, after 1 / before 0, only after 1, only before 0" in run.stdout
    assert json.loads(out.read_text())["paired"]["sampled"]["only_after"] == 1
    paired[1].write_text(json.dumps(both({"h-1": [False]}, {"h-1": [True]}, before_model="C")))
    run = subprocess.run([sys.executable, "scripts/pool_heldout.py", *map(str, paired)],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "both checkpoints not pooled: " in run.stdout and "played C, not B" in run.stdout
    (tmp_path / "bad.json").write_text("{")
    bad = subprocess.run([sys.executable, "scripts/pool_heldout.py", str(files[0]), str(tmp_path / "bad.json")],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1 and "bad.json: cannot read it as a result file" in bad.stderr
