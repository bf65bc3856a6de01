"""The whole loop for real on toolz with the `scripted` backend: Docker sandboxes, real validation and
grading, SQLite, a tiny random Llama as the learner's model (the embedded tokenizer).

The scripted injector writes a known-valid procedural artifact (`selfplay.demos.injector`); the solver
lists are the expert's right fix (`selfplay.demos.solver_plan`) and a wrong one (a comment appended to the
buggy file), two of each, so the bug's solve rate is 1/2 and its Eq. 1 reward 1 - 1.8 * 0.5 = 0.1; the
wrong attempts make a higher-order task. Then a `selfplay run` process is killed with SIGKILL in the
middle of an iteration and `--resume` completes the run: nothing recorded is lost or doubled and no
container of the run is left.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

pytestmark = [pytest.mark.docker, pytest.mark.slow]
torch = pytest.importorskip("torch")
pytest.importorskip("deepspeed")

G = 4
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from selfplay.learner.tiny_model import save_tiny_model

    return save_tiny_model(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="module")
def actions(tmp_path_factory):
    """{"injector": [writes the seeded artifact], "solver": [right, wrong, right, wrong]} as a JSON file."""
    from repos.listfile import get_repo
    from tests.selfplay.orchestration.scripted_run import write_actions

    path = tmp_path_factory.mktemp("script") / "actions.json"
    write_actions(get_repo("toolz"), path, "RWRW")
    return path


def run_config(tmp_path, tiny_model, actions, **kw):
    from tests.selfplay.orchestration.scripted_run import scripted_run_config

    config = scripted_run_config(name="e2e", runs_dir=tmp_path / "runs", repo="toolz", actions=actions,
                                 model_dir=tiny_model, group=G)
    return replace(config, **kw)


def run_containers(run_id: str) -> list[str]:
    out = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=selfplay.run_id={run_id}"],
                         capture_output=True, text=True, check=True).stdout
    return out.split()


def test_end_to_end_scripted(tmp_path, tiny_model, actions):
    from selfplay.config.run_config import EvalSettings
    from selfplay.eval.offline import build_offline_dataset
    from selfplay.learner.checkpoint import latest_checkpoint, read_version
    from selfplay.orchestration.loop import run_selfplay
    from selfplay.orchestration.rundir import RunDir, read_trajectories
    from selfplay.store import open_store

    # periodic evaluation of every checkpoint on the offline SWE-bench-format dataset (2 instances)
    dataset = tmp_path / "offline.jsonl"
    build_offline_dataset(ROOT / "tests" / "fixtures" / "swebench", dataset)
    config = run_config(tmp_path, tiny_model, actions,
                        eval=EvalSettings(every=1, dataset=str(dataset), split="verified", max_turns=2,
                                          max_new_tokens=32))
    path = run_selfplay(config)
    run = RunDir(path)
    summary = json.loads(run.summary.read_text())
    assert summary["status"] == "finished", summary
    assert summary["injector_episodes"] == 1 and summary["valid_artifacts"] == 1, summary
    assert summary["solver_attempts"] == G and summary["solved"] == 2, summary
    assert summary["higher_order_tasks"] >= 1 and summary["infra_failures"] == 0, summary
    assert summary["learner_updates"] == 1 and summary["policy_version"] == 1
    assert read_version(latest_checkpoint(run.checkpoints)) == 1
    with open_store(str(run.store_db)) as store:
        attempts = store.attempts(run_id=path.name)
        (inj,) = [a for a in attempts if a.role == "injector"]
        assert inj.reward == pytest.approx(1 - 1.8 * 0.5)  # Eq. 1 at s = 1/2
        stats = store.task_stats([inj.task_id])[0]
        assert 0 < stats.solve_rate < 1
        higher = [t for t in store.list_tasks() if t.origin == "higher_order"]
        assert higher and all(t.parent_id == inj.task_id and t.order == 2 for t in higher)
        assert summary["tasks_in_store"] == len(store.task_stats()) == 1 + len(higher)
    (traj,) = read_trajectories(run.trajectory_file(0, "injector"))
    assert traj.metadata["validation"]["valid"] and traj.reward == pytest.approx(0.1)
    record = json.loads(run.metrics.read_text().splitlines()[-1])
    assert record["solve_rate/all"] == 0.5 and record["injector/validity"] == 1.0
    evaluated = [json.loads(line) for line in run.metrics.read_text().splitlines()]
    evaluated = [r for r in evaluated if "eval/swebench/instances" in r]
    assert evaluated and evaluated[-1]["eval/swebench/instances"] == 2, evaluated  # the tiny model solves none
    assert "eval/swebench/failed" not in evaluated[-1]
    assert run_containers(path.name) == []
    _report_renders(path, traj.metadata["id"], tmp_path / "chromium")


def _report_renders(run_dir: Path, episode_id: str, profile: Path) -> None:
    """`selfplay report` on the real run: the page's charts are there and, in headless Chromium, its
    viewer opens the injector episode."""
    import shutil
    from urllib.parse import quote

    from selfplay.report import build_report

    page = build_report(run_dir)
    text = page.read_text()
    assert 'id="chart-solve-rate"' in text and episode_id in text
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("no chromium binary on PATH (Debian: apt-get install -y chromium)")
    proc = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}",
                           "--dump-dom", page.resolve().as_uri() + "#episode=" + quote(episode_id)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert 'data-viewer="ready"' in proc.stdout and f'data-episode="{episode_id}"' in proc.stdout


def test_kill_9_then_resume(tmp_path, tiny_model, actions):
    from selfplay.config.loader import dump_config
    from selfplay.judge.rewards import RewardConfig
    from selfplay.orchestration.rundir import RunDir
    from selfplay.orchestration.state import LoopState
    from selfplay.store import open_store

    # one iteration, G = 2, no learner: the kill lands in iteration 0's solver attempts. The second solver
    # list sleeps first, so the iteration is still open when the first attempt is recorded (with G = 2 and
    # fast lists, a loaded CI machine once saw the run finish before the kill landed). A resumed process
    # starts the lists again, so the attempt it replays gets the fast right fix.
    script = json.loads(actions.read_text())
    script["solver"] = [script["solver"][0], ["```bash\nsleep 45\n```", *script["solver"][1]]]
    slow = tmp_path / "actions.json"
    slow.write_text(json.dumps(script))
    cfg = run_config(tmp_path, tiny_model, slow, reward=RewardConfig(group_size=2), learner=replace(
        run_config(tmp_path, tiny_model, slow).learner, enabled=False))
    cfg_file = tmp_path / "run.yaml"
    cfg_file.write_text(dump_config(cfg))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cli = [sys.executable, "-m", "selfplay.cli", "run"] if (ROOT / "selfplay/cli/__main__.py").exists() else \
        [str(Path(sys.executable).parent / "selfplay"), "run"]
    proc = subprocess.Popen([*cli, "--config", str(cfg_file)], cwd=tmp_path, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    run_dir = None
    try:
        # kill when iteration 0's attempts are partly recorded
        while time.monotonic() < deadline and proc.poll() is None:
            dirs = list((tmp_path / "runs").glob("e2e-*"))
            if dirs and (dirs[0] / "store.db").exists():
                run_dir = dirs[0]
                with open_store(str(run_dir / "store.db")) as store:
                    if len(store.attempts(run_id=run_dir.name)) >= 1:
                        break
            time.sleep(0.5)
        assert proc.poll() is None, "the run ended before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert run_dir is not None
    run = RunDir(run_dir)
    assert json.loads(run.summary.read_text())["status"] == "running"
    with open_store(str(run.store_db)) as store:
        before = {a.trajectory_path for a in store.attempts(run_id=run_dir.name)}
        tasks_before = {t.task_id for t in store.task_stats()}
    assert LoopState.load(run.state).completed == 0
    assert run_containers(run_dir.name), "the killed run's sandboxes should still be there"

    resumed = subprocess.run([*cli, "--resume", str(run_dir)], cwd=tmp_path, env=env, capture_output=True,
                             text=True, timeout=400)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    summary = json.loads(run.summary.read_text())
    assert summary["status"] == "finished" and summary["iterations"] == 1
    with open_store(str(run.store_db)) as store:
        attempts = store.attempts(run_id=run_dir.name)
        paths = [a.trajectory_path for a in attempts]
        assert before <= set(paths) and len(paths) == len(set(paths))  # nothing lost, nothing twice
        assert sum(a.role == "solver" for a in attempts) == 2 == summary["solver_attempts"]
        assert sum(a.role == "injector" for a in attempts) == 1 == summary["injector_episodes"]
        assert tasks_before <= {t.task_id for t in store.task_stats()}
    assert run_containers(run_dir.name) == []


def test_async_run_in_docker_plays_the_next_iteration_while_the_learner_trains(tmp_path, tiny_model, actions):
    """learner.mode=async with real sandboxes, validation, grading and DeepSpeed steps: iteration 1's rollouts
    run in the background thread while iteration 0's batch trains, one version behind and not dropped."""
    from selfplay.judge.rewards import RewardConfig
    from selfplay.orchestration.loop import run_selfplay
    from selfplay.orchestration.rundir import RunDir

    base = run_config(tmp_path, tiny_model, actions)
    cfg = replace(base, iterations=2, reward=RewardConfig(group_size=2), learner=replace(base.learner, mode="async"))
    run = RunDir(run_selfplay(cfg))
    summary = json.loads(run.summary.read_text())
    assert summary["status"] == "finished" and summary["iterations"] == 2, summary
    assert summary["solver_attempts"] == 4 and summary["infra_failures"] == 0, summary
    assert summary["learner_updates"] >= 1 and summary["staleness_dropped"] == 0, summary
    records = [json.loads(x) for x in run.metrics.read_text().splitlines()]
    assert [r["iteration"] for r in records] == [0, 1]
    assert records[0]["staleness/mean"] == 0 and records[1]["staleness/mean"] == 1
    assert run_containers(run.path.name) == []


