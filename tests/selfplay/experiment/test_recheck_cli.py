"""`scripts/bench_learning.py --arm recheck` refuses bad input before it plays any episode, each time naming
the flag or directory to fix."""

from __future__ import annotations

import json

import pytest


def test_recheck_refuses_bad_input_before_playing(refused, tmp_path):
    assert "at least one --recheck" in refused("--arm", "recheck")
    assert "--eval-seed 0 would replay" in refused("--arm", "recheck", "--recheck", str(tmp_path))
    assert "no results.json" in refused("--arm", "recheck", "--recheck", str(tmp_path), "--eval-seed", "5")
    cut = tmp_path / "cut_short"
    cut.mkdir()
    (cut / "results.json").write_text('{"config": ')
    assert f"--recheck {cut}: {cut / 'results.json'} cannot be read" in refused("--arm", "recheck", "--recheck", str(cut), "--eval-seed", "5")
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


def test_recheck_of_a_demonstrated_experiment_plays_the_tasks_it_trained_on(bench, refused, tmp_path):
    """An experiment run with `--demonstrated --train-eval 0` evaluated no training stratum of its own; its
    recheck's training stratum is the warm start's demonstrated tasks on its repos (those its arms' stores
    started with), and its final checkpoints are the held-out evaluations'."""
    from selfplay.experiment.recheck import final_checkpoints
    from selfplay.store import open_store
    from tests.selfplay.orchestration.loop_double import artifact
    from tests.selfplay.store.store_data import make_report

    ws = tmp_path / "ws" / "store.db"
    work = tmp_path / "exp"
    work.mkdir()
    overrides = ("rollout.temperature=0.5", "curriculum.demonstrated_tasks=true", f"curriculum.demonstrated_store={ws}")
    results = {"config": {"iterations": "2", "repos": str(("toolz", "marshmallow")), "overrides": str(overrides),
                          "eval": str({"max_turns": 4, "max_new_tokens": 32, "temperature": 0.5})},
               "evals": {"start": {"model": "W"}, "rl@2": {"model": "R"}, "control@2": {"model": "W"}},
               "arms": {"rl": {"run_dir": str(work / "arms" / "rl")}}}
    (work / "results.json").write_text(json.dumps(results))
    assert final_checkpoints(results) == {"rl": "R", "control": "W"}
    msg = refused("--arm", "recheck", "--recheck", str(work), "--eval-seed", "5")
    assert str(ws) in msg and "is gone" in msg
    ws.parent.mkdir()
    with open_store(str(ws)) as s:
        ids = [s.record_validation(artifact(n), repo, make_report(True, n), origin="procedural")
               for n, repo in ((1, "toolz"), (2, "boltons"), (3, "marshmallow"), (4, "toolz"))]
        for task_id, reward in zip(ids, (1.0, 1.0, 1.0, -1.0)):
            s.record_attempt(task_id, role="solver", policy_version=0, reward=reward, turns=4, tokens=100,
                             termination="submitted", source="demo")
    tasks = bench.recheck_tasks(work, results, "train")
    # boltons is not among the experiment's repos; the failed demonstration repaired nothing
    assert sorted(t.task_id for _, t in tasks) == sorted([ids[0], ids[2]])
    # the training stratum's repos are named in the arms' repo list (a user's own, where they set one)
    mine = tmp_path / "mine.toml"
    mine.write_text('[[repo]]\nname = "toolz"\nsource = "local"\npath = "/src/toolz"\n'
                    '[[repo]]\nname = "marshmallow"\nsource = "local"\npath = "/src/marshmallow"\n')
    results["config"]["overrides"] = str((*overrides, f"repo_list={mine}"))
    assert {sp.path for sp, _ in bench.recheck_tasks(work, results, "train")} == {"/src/toolz", "/src/marshmallow"}
    results["config"]["overrides"] = str((*overrides, "nosuch=1"))
    assert "its arms' config no longer loads" in refused_quietly(bench, work, results)
    results["config"]["overrides"] = str(overrides[:1])
    (work / "results.json").write_text(json.dumps(results))
    assert "no --demonstrated" in refused("--arm", "recheck", "--recheck", str(work), "--eval-seed", "5")


