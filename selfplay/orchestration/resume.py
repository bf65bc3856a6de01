"""`check_resumable`: whether `selfplay run --resume RUN_DIR` can continue a run, checked before anything in
the directory is written (by the CLI, and again by the loop for its other callers).

state.json says which iterations are finished and which tasks an unfinished one drew; without it a resume
would start at iteration 0 and redo (and double count) every episode. A missing state.json is accepted only
when the run did nothing yet (no trajectory file, no checkpoint): then iteration 0 is where it stopped. A
state.json that does not parse is refused; nothing is rebuilt by guessing.

The store and the checkpoints are history too: a resume recounts the run's totals from the store's attempts
and continues the policy from the newest checkpoint. So the store must open and must know the run (another
store, or a new one, would reset every total to 0), and the newest checkpoint the store lists as written
must still be on disk (without it the run would quietly go back to the starting model, policy version 0).
A run that never updated its policy wrote no checkpoint, and none is asked for.
"""

from __future__ import annotations

from pathlib import Path

from selfplay.config.loader import ConfigError, load_config
from selfplay.config.run_config import RunConfig
from selfplay.dir_lock import holder, in_use_message
from selfplay.learner.checkpoint import META, checkpoint_name, latest_checkpoint, read_version
from selfplay.orchestration.rundir import RunDir
from selfplay.orchestration.state import LoopState, StateError


def check_resumable(path: str | Path, config: RunConfig | None = None) -> None:
    """Raise ConfigError naming the run directory, the problem and what to do when it cannot be resumed.
    `config` is the run's resolved config (its saved config.yaml when None)."""
    run = RunDir(Path(path))
    if not run.config.is_file():
        raise ConfigError(f"--resume {path}: not a run directory (no config.yaml); pass the directory "
                          "`selfplay run` printed, runs/<run_id>")
    if who := holder(run.path):
        raise ConfigError(f"--resume {path}: {in_use_message(run.path, who)}")
    state = _read_state(run, path)
    store_url = (config or load_config(run.config)).store_url
    written = _store_checkpoints(run, path, store_url, state)
    if state is not None and written:
        _check_checkpoint(run, path, state, max(written))


def _read_state(run: RunDir, path: str | Path) -> LoopState | None:
    """The run's loop state; None when it has none because it did nothing yet."""
    if run.state.is_file():
        try:
            return LoopState.load(run.state)
        except StateError as exc:
            raise ConfigError(f"--resume {path}: {exc}") from None
    done = sorted(run.trajectories.glob("*.jsonl.gz")) if run.trajectories.is_dir() else []
    checkpoints = sorted(p for p in run.checkpoints.glob("v*") if p.is_dir()) if run.checkpoints.is_dir() else []
    if done or checkpoints:
        raise ConfigError(f"--resume {path}: state.json is missing, but the run has {len(done)} trajectory "
                          f"file(s) and {len(checkpoints)} checkpoint(s); resuming without it would redo "
                          "finished iterations from 0. Restore state.json from a backup, or start a new run "
                          f"(its config: selfplay run --config {run.config})")
    return None


def _did_work(state: LoopState) -> bool:
    return bool(state.completed or state.progress or state.policy_version or any(state.counters.values()))


def _store_checkpoints(run: RunDir, path: str | Path, store_url: str | None,
                       state: LoopState | None) -> list[int]:
    """The policy versions the store lists as checkpointed for the run, after checking that the store
    opens and knows the run. Opened without migrating: the check writes nothing."""
    from sqlalchemy.exc import SQLAlchemyError

    from selfplay.store import StoreError, open_store  # lazy: SQLAlchemy

    run_id = state.run_id if state is not None else run.run_id
    where = _shown(store_url) if store_url else run.store_db.name
    if store_url is None and not run.store_db.is_file():
        if state is not None and _did_work(state):
            raise ConfigError(f"--resume {path}: {where} is missing, but state.json records work of run {run_id} "
                              "(its attempts and checkpoints are listed there); restore store.db from a backup, "
                              "or start a new run")
        return []  # never opened: the run makes it
    try:
        with open_store(store_url or str(run.store_db), create=False, upgrade=False) as store:
            known = store.get_run(run_id) is not None
            written = [c.version for c in store.checkpoints(run_id)]
    except (StoreError, SQLAlchemyError) as exc:
        raise ConfigError(f"--resume {path}: {where} is not a readable store ({_cause(exc)}); restore it from a "
                          "backup, or start a new run") from None
    if not known and state is not None and _did_work(state):
        raise ConfigError(f"--resume {path}: {where} holds no record of run {run_id}, whose state.json records "
                          f"{state.completed} finished iteration(s); it is not this run's store. Restore the "
                          "run's own, or start a new run")
    return written


def _shown(url: str) -> str:
    """A store URL as messages show it: without its password."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True) if "://" in url else url
    except Exception:  # not a URL SQLAlchemy parses: the store's own error says so
        return url.split("@")[-1]


def _cause(exc: Exception) -> str:
    """The database's own words for what is wrong (the store's messages go on to a `--store` remedy, an
    option `selfplay run` does not have: only their first clause is kept)."""
    orig = getattr(exc.__cause__, "orig", None) or getattr(exc, "orig", None)
    text = str(orig) if orig is not None else str(exc).split(";")[0]
    return (text.strip().splitlines() or [type(exc).__name__])[0]


def _check_checkpoint(run: RunDir, path: str | Path, state: LoopState, needed: int) -> None:
    """The newest checkpoint on disk must be at least the newest one the run wrote (the store's record; the
    state may be behind it after a kill between the two writes, or ahead of it with checkpoint_every > 1)."""
    latest = latest_checkpoint(run.checkpoints)
    if latest is not None and read_version(latest) >= needed:
        return
    name = checkpoint_name(needed)
    complete = (run.checkpoints / name / META).is_file()
    problem = "checkpoints/latest does not name it" if complete else f"checkpoints/{name} is missing"
    raise ConfigError(f"--resume {path}: state.json says policy version {state.policy_version} and the run "
                      f"wrote checkpoint {name}, but {problem}; restore it, or start a new run (resuming "
                      "would continue from an older policy and rewrite the run's history)")
