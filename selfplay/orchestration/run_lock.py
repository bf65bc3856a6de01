"""`RunLock`: one process at a time works in a run directory.

A second `selfplay run --resume RUN` while RUN is still running (a second terminal, a run taken for dead)
would reap the first process's sandbox containers, play the same iteration's episodes again and write the
same state.json, store attempts and trajectory files. So a run holds an exclusive advisory lock on
`RUN/run.lock` from the moment its directory is made or opened until it closes. The kernel drops the lock
when the process dies, `kill -9` included, so a crashed run is resumable at once; a lock file alone proves
nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import time
from pathlib import Path
from typing import IO

from selfplay.errors import SelfPlayError

LOCK_NAME = "run.lock"
log = logging.getLogger(__name__)


class RunInUseError(SelfPlayError):
    """The run directory is held by another live process; the message names it and what to do."""


def holder(run_dir: Path) -> str | None:
    """Who holds `run_dir`'s lock ("pid N, since T"), or None when nobody does. Opens the lock file read-only
    and creates nothing: a run directory that has none (a run from before the lock, or none at all) is free."""
    path = run_dir / LOCK_NAME
    try:
        handle = open(path, encoding="utf-8")
    except OSError:  # none (no process ever locked it), or unreadable: `acquire` decides
        return None
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return handle.read().strip() or "another process"
        except OSError:  # a filesystem without locks: `acquire` says so
            return None
        return None


def in_use_message(run_dir: Path, who: str) -> str:
    return (f"run directory {run_dir} is in use by another `selfplay run` ({who}); wait for it to end, or stop "
            f"it (Ctrl-C), then `selfplay run --resume {run_dir}`")


class RunLock:
    """Held from `acquire` until `release` (or the process's death)."""

    def __init__(self, handle: IO[str]) -> None:
        self._handle: IO[str] | None = handle

    @classmethod
    def acquire(cls, run_dir: Path) -> RunLock:
        """Take `run_dir`'s lock, or raise RunInUseError naming its holder. Never waits."""
        handle = open(run_dir / LOCK_NAME, "a+", encoding="utf-8")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            who = handle.read().strip() or "another process"
            handle.close()
            raise RunInUseError(in_use_message(run_dir, who)) from None
        except OSError as exc:  # e.g. ENOLCK on a network filesystem without lock support
            log.warning("cannot lock %s (%s): nothing stops a second process from resuming this run while it "
                        "runs", run_dir / LOCK_NAME, exc.strerror or exc)
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}, since {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}\n")
        handle.flush()
        return cls(handle)

    def release(self) -> None:
        if self._handle is not None:
            with contextlib.suppress(OSError):  # never locked (see acquire); closing releases it anyway
                fcntl.flock(self._handle, fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None
