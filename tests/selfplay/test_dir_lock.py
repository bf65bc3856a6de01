"""One process at a time in a run directory or an evaluation's folder (`selfplay.dir_lock`): a resume of a
run that is still running is refused before it reaps the live run's containers or replays its episodes, an
evaluation into a folder another one is writing is refused before it solves anything, and a process killed
with SIGKILL leaves nothing that blocks the next. Real processes, real flock; the loop with the documented
worker double (loop_double.TableRunner)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from selfplay.cli import app
from selfplay.config.loader import ConfigError
from selfplay.dir_lock import DirInUseError, DirLock, holder
from selfplay.orchestration.loop import run_selfplay
from selfplay.orchestration.resume import check_resumable
from tests.selfplay.orchestration.loop_double import TableRunner
from tests.selfplay.orchestration.test_loop import G, config

HOLD = ("import sys, time; from pathlib import Path; from selfplay.dir_lock import DirLock; "
        "lock = DirLock.acquire(Path(sys.argv[1])); print('held', flush=True); time.sleep(600)")


def _hold(folder):
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(folder)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_live_holder_in_another_process_is_named_and_a_killed_one_blocks_nothing(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("name: x\n")
    assert holder(run) is None and not (run / "run.lock").exists()  # the check creates nothing
    proc = _hold(run)
    try:
        assert holder(run).startswith(f"pid {proc.pid}, since ")
        with pytest.raises(DirInUseError, match=rf"in use by another `selfplay run` \(pid {proc.pid}, since"):
            DirLock.acquire(run)
        with pytest.raises(ConfigError, match=rf"--resume {run}: {run} is in use .*pid {proc.pid}"):
            check_resumable(run)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert holder(run) is None  # the kernel dropped the lock with the process; the file stays, harmless
    lock = DirLock.acquire(run)
    lock.release()


class ResumesMidRun(TableRunner):
    """Tries `selfplay run --resume` on its own run from inside an episode, as a second terminal would."""

    def __init__(self, cfg, **kw):
        super().__init__(**kw)
        self.cfg, self.refused, self.tried = cfg, [], threading.Lock()

    def __call__(self, request):
        if self.tried.acquire(blocking=False):  # once, by whichever worker thread comes first
            (path,) = Path(self.cfg.runs_dir).iterdir()
            with pytest.raises(ConfigError) as info:
                run_selfplay(self.cfg, resume=path, runner=TableRunner(group_size=G, solved_per_group=1))
            self.refused.append(str(info.value))
        return super().__call__(request)


def test_a_resume_of_a_running_run_is_refused_and_the_run_goes_on(tmp_path):
    cfg = config(tmp_path)
    runner = ResumesMidRun(cfg, group_size=G, solved_per_group=1)
    path = run_selfplay(cfg, runner=runner)
    assert len(runner.refused) == 1 and "is in use by another `selfplay run`" in runner.refused[0]
    summary = json.loads((path / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["iterations"] == 2, summary
    assert holder(path) is None  # released on close: the finished run can be resumed (and reports so)


def test_an_evaluation_into_a_folder_in_use_is_refused_before_it_writes(tmp_path):
    from selfplay.eval.runner import EvalConfig, evaluate

    out = tmp_path / "eval"
    out.mkdir()
    proc = _hold(out)
    try:
        with pytest.raises(DirInUseError, match=rf"in use by another `selfplay eval swebench` \(pid {proc.pid}.*"
                                                rf"then `selfplay eval swebench \.\.\. --out {out}`"):
            evaluate([], lambda _iid: None, EvalConfig(out_dir=out))
        assert sorted(p.name for p in out.iterdir()) == ["run.lock"]  # no dataset.jsonl, no report
        res = CliRunner().invoke(app, ["eval", "swebench", "--dataset", "none.jsonl", "--out", str(out)],
                                 env={"COLUMNS": "400"})  # refused before the dataset or the model loads
        assert res.exit_code == 2 and f"pid {proc.pid}" in " ".join(res.output.split()), res.output
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    evaluate([], lambda _iid: None, EvalConfig(out_dir=out, runs=1))  # free again: an empty evaluation runs
    assert (out / "report.json").is_file() and holder(out) is None
