"""Resume bookkeeping with the documented worker double (loop_double.TableRunner): a run stopped in the
middle of an iteration's solver attempts is resumed; episodes recorded before the stop are not played
again, nothing is recorded twice, and the run completes with the counts of an uninterrupted one.
The same path with a real `kill -9` of a `selfplay run` process and Docker is in test_loop_docker.py."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

import pytest

from selfplay.config.loader import ConfigError
from selfplay.learner.checkpoint import META, checkpoint_name
from selfplay.orchestration.loop import RunError, run_selfplay
from selfplay.orchestration.resume import check_resumable
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


# --- resumes refused before anything is written, and what a copied run keeps ---------------------------------

def finished_run(tmp_path, name: str = "t"):
    """A finished one-iteration run (no learner) and its config, for resuming with iterations=2."""
    cfg = config(tmp_path, iterations=1, name=name)
    path = run_selfplay(cfg, runner=TableRunner(group_size=G, solved_per_group=1))
    return path, replace(cfg, iterations=2)


def files(path):
    return {p.relative_to(path): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def add_checkpoint(path, version: int) -> None:
    """What a learner update leaves of policy `version` (`PolicyLearner.save`): checkpoints/v<version> with its
    selfplay_learner.json, `latest` naming it, the store's record, and state.json at that version. The run
    played without a learner, so the weights are left out: a resume without one reads only these."""
    run = RunDir(path)
    ckpt = run.checkpoints / checkpoint_name(version)
    ckpt.mkdir()
    (ckpt / META).write_text(json.dumps({"policy_version": version, "model_dir": "m", "state": {}}) + "\n")
    (run.checkpoints / "latest").write_text(ckpt.name + "\n")
    with open_store(str(run.store_db)) as store:
        store.register_checkpoint(path.name, version, ckpt)
    state = LoopState.load(run.state)
    state.policy_version = version
    state.save(run.state)


def test_a_missing_checkpoint_is_refused_and_nothing_is_rewritten(tmp_path):
    path, cfg = finished_run(tmp_path)
    check_resumable(path)  # no update yet: no checkpoint, and none is asked for
    add_checkpoint(path, 2)
    check_resumable(path)
    shutil.rmtree(RunDir(path).checkpoints / "v000002")  # as a user, or a cleanup of the wrong folder, would
    before = files(path)
    with pytest.raises(ConfigError, match=r"state.json says policy version 2 .* but checkpoints/v000002 is "
                                          r"missing; restore it, or start a new run"):
        run_selfplay(cfg, resume=path, runner=TableRunner(group_size=G, solved_per_group=1))
    assert files(path) == before
    # put back, the run resumes at its version
    add_checkpoint(path, 2)
    run_selfplay(cfg, resume=path, runner=TableRunner(group_size=G, solved_per_group=1))
    summary = json.loads(RunDir(path).summary.read_text())
    assert summary["status"] == "finished" and summary["policy_version"] == 2 and summary["iterations"] == 2


def test_an_unreadable_store_is_refused_and_nothing_is_rewritten(tmp_path):
    path, cfg = finished_run(tmp_path)
    run = RunDir(path)
    for extra in ("store.db-wal", "store.db-shm"):
        (path / extra).unlink(missing_ok=True)
    run.store_db.write_bytes(bytes(range(256)) * 16)
    before = files(path)
    with pytest.raises(ConfigError, match=r"store.db is not a readable store \(file is not a database\); "
                                          r"restore it from a backup"):
        run_selfplay(cfg, resume=path, runner=TableRunner(group_size=G, solved_per_group=1))
    assert files(path) == before


def test_another_runs_store_is_refused(tmp_path):
    path, cfg = finished_run(tmp_path)
    other, _ = finished_run(tmp_path / "other", name="u")
    shutil.copy(RunDir(other).store_db, RunDir(path).store_db)
    for extra in ("store.db-wal", "store.db-shm"):
        (path / extra).unlink(missing_ok=True)
    before = files(path)
    with pytest.raises(ConfigError, match=f"store.db holds no record of run {path.name}, whose state.json"):
        run_selfplay(cfg, resume=path, runner=TableRunner(group_size=G, solved_per_group=1))
    assert files(path) == before


def test_a_resume_failing_before_its_loop_keeps_the_summary(tmp_path):
    path, cfg = finished_run(tmp_path)
    run = RunDir(path)
    summary = run.summary.read_bytes()
    run.metrics.unlink()
    run.metrics.mkdir()  # the metrics file cannot be opened: setup fails after the checks passed
    with pytest.raises(RunError, match="Is a directory") as exc:
        run_selfplay(cfg, resume=path, runner=TableRunner(group_size=G, solved_per_group=1))
    assert run.summary.read_bytes() == summary
    # the advice says what a resume can change, and that the finished iterations are kept
    assert f"then `selfplay run --resume {path}` (1 iteration(s) done are kept" in str(exc.value)
    assert "may change only iterations, max_hours" in str(exc.value)
    assert "run t-" in (run.logs / "run.log").read_text()  # the failure is in the log


def test_a_new_run_failing_before_an_iteration_finished_says_a_new_run_loses_nothing(tmp_path, monkeypatch):
    """A cause in the config (a model that does not load, say) cannot be fixed by `--resume`, which may change
    only a few keys: the failure says so, and that a new run loses nothing when no iteration finished. The
    executor's build is replaced by one that raises, as a dead Docker engine or a bad model would."""
    from selfplay.orchestration import loop

    def broken(*args, **kwargs):
        raise RuntimeError("the engine is down")

    monkeypatch.setattr(loop, "build_executor", broken)
    with pytest.raises(RunError, match="the engine is down") as exc:
        run_selfplay(config(tmp_path), runner=TableRunner(group_size=G, solved_per_group=1))
    assert "start a new run with it fixed: no iteration of this one finished, so nothing is lost" in str(exc.value)


def test_a_copied_run_keeps_its_totals(tmp_path):
    """The run's id is in state.json and the store; a copy under another name resumes with both."""
    path, cfg = finished_run(tmp_path)
    copy = tmp_path / "copy"
    shutil.copytree(path, copy)
    run_selfplay(cfg, resume=copy, runner=TableRunner(group_size=G, solved_per_group=1))
    summary = json.loads(RunDir(copy).summary.read_text())
    assert summary["run_id"] == path.name and summary["iterations"] == 2
    assert summary["solver_attempts"] == 2 * G and summary["solved"] == 2
    with open_store(str(RunDir(copy).store_db)) as store:
        assert len(store.attempts(run_id=path.name)) == 2 * G + 4 and not store.attempts(run_id="copy")