def test_overlapped_injectors_in_docker(tmp_path, actions):
    """`rollout.overlap_injectors` with real sandboxes, validation and grading (scripted policy, no learner):
    iteration 0's valid bug gets its own round; in iteration 1 a drawn task's attempts (the store's first
    task: a higher-order one) run beside the injector, whose bug (the same artifact again) the store already
    holds: its round is played, and it gets the invalid reward."""
    from selfplay.orchestration.loop import run_selfplay
    from selfplay.orchestration.rundir import RunDir
    from selfplay.store import open_store
    from tests.selfplay.orchestration.scripted_run import scripted_run_config

    config = scripted_run_config(name="overlap", runs_dir=tmp_path / "runs", repo="toolz", actions=actions,
                                 model_dir=None, iterations=2, group=G, workers=G + 1)
    config = replace(config, rollout=replace(config.rollout, overlap_injectors=True))
    path = run_selfplay(config)
    summary = json.loads(RunDir(path).summary.read_text())
    assert summary["status"] == "finished" and summary["infra_failures"] == 0, summary
    assert summary["injector_episodes"] == 2 and summary["solver_attempts"] == 3 * G, summary
    with open_store(str(RunDir(path).store_db)) as store:
        injector = [round(a.reward, 6) for a in sorted(store.attempts(run_id=path.name), key=lambda a: a.id)
                    if a.role == "injector"]
    assert injector == [0.1, -1.0]  # Eq. 1 at s = 1/2; then a duplicate
    assert run_containers(path.name) == []