def test_the_untrained_stratum_is_the_warm_starts_other_demonstrated_tasks(bench, refused, tmp_path):
    """An experiment trained on a chosen subset of the demonstrations (`curriculum.demonstrated_store`, a
    filtered copy): `--stratum untrained` is the rest of the warm start's demonstrated tasks on its repos, read
    from the store.db beside its model directory."""
    from selfplay.store import open_store
    from tests.selfplay.orchestration.loop_double import artifact
    from tests.selfplay.store.store_data import make_report

    cache = tmp_path / "ws"
    model, subset, work = cache / "model-x", tmp_path / "subset" / "store.db", tmp_path / "exp"
    work.mkdir()
    overrides = ("curriculum.demonstrated_tasks=true", f"curriculum.demonstrated_store={subset}")
    results = {"config": {"iterations": "2", "repos": str(("toolz", "marshmallow")), "overrides": str(overrides),
                          "model_dir": str(model), "eval": str({"max_turns": 4, "temperature": 0.5})},
               "evals": {"rl@2": {"model": "R"}, "control@2": {"model": str(model)}},
               "arms": {"rl": {"run_dir": str(work / "arms" / "rl")}}}
    (work / "results.json").write_text(json.dumps(results))
    msg = refused("--arm", "recheck", "--recheck", str(work), "--eval-seed", "5", "--stratum", "untrained")
    assert f"no warm-start store at {cache / 'store.db'}" in msg
    ids = {}
    for store, picked in ((cache / "store.db", (1, 2, 3, 4)), (subset, (1,))):
        store.parent.mkdir(parents=True, exist_ok=True)
        with open_store(str(store)) as s:
            for n, repo in ((1, "toolz"), (2, "boltons"), (3, "marshmallow"), (4, "toolz")):
                if n in picked:
                    ids[n] = s.record_validation(artifact(n), repo, make_report(True, n), origin="procedural")
                    s.record_attempt(ids[n], role="solver", policy_version=0, reward=1.0, turns=4, tokens=100,
                                     termination="submitted", source="demo")
    tasks = bench.recheck_tasks(work, results, "untrained")
    # task 1 trained; task 2's repo (boltons) is not the experiment's
    assert sorted(t.task_id for _, t in tasks) == sorted([ids[3], ids[4]])
    with open_store(str(subset)) as s:  # a subset that is every demonstrated task leaves nothing untrained
        for n in (3, 4):
            tid = s.record_validation(artifact(n), "toolz" if n == 4 else "marshmallow", make_report(True, n),
                                      origin="procedural")
            s.record_attempt(tid, role="solver", policy_version=0, reward=1.0, turns=4, tokens=100,
                             termination="submitted", source="demo")
    msg = refused("--arm", "recheck", "--recheck", str(work), "--eval-seed", "5", "--stratum", "untrained")
    assert "nothing is untrained" in msg


def test_reuse_reads_earlier_rechecks_and_refuses_what_it_cannot_match(bench, tmp_path):
    """`--reuse F.json`: an earlier recheck's entries, their arms tagged with the file; an entry written before
    draw settings were recorded gets them from its experiment's results.json, and is refused when that is gone."""
    from selfplay.experiment.recheck import draw_settings, recheck_settings

    with pytest.raises(SystemExit, match="cannot read"):
        bench.earlier_rechecks([tmp_path / "missing.json"])
    (tmp_path / "other.json").write_text(json.dumps({"rows": []}))
    with pytest.raises(SystemExit, match="no 'experiments' list"):
        bench.earlier_rechecks([tmp_path / "other.json"])
    work = tmp_path / "exp"
    work.mkdir()
    results = {"config": {"iterations": "3", "eval": str({"max_turns": 12, "max_new_tokens": 256,
                                                          "temperature": 0.5, "localize": True})}}
    (work / "results.json").write_text(json.dumps(results))
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"experiments": [{"work": str(work), "sample_seed": 202, "samples": 6,
                                                "kind": "train_evals", "tasks": ["a"],
                                                "arms": {"control": {"model": "W", "rows": []}}}]}))
    (entry,) = bench.earlier_rechecks([old])
    assert entry["settings"] == draw_settings(recheck_settings(results, samples=6, sample_seed=202, workers=12))
    assert entry["settings"]["localize"] and entry["arms"]["control"]["source"] == str(old)
    (work / "results.json").unlink()
    with pytest.raises(SystemExit, match="records no settings"):
        bench.earlier_rechecks([old])


