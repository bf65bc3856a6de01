"""`DrainLock`: a lock whose holder can see that someone is waiting for it.

The continuous-batching scheduler holds its policy's lock for as long as its running batch has rows, and
new requests keep joining that batch; a weight swap waiting on a plain lock could starve. With `waiting`
the scheduler stops admitting rows, lets the batch drain, and hands the lock over.
"""

from __future__ import annotations

import threading
import time


class DrainLock:
    """A non-reentrant lock (usable with `with`) that counts the threads blocked in `acquire`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = threading.Lock()
        self._waiting = 0

    @property
    def waiting(self) -> int:
        """Threads blocked in `acquire` right now."""
        return self._waiting

    def acquire(self) -> bool:
        with self._count:
            self._waiting += 1
        try:
            return self._lock.acquire()
        finally:
            with self._count:
                self._waiting -= 1

    def release(self) -> None:
        self._lock.release()

    def locked(self) -> bool:
        return self._lock.locked()

    def let_waiters_in(self, timeout: float = 60.0) -> None:
        """Called right after `release`: wait until the threads that were waiting hold the lock (threading.Lock
        is not fair, so the releasing thread could otherwise take it straight back)."""
        deadline = time.monotonic() + timeout
        while self._waiting and time.monotonic() < deadline:
            time.sleep(0.001)

    def __enter__(self) -> DrainLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
