"""`rollout.overlap_injectors` with the documented worker double (loop_double.TableRunner): the drawn tasks'
solver attempts run beside the injector episodes, the iteration's valid bugs get a round of their own with
their Eq. 1 rewards, and an overlapped iteration stopped at any point resumes without playing a recorded
episode again."""

from __future__ import annotations

import json
import threading
import time

import pytest

from selfplay.config.run_config import RolloutConfig
from selfplay.orchestration.loop import run_selfplay
from selfplay.orchestration.rundir import RunDir, read_trajectories
from selfplay.orchestration.state import LoopState
from selfplay.store import open_store
from tests.selfplay.orchestration.loop_double import TableRunner, artifact
from tests.selfplay.orchestration.test_loop import G, config
from tests.selfplay.orchestration.test_resume import Stop, StopAt
from tests.selfplay.store.store_data import make_report


def overlap_config(tmp_path, overlap: bool = True, **rollout):
    """One iteration: 2 injector episodes (the double's episode 1 is invalid), 1 task drawn from a store that
    holds one, G attempts each."""
    store_url = str(tmp_path / "tasks.db")
    with open_store(store_url) as store:
        store.record_validation(artifact(101), "toolz", make_report(True, 101), origin="injector")
    settings = dict(injector_episodes=2, solver_tasks=1, workers=4, overlap_injectors=overlap) | rollout
    return config(tmp_path, iterations=1, store_url=store_url, rollout=RolloutConfig(**settings))


class InjectorsWaitForASolver(TableRunner):
    """Each injector episode waits (at most 2 s) for a solver attempt to have started, and notes whether one had."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.solver_started = threading.Event()
        self.saw_solver: list[bool] = []

    def __call__(self, request):
        if request.role == "solver":
            self.solver_started.set()
        else:
            self.saw_solver.append(self.solver_started.wait(2.0))
        return super().__call__(request)


@pytest.mark.parametrize("overlap", [True, False])
def test_drawn_attempts_run_beside_the_injectors_only_when_overlapping(tmp_path, overlap):
    runner = InjectorsWaitForASolver(group_size=G, solved_per_group=1)
    run_selfplay(overlap_config(tmp_path, overlap), runner=runner)
    assert runner.saw_solver == [overlap, overlap]


def test_the_valid_bugs_get_a_round_of_their_own_and_their_rewards(tmp_path):
    cfg = overlap_config(tmp_path)
    path = run_selfplay(cfg, runner=TableRunner(group_size=G, solved_per_group=1))
    run = RunDir(path)
    trajs = list(read_trajectories(run.trajectory_file(0, "solver")))
    by_task: dict[str, set[str]] = {}
    for t in trajs:
        by_task.setdefault(t.metadata["task_id"], set()).add(t.metadata["id"].rsplit("-", 1)[1])
    # the drawn task is task 0 (attempts 0..G-1), the injector's valid bug task 1 (attempts G..2G-1)
    assert sorted(map(sorted, by_task.values())) == [[str(i) for i in range(G)], [str(i) for i in range(G, 2 * G)]]
    with open_store(cfg.store_url) as store:
        rewards = sorted(round(a.reward, 6) for a in store.attempts(run_id=path.name) if a.role == "injector")
    assert rewards == [-1.0, 0.55]  # Eq. 1 at a solve rate of 1/G for the valid bug, its own attempts
    assert LoopState.load(run.state).progress == {}


@pytest.mark.parametrize("stop_at", ["-it0-injector-0", "-it0-solver-1", f"-it0-solver-{G + 1}"],
                         ids=["valid-injector", "drawn-attempt", "fresh-attempt"])
def test_a_stopped_overlapped_iteration_resumes_without_replaying_anything(tmp_path, stop_at):
    cfg = overlap_config(tmp_path)
    with pytest.raises(Stop):
        run_selfplay(cfg, runner=StopAt(stop_at, group_size=G, solved_per_group=1))
    (path,) = (tmp_path / "runs").iterdir()
    run = RunDir(path)
    with open_store(cfg.store_url) as store:
        done = {a.trajectory_path.rsplit("#", 1)[1] for a in store.attempts(run_id=path.name)}
    again = TableRunner(group_size=G, solved_per_group=1)
    run_selfplay(cfg, resume=path, runner=again)
    assert not done & set(again.calls) and any(c.endswith(stop_at) for c in again.calls)
    summary = json.loads(run.summary.read_text())
    assert summary["status"] == "finished" and summary["solver_attempts"] == 2 * G
    with open_store(cfg.store_url) as store:
        after = store.attempts(run_id=path.name)
    paths = [a.trajectory_path for a in after]
    assert len(paths) == len(set(paths)) == 2 * G + 2  # every episode recorded exactly once
    assert sorted(round(a.reward, 6) for a in after if a.role == "injector") == [-1.0, 0.55]


class StopWhileInjecting(StopAt):
    """Stops at a drawn attempt while the injector episodes are still running (they wait for the stop)."""

    def __init__(self, stop_at: str, **kw):
        super().__init__(stop_at, **kw)
        self.stopped = threading.Event()

    def __call__(self, request):
        if request.role == "injector":
            if self.stopped.wait(5.0):
                time.sleep(1.0)  # the stop reaches the main thread (a few ms) before the injectors return
        elif request.episode_id.endswith(self.stop_at):
            self.stopped.set()
        return super().__call__(request)


def test_a_stop_during_the_drawn_round_starts_no_fresh_round(tmp_path):
    """Ctrl-C (or an error) in the drawn round: the injector episodes in flight finish, but their valid bug's
    round is left to the resume instead of being played while the run is stopping."""
    cfg = overlap_config(tmp_path)
    first = StopWhileInjecting("-it0-solver-1", group_size=G, solved_per_group=1)
    with pytest.raises(Stop):
        run_selfplay(cfg, runner=first)
    assert not any(c.endswith(f"-solver-{i}") for c in first.calls for i in range(G, 2 * G))
    (path,) = (tmp_path / "runs").iterdir()
    again = TableRunner(group_size=G, solved_per_group=1)
    run_selfplay(cfg, resume=path, runner=again)
    assert {c.rsplit("-", 1)[1] for c in again.calls if "-solver-" in c} >= {str(i) for i in range(G, 2 * G)}
    assert json.loads(RunDir(path).summary.read_text())["solver_attempts"] == 2 * G


def test_overlap_is_off_by_default_and_on_in_the_default_preset():
    from selfplay.config.loader import load_config

    assert not RolloutConfig().overlap_injectors
    cfg = load_config("default")
    assert cfg.rollout.overlap_injectors and cfg.rollout.workers == cfg.policy.max_batch == 18
