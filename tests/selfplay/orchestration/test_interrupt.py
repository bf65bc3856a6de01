"""Ctrl-C in the middle of a run (a KeyboardInterrupt raised inside an episode, as SIGINT raises it in the
main thread) leaves summary.json and the log saying "interrupted", not "running", and the run resumable."""

from __future__ import annotations

import json

import pytest

from selfplay.orchestration.loop import run_selfplay
from selfplay.orchestration.resume import check_resumable
from selfplay.orchestration.rundir import RunDir
from tests.selfplay.orchestration.loop_double import TableRunner
from tests.selfplay.orchestration.test_loop import G, config


class InterruptAt(TableRunner):
    def __init__(self, stop_at: str, **kw):
        super().__init__(**kw)
        self.stop_at = stop_at

    def __call__(self, request):
        if request.episode_id.endswith(self.stop_at):
            raise KeyboardInterrupt
        return super().__call__(request)


def test_ctrl_c_records_interrupted_and_the_run_stays_resumable(tmp_path):
    cfg = config(tmp_path, iterations=2)
    cfg = type(cfg)(**{**cfg.__dict__, "rollout": type(cfg.rollout)(**{**cfg.rollout.__dict__, "workers": 1})})
    with pytest.raises(KeyboardInterrupt):
        run_selfplay(cfg, runner=InterruptAt("-it1-solver-1", group_size=G, solved_per_group=1))
    (path,) = (tmp_path / "runs").iterdir()
    run = RunDir(path)
    summary = json.loads(run.summary.read_text())
    assert summary["status"] == "interrupted" and summary["iterations"] == 1, summary
    assert (run.logs / "run.log").read_text().rstrip().endswith("run interrupted")
    check_resumable(path)  # state.json is there and reads back: no ConfigError
