"""`DirLock`: one process at a time works in a run directory, or in an evaluation's output folder.

A second `selfplay run --resume RUN` while RUN is still running (a second terminal, a run taken for dead)
would reap the first process's sandbox containers, play the same iteration's episodes again and write the
same state.json, store attempts and trajectory files; a second `selfplay eval swebench --out DIR` would solve
the same instances again (GPU hours) and append to the same predictions. So the command holds an exclusive
advisory lock on `DIR/run.lock` from the moment it makes or opens the folder until it is done. The kernel
drops the lock when the process dies, `kill -9` included, so a killed run resumes at once; the file alone
proves nothing.
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


class DirInUseError(SelfPlayError):
    """The folder is held by another live process; the message names it and what to do."""


def holder(folder: Path) -> str | None:
    """Who holds `folder`'s lock ("pid N, since T"), or None when nobody does. Opens the lock file read-only
    and creates nothing: a folder without one (made before the lock, or never used) is free."""
    try:
        handle = open(folder / LOCK_NAME, encoding="utf-8")
    except OSError:  # none (no process ever locked it), or unreadable: `acquire` decides
        return None
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return handle.read().strip() or "another process"
        except OSError:  # a filesystem without locks: `acquire` says so
            pass
        return None


def in_use_message(folder: Path, who: str, command: str = "selfplay run", again: str | None = None) -> str:
    """What to tell a user whose `command` found `folder` held by `who`; `again`: how to continue after."""
    again = again or f"selfplay run --resume {folder}"
    return (f"{folder} is in use by another `{command}` ({who}); wait for it to end, or stop it (Ctrl-C), "
            f"then `{again}`")


class DirLock:
    """Held from `acquire` until `release` (or the process's death). Keep a reference: a lock that is
    garbage-collected closes its file and is released."""

    def __init__(self, handle: IO[str]) -> None:
        self._handle: IO[str] | None = handle

    @classmethod
    def acquire(cls, folder: Path, command: str = "selfplay run", again: str | None = None) -> DirLock:
        """Take `folder`'s lock, or raise DirInUseError naming its holder (`in_use_message`). Never waits."""
        handle = open(folder / LOCK_NAME, "a+", encoding="utf-8")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            who = handle.read().strip() or "another process"
            handle.close()
            raise DirInUseError(in_use_message(folder, who, command, again)) from None
        except OSError as exc:  # e.g. ENOLCK on a network filesystem without lock support
            log.warning("cannot lock %s (%s): nothing stops a second process from working in %s meanwhile",
                        folder / LOCK_NAME, exc.strerror or exc, folder)
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