def test_a_stopped_recheck_keeps_its_first_checkpoint_and_the_same_command_continues(bench, monkeypatch, tmp_path):
    """--out is written after each checkpoint: a recheck stopped while it plays the control keeps the rl
    checkpoint's episodes, and the same command run again reads them back and plays only the control. An
    --out holding another recheck's episodes is refused before anything is played, not overwritten.
    Test doubles, as in the tests above: `recheck_tasks` returns two named tasks (the real one reads the
    experiment's store; tested above), and `evaluate` records what it plays and is stopped on demand (the
    real one is played in test_experiment_docker.py)."""
    from types import SimpleNamespace

    from selfplay.experiment import recheck
    from selfplay.experiment.heldout import EpisodeRow

    work, out = tmp_path / "exp", tmp_path / "out.json"
    work.mkdir()
    (work / "results.json").write_text(json.dumps({
        "config": {"iterations": "1", "eval": str({"max_turns": 4, "max_new_tokens": 32, "temperature": 0.5})},
        "train_evals": {"rl@1": {"model": "R"}, "control@1": {"model": "W"}}}))
    tasks = [(None, SimpleNamespace(task_id=i)) for i in ("a", "b")]
    monkeypatch.setattr(bench, "recheck_tasks", lambda work, results, stratum: tasks)
    played, stop = [], {"W"}

    def play(model, tasks, settings):
        played.append(model)
        if model in stop:
            raise KeyboardInterrupt
        return [EpisodeRow(task=t.task_id, repo="toolz", mode="sample", sample=k, termination="submitted",
                           reward=1.0 if model == "R" else -1.0, turns=3, format_errors=0,
                           failure="solved" if model == "R" else "no_edit", empty_diff=False, search_refusals=0,
                           wall_s=1.0) for _, t in tasks for k in range(settings.samples)]

    monkeypatch.setattr(recheck, "evaluate", play)
    argv = ["--arm", "recheck", "--recheck", str(work), "--eval-seed", "5", "--samples", "2", "--out", str(out)]
    monkeypatch.setattr("sys.argv", ["bench_learning.py", *argv])
    with pytest.raises(KeyboardInterrupt):
        bench.main()
    (entry,) = json.loads(out.read_text())["experiments"]
    assert entry["partial"] and set(entry["arms"]) == {"rl"} and len(entry["arms"]["rl"]["rows"]) == 4
    stop.clear()
    bench.main()
    assert played == ["R", "W", "W"]  # the rl checkpoint was not played again
    saved = json.loads(out.read_text())
    (entry,) = saved["experiments"]
    assert "partial" not in entry and entry["arms"]["rl"]["reused_from"] == str(out)
    assert entry["paired"]["only_rl"] == 4 and saved["pooled"]["only_rl"] == 4
    # another seed would overwrite those episodes: refused, the file unchanged, nothing played
    monkeypatch.setattr("sys.argv", ["bench_learning.py", *[{"5": "6"}.get(a, a) for a in argv]])
    with pytest.raises(SystemExit, match="would overwrite; give another --out") as exc:
        bench.main()
    assert str(work) in str(exc.value) and "sample seed 5" in str(exc.value)
    assert json.loads(out.read_text()) == saved and played == ["R", "W", "W"]
    out.write_text("notes of mine")  # a file no recheck wrote is not overwritten either
    with pytest.raises(SystemExit, match=f"--out {out}: cannot read it as a recheck's output"):
        bench.main()
    assert out.read_text() == "notes of mine" and played == ["R", "W", "W"]


def test_the_rl_arms_sample_at_the_presets_temperature_unless_told(bench):
    """Left out, `--temperature` is what `selfplay run` of the preset samples at (the default's 0.5), so the
    experiment plays the run it stands for; a `--set rollout.temperature` is that run's too."""
    assert bench.preset_temperature("default", []) == 0.5
    assert bench.preset_temperature("default", ["rollout.temperature=0.7"]) == 0.7
    from selfplay.config.loader import load_config

    assert bench.preset_temperature("gpu-1node", []) == load_config("gpu-1node").rollout.temperature


def refused_quietly(bench, work, results) -> str:
    """The SystemExit message of `recheck_tasks`' training stratum."""
    with pytest.raises(SystemExit) as exc:
        bench.recheck_tasks(work, results, "train")
    return str(exc.value)
