"""`RunDir`: the layout of `runs/<run_id>/` and the file writes a long run depends on.

Every file a crash could leave half-written is written under a temporary name and renamed (summary.json,
state.json); trajectories go to gzip JSON lines, one gzip member per write, so a `kill -9` mid-write loses
at most the trailing member (the reader stops there). Retention keeps disk bounded over days: the newest
trajectory files and the newest checkpoints (always the one `latest` names).
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import shutil
import time
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_scaffold.trajectory import Trajectory
from selfplay.errors import SelfPlayError

log = logging.getLogger(__name__)
LOGGED = ("selfplay", "agent_scaffold", "sandboxes", "repos", "py.warnings")
"""Loggers a run's logs/run.log records."""


class RunDirError(SelfPlayError):
    """A run directory cannot be made; the message names it and the key to change."""


def new_run_id(name: str, now: float | None = None) -> str:
    """`<name>-<YYYYmmdd-HHMMSS>` in UTC."""
    return f"{name}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime(now if now is not None else time.time()))}"


def write_json_atomic(path: Path, data: Any) -> None:
    """Write `data` as JSON to `path` so readers see the old or the new file, never a torn one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True, default=str) + "\n")
    os.replace(tmp, path)


@dataclass(frozen=True)
class RunDir:
    """Paths inside one run directory (see docs: config.yaml, store.db, trajectories/, checkpoints/,
    metrics.jsonl, logs/, summary.json, state.json, and run.lock, `selfplay.dir_lock.DirLock`'s)."""

    path: Path

    @classmethod
    def create(cls, runs_dir: str | Path, run_id: str) -> RunDir:
        path = Path(runs_dir) / run_id
        if path.exists():
            raise FileExistsError(f"run directory {path} exists already; resume it with `selfplay run --resume "
                                  f"{path}` or pick another name")
        run = cls(path)
        try:
            for sub in (run.trajectories, run.checkpoints, run.logs):
                sub.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RunDirError(f"cannot create run directory {path} ({exc.strerror or exc}); set runs_dir=DIR to "
                              "a folder you can write") from exc
        return run

    @classmethod
    def open(cls, path: str | Path) -> RunDir:
        run = cls(Path(path))
        if not run.config.is_file():
            raise FileNotFoundError(f"{path} is not a run directory (no config.yaml); pass the directory "
                                    "`selfplay run` printed, runs/<run_id>")
        for sub in (run.trajectories, run.checkpoints, run.logs):
            sub.mkdir(parents=True, exist_ok=True)
        return run

    @property
    def run_id(self) -> str:
        return self.path.name

    @property
    def config(self) -> Path:
        return self.path / "config.yaml"

    @property
    def store_db(self) -> Path:
        return self.path / "store.db"

    @property
    def trajectories(self) -> Path:
        return self.path / "trajectories"

    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    @property
    def logs(self) -> Path:
        return self.path / "logs"

    @property
    def metrics(self) -> Path:
        return self.path / "metrics.jsonl"

    @property
    def summary(self) -> Path:
        return self.path / "summary.json"

    @property
    def state(self) -> Path:
        return self.path / "state.json"

    def trajectory_file(self, iteration: int, role: str) -> Path:
        return self.trajectories / f"it{iteration:05d}-{role}.jsonl.gz"

    def read_summary(self) -> dict[str, Any]:
        return json.loads(self.summary.read_text()) if self.summary.is_file() else {}


def append_trajectories(path: Path, trajectories: Iterable[Trajectory]) -> None:
    """Append one gzip member holding these trajectories (one `Trajectory.to_json()` per line)."""
    data = "".join(t.to_json() + "\n" for t in trajectories).encode()
    if not data:
        return
    with open(path, "ab") as fh:
        fh.write(gzip.compress(data, compresslevel=6))
        fh.flush()
        os.fsync(fh.fileno())


def recorded_episode(attempt_path: str | None) -> str | None:
    """The episode id of a store attempt's `trajectory_path` (`file#episode id`: one episode of an iteration's
    trajectory file)."""
    return attempt_path.rsplit("#", 1)[1] if attempt_path and "#" in attempt_path else None


def read_trajectories(path: Path) -> Iterator[Trajectory]:
    """The trajectories of a file written by `append_trajectories`; a torn trailing member (a crash
    mid-write) ends the file with a warning instead of an error."""
    if not path.is_file():
        return
    try:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    yield Trajectory.from_json(line)
    except (EOFError, gzip.BadGzipFile, zlib.error, json.JSONDecodeError) as exc:
        log.warning("%s ends in a torn write (%s); the trajectories before it are kept", path, exc)


def prune_files(directory: Path, keep: int, pattern: str = "*.jsonl.gz") -> list[Path]:
    """Delete all but the `keep` newest files matching `pattern` (by name: names sort by iteration);
    keep 0 keeps all. Returns the deleted paths."""
    if keep <= 0:
        return []
    files = sorted(directory.glob(pattern))
    doomed = files[:-keep] if len(files) > keep else []
    for f in doomed:
        f.unlink(missing_ok=True)
    return doomed


def prune_checkpoints(root: Path, keep: int) -> list[Path]:
    """Delete all but the `keep` newest checkpoint directories (v<version>); the one `latest` names is
    always kept. Returns the deleted paths."""
    pointer = root / "latest"
    newest = pointer.read_text().strip() if pointer.is_file() else None
    dirs = sorted(p for p in root.glob("v*") if p.is_dir())
    doomed = [p for p in dirs[: max(0, len(dirs) - max(keep, 1))] if p.name != newest]
    for p in doomed:
        shutil.rmtree(p, ignore_errors=True)
        log.info("retention: removed checkpoint %s", p)
    return doomed


def attach_log_file(path: Path, level: int = logging.INFO) -> logging.Handler:
    """Send the project's log records (selfplay, agent_scaffold, sandboxes, repos) and Python warnings
    (`py.warnings`, once `logging.captureWarnings` is on) to `path`; detach the returned handler with
    `detach_log_file` when the run ends."""
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setLevel(level)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(threadName)s %(name)s: %(message)s"))
    for name in LOGGED:
        logger = logging.getLogger(name)
        logger.addHandler(handler)
        if logger.getEffectiveLevel() > level:
            logger.setLevel(level)
    return handler


def detach_log_file(handler: logging.Handler) -> None:
    for name in LOGGED:
        logging.getLogger(name).removeHandler(handler)
    handler.close()
