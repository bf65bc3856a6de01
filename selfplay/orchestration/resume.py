"""`check_resumable`: whether `selfplay run --resume RUN_DIR` can continue a run, checked before it starts.

state.json says which iterations are finished and which tasks an unfinished one drew; without it a resume
would start at iteration 0 and redo (and double count) every episode. A missing state.json is accepted only
when the run did nothing yet (no trajectory file, no checkpoint): then iteration 0 is where it stopped. A
state.json that does not parse is refused; nothing is rebuilt by guessing.
"""

from __future__ import annotations

from pathlib import Path

from selfplay.config.loader import ConfigError
from selfplay.orchestration.rundir import RunDir
from selfplay.orchestration.state import LoopState, StateError


def check_resumable(path: str | Path) -> None:
    """Raise ConfigError naming the run directory, the problem and what to do when it cannot be resumed."""
    run = RunDir(Path(path))
    if not run.config.is_file():
        raise ConfigError(f"--resume {path}: not a run directory (no config.yaml); pass the directory "
                          "`selfplay run` printed, runs/<run_id>")
    if run.state.is_file():
        try:
            LoopState.load(run.state)
        except StateError as exc:
            raise ConfigError(f"--resume {path}: {exc}") from None
        return
    done = sorted(run.trajectories.glob("*.jsonl.gz")) if run.trajectories.is_dir() else []
    checkpoints = sorted(p for p in run.checkpoints.glob("v*") if p.is_dir()) if run.checkpoints.is_dir() else []
    if done or checkpoints:
        raise ConfigError(f"--resume {path}: state.json is missing, but the run has {len(done)} trajectory "
                          f"file(s) and {len(checkpoints)} checkpoint(s); resuming without it would redo "
                          "finished iterations from 0. Restore state.json from a backup, or start a new run "
                          f"(its config: selfplay run --config {run.config})")
