"""Resume bookkeeping with the documented worker double (loop_double.TableRunner): a run stopped in the
middle of an iteration's solver attempts is resumed; episodes recorded before the stop are not played
again, nothing is recorded twice, and the run completes with the counts of an uninterrupted one.
The same path with a real `kill -9` of a `selfplay run` process and Docker is in test_loop_docker.py."""

from __future__ import annotations

import json

import pytest

from selfplay.orchestration.loop import run_selfplay
from selfplay.orchestration.rundir import RunDir, read_trajectories
from selfplay.orchestration.state import LoopState
from selfplay.store import open_store
from tests.selfplay.orchestration.loop_double import TableRunner
from tests.selfplay.orchestration.test_loop import G, config


class Stop(BaseException):
    """Ends the process's loop abruptly (like a kill: no `except Exception` sees it)."""


class StopAt(TableRunner):
    def __init__(self, stop_at: str, **kw):
        super().__init__(**kw)
        self.stop_at = stop_at

    def __call__(self, request):
        if request.episode_id.endswith(self.stop_at):
            raise Stop(request.episode_id)
        return super().__call__(request)


def test_resume_redoes_only_unrecorded_episodes(tmp_path):
    cfg = config(tmp_path, iterations=2)
    cfg = type(cfg)(**{**cfg.__dict__, "rollout": type(cfg.rollout)(**{**cfg.rollout.__dict__, "workers": 1})})
    with pytest.raises(Stop):
        run_selfplay(cfg, runner=StopAt("-it1-solver-2", group_size=G, solved_per_group=1))
    (path,) = (tmp_path / "runs").iterdir()
    run = RunDir(path)
    assert json.loads(run.summary.read_text())["status"] == "running"
    state = LoopState.load(run.state)
    assert state.completed == 1 and 1 in state.progress and state.progress[1].tasks
    with open_store(str(run.store_db)) as store:
        before = store.attempts(run_id=path.name)
    done = {a.trajectory_path.rsplit("#", 1)[1] for a in before}
    # iteration 1: both injector verdicts recorded (their attempts come with the rewards), some attempts
    assert G <= sum(a.role == "solver" for a in before) < 2 * G

    again = TableRunner(group_size=G, solved_per_group=1)
    assert run_selfplay(cfg, resume=path, runner=again) == path
    assert not done & set(again.calls) and not any("-it0-" in c or "injector" in c for c in again.calls)
    assert any(c.endswith("-it1-solver-2") for c in again.calls)
    summary = json.loads(run.summary.read_text())
    assert summary["status"] == "finished" and summary["iterations"] == 2
    assert summary["solver_attempts"] == 2 * G and summary["injector_episodes"] == 4
    with open_store(str(run.store_db)) as store:
        after = store.attempts(run_id=path.name)
        paths = [a.trajectory_path for a in after]
        assert len(paths) == len(set(paths)) == 2 * G + 4  # every episode recorded exactly once
        injector = sorted(round(a.reward, 6) for a in after if a.role == "injector")
        assert injector == [-1.0, -1.0, 0.55, 0.55]
    assert len(list(read_trajectories(run.trajectory_file(1, "solver")))) == G
    assert len(list(read_trajectories(run.trajectory_file(1, "injector")))) == 2
    assert LoopState.load(run.state).progress == {}
    # the resumed iteration's metrics count the attempts played before the stop too (their grades are
    # read back from the trajectory file): one solved of G
    records = [json.loads(line) for line in run.metrics.read_text().splitlines()]
    (it1,) = [r for r in records if r["iteration"] == 1]
    assert it1["solve_rate/all"] == pytest.approx(1 / G)
