"""`selfplay run` through the real CLI app: config errors (real loader, nothing starts), exit codes and the
display around the loop, and (docker, slow) the real `--config smoke` run end to end.

Test double: `_FakeLoop` stands in for `selfplay.orchestration.loop` in the exit-code tests only. It
writes the files the contract promises (runs/<id>/config.yaml, summary.json) and sends RunEvents the way
the loop does, so the CLI's handling of finished / failed / interrupted runs is tested without Docker or a
model. The real path is `test_smoke_preset_runs_end_to_end_through_ctrl_c_and_resume` below.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import types
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from selfplay.cli import app
from selfplay.cli.run_display import RunDisplay, headline, summary_table
from selfplay.config.loader import dump_config, load_config
from selfplay.errors import ValidationInfraError
from selfplay.orchestration.ledger import RunEvent

runner = CliRunner()


class _FakeLoop:
    """Test double of the loop module: records its call, reports events, ends as told."""

    def __init__(self, ending: str = "finished") -> None:
        self.ending = ending
        self.calls: list[tuple[Any, Path | None]] = []

    def module(self) -> types.ModuleType:
        mod = types.ModuleType("selfplay.orchestration.loop")
        mod.run_selfplay = self.run_selfplay
        return mod

    def run_selfplay(self, config, *, resume=None, observer=None):
        self.calls.append((config, resume))
        run_dir = Path(resume) if resume else Path(config.runs_dir) / f"{config.name}-20261123-103000"
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "config.yaml").write_text(dump_config(config))
        summary = {"run_id": run_dir.name, "iterations": 2, "injector_episodes": 2, "valid_artifacts": 1,
                   "solver_attempts": 4, "solved": 1, "learner_updates": 2, "policy_version": 2,
                   "tasks_in_store": 3, "infra_failures": 0, "status": "running", "error": None, "wall_s": 90.0}
        observer.on_event(RunEvent("phase", 1, "injector episodes", summary))
        observer.on_event(RunEvent("episode", 1, "toolz injector [removal]: valid", summary))
        if self.ending == "interrupted":
            raise KeyboardInterrupt
        if self.ending == "failed":
            summary = {**summary, "status": "failed", "error": "docker engine gone"}
            (run_dir / "summary.json").write_text(json.dumps(summary))
            raise ValidationInfraError("docker engine gone")
        summary = {**summary, "status": "finished" if self.ending == "finished" else "failed"}
        (run_dir / "summary.json").write_text(json.dumps(summary))
        observer.on_event(RunEvent("done", 2, "finished", summary))
        return run_dir


@pytest.fixture
def fake_loop(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "200")

    def install(ending: str = "finished") -> _FakeLoop:
        fake = _FakeLoop(ending)
        monkeypatch.setitem(sys.modules, "selfplay.orchestration.loop", fake.module())
        return fake

    return install


@pytest.mark.parametrize("args, expected", [
    (["run", "learner.lr=3e-6"], ["learner.lr", "unknown key", "did you mean learner.engine.lr?"]),
    (["run", "--config", "smoke", "policy.backend=gpt"], ["policy.backend", "'gpt'", "'hf', 'openai'"]),
    (["run", "--config", "nope"], ["'nope'", "default, smoke, gpu-1node, multi-node"]),
    (["run", "--config", "multi-node"], ["store_url", "CHANGE_ME"]),
    (["run", "rollout.strategies=removal"], ["rollout.strategies=[removal]"]),
    (["run", "--resume", "no/such/run"], ["not a run directory"]),
    (["run", "--resume", "x", "--config", "smoke"], ["drop --config"]),
    (["run", "--repos", "toolz"], ["'--repos' is not an option", "write it as repos=VALUE"]),
    (["run", "--learner.engine.lr=1e-5"], ["write it as learner.engine.lr=VALUE"]),
    (["run", "--max-hours", "2"], ["write it as max_hours=VALUE"]),
    (["run", "--set", "learner.minibatches=sample"], ["'--set' is not an option", "leave `--set` out"]),
    (["run", "learner.minibatches=rows"], ["learner.minibatches", "'rows'", "'group', 'sample'"]),
    (["run", "policy.device=gpu"], ["policy:", "device must be auto, cpu, cuda, cuda:N", "'gpu'"]),
    (["run", "eval.split=verified-500"], ["eval.split", "'verified-500'", "'verified', 'verified-50'"]),
    (["run", "rollout.solver_tasks=-1"], ["rollout:", "solver_tasks must be >= 0, got -1"]),
    (["run", "learner.engine.model_dir=/some/ckpt"], ["learner.engine.model_dir", "would be ignored",
                                                      "set policy.model_dir"]),
    (["run", "policy.backend=scripted", "policy.scripted_actions=no/such.json"],
     ["policy.scripted_actions: file no/such.json does not exist"]),
    (["run", "curriculum.demonstrated_tasks=true", "curriculum.demonstrated_store=no/store.db"],
     ["curriculum.demonstrated_store: file no/store.db does not exist"]),
])
def test_bad_config_exits_2_before_anything_starts(args, expected, fake_loop):
    fake = fake_loop()
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    flat = " ".join(result.output.split())  # the console wraps a long message at its width, even at 200
    for part in expected:
        assert part in flat, result.output
    assert fake.calls == [] and not Path("runs").exists()


def test_finished_run_exits_0_with_the_summary(fake_loop):
    fake = fake_loop()
    result = runner.invoke(app, ["run", "--config", "smoke", "learner.engine.lr=3e-6", "iterations=2"])
    assert result.exit_code == 0, result.output
    config, resume = fake.calls[0]
    assert config == load_config("smoke", ["learner.engine.lr=3e-6"]) and resume is None
    assert "run directory: runs/smoke-20261123-103000" in result.output
    assert "1 of 2 injected bugs were valid, 1 of 4 solver attempts solved their task, 2 learner update(s)" \
        in result.output
    assert "toolz injector [removal]: valid" in result.output  # brackets in messages are text, not markup
    assert "finished" in result.output


def test_failed_run_exits_1_naming_the_error_and_the_run_dir(fake_loop):
    fake_loop("failed")
    result = runner.invoke(app, ["run", "--config", "smoke"])
    assert result.exit_code == 1, result.output
    assert "run failed: docker engine gone" in result.output
    assert "runs/smoke-20261123-103000" in result.output and "logs/run.log" in result.output


def test_a_run_that_returns_without_finishing_exits_1(fake_loop):
    fake_loop("returns-failed")
    result = runner.invoke(app, ["run", "--config", "smoke"])
    assert result.exit_code == 1, result.output
    assert "failed" in result.output and "run directory: runs/smoke-20261123-103000" in result.output


def test_interrupted_run_exits_130_and_says_how_to_resume(fake_loop):
    fake_loop("interrupted")
    result = runner.invoke(app, ["run", "--config", "smoke"], env={"COLUMNS": "40"})  # the command never wraps
    assert result.exit_code == 130, result.output
    assert "selfplay run --resume runs/smoke-20261123-103000" in result.output
    assert "interrupted" in result.output.split("Resume with")[0]  # the closing table's status


def test_resume_passes_the_saved_config_and_safe_overrides(fake_loop):
    fake = fake_loop()
    assert runner.invoke(app, ["run", "--config", "smoke", "seed=3"]).exit_code == 0
    run_dir = Path("runs/smoke-20261123-103000")
    result = runner.invoke(app, ["run", "--resume", str(run_dir), "iterations=4"])
    assert result.exit_code == 0, result.output
    config, resume = fake.calls[-1]
    assert resume == run_dir and config.iterations == 4 and config.seed == 3
    refused = runner.invoke(app, ["run", "--resume", str(run_dir), "reward.group_size=8"])
    assert refused.exit_code == 2 and "cannot change when resuming" in refused.output


@pytest.mark.parametrize("damage, expected", [
    ("checkpoint", ["state.json says policy version 2", "checkpoints/v000002 is missing", "restore it"]),
    ("store", ["store.db is not a readable store (file is not a database)", "restore it"]),
])
def test_resume_of_a_damaged_run_exits_2_and_leaves_it_as_it_was(damage, expected, fake_loop, tmp_path):
    """A real finished run (the loop with its worker double), then the damage a user or a cleanup could do."""
    from tests.selfplay.orchestration.test_resume import add_checkpoint, files, finished_run

    path, _ = finished_run(tmp_path)
    if damage == "checkpoint":
        add_checkpoint(path, 2)
        shutil.rmtree(path / "checkpoints" / "v000002")
    else:
        for extra in ("store.db-wal", "store.db-shm"):
            (path / extra).unlink(missing_ok=True)
        (path / "store.db").write_bytes(b"not a database at all" * 200)
    before = files(path)
    fake = fake_loop()
    result = runner.invoke(app, ["run", "--resume", str(path), "iterations=4"])
    assert result.exit_code == 2, result.output
    flat = " ".join(result.output.split())
    assert flat.startswith(f"config error: --resume {path}: ") and "Traceback" not in flat, result.output
    for part in expected:
        assert part in flat, result.output
    assert fake.calls == [] and files(path) == before


def test_live_display_renders_on_a_terminal():
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120)
    display = RunDisplay(console, load_config("smoke"), live=True)
    summary = {"run_id": "smoke-1", "injector_episodes": 1, "valid_artifacts": 1, "learner_updates": 1}
    with display:
        display.on_event(RunEvent("phase", 1, "solver episodes", summary))
        display.on_event(RunEvent("episode", 1, "toolz solver [/bold] solved", summary))
        frame = Console(file=io.StringIO(), width=120)
        frame.print(display._render())
        text = frame.file.getvalue()
    assert "iteration 1/2" in text and "solver episodes" in text and "[/bold] solved" in text
    assert "valid bugs" in text and "run directory: runs/smoke-1" in out.getvalue()


def test_summary_says_plainly_what_the_run_did():
    summary = {"run_id": "r", "status": "finished", "iterations": 2, "injector_episodes": 4, "valid_artifacts": 3,
               "solver_attempts": 8, "solved": 2, "learner_updates": 2, "policy_version": 2, "wall_s": 600}
    assert headline(summary) == ("2 iteration(s): 3 of 4 injected bugs were valid, 2 of 8 solver attempts "
                                 "solved their task, 2 learner update(s) ran (policy version 2).")
    out = Console(file=io.StringIO(), width=100)
    out.print(summary_table(summary))
    text = out.file.getvalue()
    assert "valid bugs" in text and "10.0 min" in text and "learner updates" in text
    assert headline({}).startswith("0 iteration(s): 0 of 0")  # an empty summary still reads
    assert headline({**summary, "infra_failures": 3}).endswith(
        "3 episode(s) lost to infrastructure failures were not trained on.")
    assert headline({**summary, "stopped_by": "max_hours"}).endswith("would have ended past it.")
    assert headline({**summary, "stopped_by": "iterations"}) == headline(summary)
    out = Console(file=io.StringIO(), width=100)
    out.print(summary_table({**summary, "seeded_tasks": 2}))
    assert "procedural seed tasks" in out.file.getvalue() and "higher-order" not in out.file.getvalue()


def test_print_config_shows_the_resolved_tree_and_starts_nothing(fake_loop, tmp_path):
    fake = fake_loop()
    result = runner.invoke(app, ["run", "--config", "smoke", "learner.engine.lr=3e-6", "--print-config"])
    assert result.exit_code == 0, result.output
    assert fake.calls == []
    saved = tmp_path / "printed.yaml"
    saved.write_text(result.output)
    assert load_config(saved) == load_config("smoke", ["learner.engine.lr=3e-6"])


@pytest.mark.docker
@pytest.mark.slow
def test_smoke_preset_runs_end_to_end_through_ctrl_c_and_resume(tmp_path):
    """The real thing: `selfplay run --config smoke` in Docker with the embedded model, learner on, as a
    process. A real SIGINT after its first episode exits 130; the `--resume` command it printed completes
    both iterations. (One run for both: each smoke run costs ~100 s of CI on 2 cores.)"""
    selfplay = str(Path(sys.executable).parent / "selfplay")
    # An in-process learner earlier in this pytest process exported MASTER_PORT and still listens on it.
    dist_keys = ("MASTER_ADDR", "MASTER_PORT", "RANK", "LOCAL_RANK", "WORLD_SIZE")
    env = {**{k: v for k, v in os.environ.items() if k not in dist_keys}, "COLUMNS": "200"}
    proc = subprocess.Popen([selfplay, "run", "--config", "smoke", f"runs_dir={tmp_path}"], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    watchdog = threading.Timer(900, proc.kill)
    watchdog.start()
    lines: list[str] = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if " episode: " in line:
                proc.send_signal(signal.SIGINT)
                break
        lines.extend(proc.stdout)
        assert proc.wait() == 130, "".join(lines)
    finally:
        watchdog.cancel()
    out = "".join(lines)
    (run_dir,) = tmp_path.iterdir()
    assert f"Resume with: selfplay run --resume {run_dir}" in out
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "interrupted"
    assert "FutureWarning" not in out and "past_key_values" not in out  # third-party warnings: run.log only
    resumed = subprocess.run([selfplay, "run", "--resume", str(run_dir)], env=env, text=True,
                             capture_output=True, timeout=900)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["iterations"] == 2, summary
    assert summary["injector_episodes"] >= 2 and summary["solver_attempts"] >= 2, summary
    assert summary["learner_updates"] > 0, summary
    assert load_config(run_dir / "config.yaml") == load_config("smoke", [f"runs_dir={tmp_path}"])
    assert f"run directory: {run_dir}" in resumed.stdout
    assert f"{summary['learner_updates']} learner update(s) ran" in resumed.stdout
