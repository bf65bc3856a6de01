"""`RunLedger`: a run's mutable record (loop state, counters, status, events) behind one lock.

The loop owns it and hands the same object to the rollouts and to seeding, so every counter and every
progress note goes through `change()` (lock, edit, one atomic save of state.json) or `count()`, and every
progress event through `emit()`. Nothing else writes state.json.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from sandboxes.reaper import registry
from selfplay.code_revision import code_revision
from selfplay.orchestration.state import LoopState

EVENTS_LOGGER = "selfplay.orchestration.loop.events"
"""The logger of the loop's progress events (also delivered to the observer), kept apart so a display can
leave them out of its console log while logs/run.log still records them."""
events_log = logging.getLogger(EVENTS_LOGGER)
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunEvent:
    kind: str
    """phase | episode | iteration | learner | checkpoint | done."""
    iteration: int
    message: str
    summary: Mapping[str, Any]
    """The current summary.json content."""


class RunObserver(Protocol):
    def on_event(self, event: RunEvent) -> None: ...


class RunLedger:
    """State, counters, status and events of one run process; thread-safe (the async loop plays the next
    iteration's rollouts while the learner trains)."""

    def __init__(self, state: LoopState, state_path: Path, run_dir: Path,
                 observer: RunObserver | None = None) -> None:
        self.state, self.state_path, self.run_dir, self.observer = state, state_path, run_dir, observer
        self.lock = threading.RLock()
        self.status: str = "running"
        self.error: str | None = None
        self.tasks_in_store: int | None = None
        """Counted when summary.json is written (a scan of a large store is not free per event)."""
        self.warm_start: dict[str, Any] | None = None
        """Which warm start the run started from (`components.warm_start_record`)."""
        self.stopped_by: str | None = None
        """What ended the loop: "iterations" or "max_hours" (None while it runs, or after a failure)."""
        self._t_start = self._opened = time.monotonic()

    @property
    def run_id(self) -> str:
        return self.state.run_id

    @contextmanager
    def change(self) -> Iterator[LoopState]:
        """Edit the state under the lock; saved atomically when the block ends without an error (a block
        that raised leaves state.json as it was, so a resume never sees half a change)."""
        with self.lock:
            yield self.state
            self.state.save(self.state_path)

    def count(self, **counts: int) -> None:
        """Add to run totals, then save."""
        with self.change() as state:
            for key, n in counts.items():
                state.count(key, int(n))

    def save(self) -> None:
        with self.change():
            pass

    def wall_s(self) -> float:
        """This run's wall time over every process of it."""
        return self.state.wall_s + time.monotonic() - self._t_start

    def bank_wall_time(self) -> None:
        """Fold this process's wall time into the state (before it is saved for the last time)."""
        with self.lock:
            self.state.wall_s = self.wall_s()
            self._t_start = time.monotonic()

    def summary(self) -> dict[str, Any]:
        """summary.json's content."""
        with self.lock:
            s = self.state
            return {"run_id": s.run_id, "iterations": s.completed, **s.counters,
                    "policy_version": s.policy_version, "tasks_in_store": self.tasks_in_store,
                    "status": self.status, "error": self.error, "started_at": s.started_at,
                    "updated_at": time.time(), "wall_s": self.wall_s(), "run_dir": str(self.run_dir),
                    "warm_start": self.warm_start, "stopped_by": self.stopped_by, "code": code_revision()}

    def phase(self, iteration: int, message: str) -> None:
        """Begin a phase of `iteration` (a "phase" event): a point where the run may stop. A Ctrl-C raises
        KeyboardInterrupt in whatever the main thread runs at that instant; when that is a weakref callback
        or a finaliser, Python prints "Exception ignored" and goes on, and the run would finish as if the
        signal had never come. The signal handler still marks the time (`sandboxes.reaper`), so a signal
        taken since this process opened the run stops it here instead."""
        self.stop_if_signalled(f"iteration {iteration}'s phase {message!r}")
        self.emit("phase", iteration, message)

    def stop_if_signalled(self, before: str) -> None:
        """Raise KeyboardInterrupt when a signal arrived since this process opened the run (see `phase`):
        called at each phase and once more after the last, so a signal lost in the run's last phase ends it
        interrupted, not finished."""
        if registry.signalled_since(self._opened):
            raise KeyboardInterrupt(f"a signal arrived before {before}")

    def emit(self, kind: str, iteration: int, message: str, summary: Mapping[str, Any] | None = None) -> None:
        """Log a progress event and deliver it to the observer (whose failure never ends the run)."""
        events_log.info("[%s] it %d: %s", kind, iteration, message)
        if self.observer is not None:
            try:
                self.observer.on_event(RunEvent(kind, iteration, message, summary or self.summary()))
            except Exception:
                log.exception("run observer failed on %s", kind)
