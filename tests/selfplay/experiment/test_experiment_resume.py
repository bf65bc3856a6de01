"""`Experiment(..., resume=True)` (`bench_learning --arm rl --resume`): a stopped experiment continues where
it stopped. The loop and the evaluation are documented test doubles here (`StoppingLoop` stands in for
`run_selfplay` and writes a run directory as the real loop does; `evaluate` is replaced by one that counts
what it plays); the real loop's own resume is tested in tests/selfplay/orchestration, and the real
evaluation of an experiment in test_experiment_docker.py."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from selfplay.code_revision import code_revision
from selfplay.experiment import arms as arms_mod
from selfplay.experiment.arms import Experiment, ExperimentConfig
from selfplay.experiment.heldout import EpisodeRow

ITERATION_S = 100.0
"""The `iteration/wall_s` the double's metrics give each iteration it finishes: far above the test's own time."""


class StoppingLoop:
    """`run_selfplay`'s double: one run directory an arm (config.yaml, a checkpoint per finished stage and a
    metrics.jsonl line per finished iteration, as the real loop leaves them), the calls recorded, and a
    KeyboardInterrupt at `stop_at` (arm, iterations), as a killed process stops: after the run directory
    exists and every iteration of the stage but its last has finished."""

    def __init__(self, work: Path, stop_at: tuple[str, int] | None = None) -> None:
        self.work, self.stop_at, self.calls = work, stop_at, []

    def __call__(self, config, resume=None):
        arm, iterations = config.name, config.iterations
        self.calls.append((arm, iterations, resume))
        path = resume or self.work / "arms" / f"{arm}-20261203-000000"
        path.mkdir(parents=True, exist_ok=True)
        (path / "config.yaml").write_text("name: x\n")
        stopping = (arm, iterations) == self.stop_at
        metrics = path / "metrics.jsonl"
        done = len(metrics.read_text().splitlines()) if metrics.is_file() else 0
        with metrics.open("a") as f:
            for it in range(done, iterations - 1 if stopping else iterations):
                f.write(json.dumps({"iteration": it, "iteration/wall_s": ITERATION_S}) + "\n")
        if stopping:
            raise KeyboardInterrupt
        if arm == "rl":  # the control trains nothing: it is evaluated on the start's weights
            from selfplay.learner.checkpoint import META

            (path / "checkpoints" / f"v{iterations:06d}").mkdir(parents=True, exist_ok=True)
            (path / "checkpoints" / f"v{iterations:06d}" / META).write_text(json.dumps({"policy_version": iterations}))
            (path / "checkpoints" / "latest").write_text(f"v{iterations:06d}")
        return path


@pytest.fixture
def played(monkeypatch):
    """The checkpoints the evaluation double played, in order; weights are named after their directory."""
    plays: list[str] = []

    def evaluate(model, tasks, settings):
        plays.append(Path(model).name)
        return [EpisodeRow(task=t.task_id, repo="r", mode="greedy", sample=0, termination="submit", reward=-1.0,
                           turns=1, format_errors=0, failure="no_edit", empty_diff=True, search_refusals=0,
                           wall_s=0.0) for _, t in tasks]

    monkeypatch.setattr(arms_mod, "evaluate", evaluate)
    monkeypatch.setattr(arms_mod, "weights_hash", lambda model_dir: f"w-{Path(model_dir).name}")
    return plays


def config(tmp_path, **kw):
    return ExperimentConfig(model_dir=str(tmp_path / "start"), work=tmp_path / "exp", repos=("boltons",),
                            heldout=("toolz",), **{"iterations": 2, "eval_every": 1, **kw})


TASKS = [(None, SimpleNamespace(task_id="t1"))]


def test_a_stopped_experiment_resumes_where_it_stopped(tmp_path, played):
    cfg = config(tmp_path)
    first = StoppingLoop(cfg.work, stop_at=("control", 2))
    with pytest.raises(KeyboardInterrupt):
        Experiment(cfg, TASKS, run=first, train_tasks=TASKS).execute()
    saved = json.loads((cfg.work / "results.json").read_text())
    assert sorted(saved["evals"]) == ["control@1", "rl@1", "rl@2", "start"]
    assert saved["code"] == code_revision() != ""  # the commit of the process that wrote it last
    # each checkpoint on the held-out tasks and the training stratum; control@1 has the start's weights: read
    # back, not played
    assert played == ["start", "start", "v000001", "v000001", "v000002", "v000002"]

    again = StoppingLoop(cfg.work)
    results = Experiment(cfg, TASKS, run=again, train_tasks=TASKS, resume=True).execute()
    control_dir = cfg.work / "arms" / "control-20261203-000000"
    # only the stopped stage runs again, resumed from its run directory; nothing evaluated is played again
    assert again.calls == [("control", 2, control_dir)]
    assert len(played) == 6
    assert sorted(results["evals"]) == ["control@1", "control@2", "rl@1", "rl@2", "start"]
    assert results["evals"]["control@2"]["reused"] and results["evals"]["rl@2"] == saved["evals"]["rl@2"]
    assert set(results["train_evals"]) == set(results["evals"]) and "paired" in results
    # iteration 0's time was saved with control@1; the killed stage finished no iteration: nothing to add
    assert saved["arms"]["control"]["wall_s"] <= results["arms"]["control"]["wall_s"] < ITERATION_S

    # resumed again once finished: nothing left to do
    done = StoppingLoop(cfg.work)
    Experiment(cfg, TASKS, run=done, train_tasks=TASKS, resume=True).execute()
    assert done.calls == [] and len(played) == 6


def test_an_experiment_stopped_on_one_device_resumes_on_another(tmp_path, played):
    """The evaluations' device is not part of the experiment's identity: stopped where they sampled on the
    CPU, it resumes where they sample on a GPU, and each evaluation records the device it played on."""
    from dataclasses import replace

    cfg = config(tmp_path, arms=("rl",))
    cfg = replace(cfg, eval=replace(cfg.eval, device="cpu"))
    with pytest.raises(KeyboardInterrupt):
        Experiment(cfg, TASKS, run=StoppingLoop(cfg.work, stop_at=("rl", 2))).execute()
    saved = json.loads((cfg.work / "results.json").read_text())
    assert "device" not in saved["config"]["eval"] and saved["evals"]["start"]["device"] == "cpu"
    on_gpu = replace(cfg, eval=replace(cfg.eval, device="cuda"))
    results = Experiment(on_gpu, TASKS, run=StoppingLoop(cfg.work), resume=True).execute()
    assert results["evals"]["rl@2"]["device"] == "cuda" and results["evals"]["start"]["device"] == "cpu"


def test_an_arm_stopped_before_its_first_save_resumes_its_run_directory(tmp_path, played):
    cfg = config(tmp_path, arms=("rl",))
    with pytest.raises(KeyboardInterrupt):
        Experiment(cfg, TASKS, run=StoppingLoop(cfg.work, stop_at=("rl", 1))).execute()
    assert "run_dir" not in json.loads((cfg.work / "results.json").read_text())["arms"].get("rl", {})

    again = StoppingLoop(cfg.work)
    Experiment(cfg, TASKS, run=again, resume=True).execute()
    rl_dir = cfg.work / "arms" / "rl-20261203-000000"
    assert again.calls == [("rl", 1, rl_dir), ("rl", 2, rl_dir)]
    # without --resume the saved results are not overwritten: the start is refused, naming --resume
    saved = (cfg.work / "results.json").read_text()
    with pytest.raises(ValueError, match="already holds an experiment.*--resume.*nothing was overwritten"):
        Experiment(cfg, TASKS, run=StoppingLoop(cfg.work))
    assert (cfg.work / "results.json").read_text() == saved
    # moved aside, the experiment starts over, in a run directory of its own
    (cfg.work / "results.json").rename(cfg.work / "results.old.json")
    fresh = StoppingLoop(cfg.work)
    Experiment(cfg, TASKS, run=fresh).execute()
    assert fresh.calls[0] == ("rl", 1, None)


def test_a_resumed_arm_counts_the_iterations_its_killed_process_finished(tmp_path, played):
    """Killed in its only stage after iteration 0 finished, before anything was saved: the resumed arm's
    `wall_s` counts iteration 0 from the run's metrics (the iteration it was killed in is lost)."""
    cfg = config(tmp_path, arms=("rl",), eval_every=2)
    with pytest.raises(KeyboardInterrupt):
        Experiment(cfg, TASKS, run=StoppingLoop(cfg.work, stop_at=("rl", 2))).execute()
    assert "wall_s" not in json.loads((cfg.work / "results.json").read_text())["arms"].get("rl", {})
    results = Experiment(cfg, TASKS, run=StoppingLoop(cfg.work), resume=True).execute()
    rl = results["arms"]["rl"]
    assert [r["iteration"] for r in rl["curve"]] == [0, 1]
    assert ITERATION_S <= rl["wall_s"] < 2 * ITERATION_S  # iteration 0 once; iteration 1 is this process's
    assert ITERATION_S <= rl["train_wall_s"] <= rl["wall_s"]


def test_resume_refuses_another_experiments_results_and_an_ambiguous_run(tmp_path, played):
    cfg = config(tmp_path, arms=("rl",))
    with pytest.raises(KeyboardInterrupt):
        Experiment(cfg, TASKS, run=StoppingLoop(cfg.work, stop_at=("rl", 1))).execute()
    with pytest.raises(ValueError, match="lr.*differ"):
        Experiment(config(tmp_path, arms=("rl",), lr=1e-4), TASKS, resume=True)
    with pytest.raises(ValueError, match="tasks differ"):
        Experiment(cfg, [(None, SimpleNamespace(task_id="t2"))], resume=True)
    other = cfg.work / "arms" / "rl-20261204-000000"
    other.mkdir()
    (other / "config.yaml").write_text("name: x\n")
    with pytest.raises(ValueError, match="2 run directories"):
        Experiment(cfg, TASKS, run=StoppingLoop(cfg.work), resume=True).execute()
    # nothing to resume: the experiment starts
    assert not Experiment(config(tmp_path / "new"), TASKS, resume=True).resumed
