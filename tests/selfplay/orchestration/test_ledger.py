"""The run ledger: every change is saved atomically, a change that raised is not, counters add up, and
events reach the observer (whose failure never ends the run)."""

from __future__ import annotations

import threading

import pytest

from selfplay.orchestration.ledger import RunLedger
from selfplay.orchestration.state import IterationProgress, LoopState


def ledger(tmp_path, observer=None):
    return RunLedger(LoopState("r"), tmp_path / "state.json", tmp_path, observer)


def test_a_change_is_saved_and_a_change_that_raised_is_not(tmp_path):
    book = ledger(tmp_path)
    with book.change() as state:
        state.progress[0] = IterationProgress(0, 3)
    assert LoopState.load(tmp_path / "state.json").progress[0].policy_version == 3
    with pytest.raises(RuntimeError), book.change() as state:
        state.completed = 7
        raise RuntimeError("half a change")
    assert LoopState.load(tmp_path / "state.json").completed == 0


def test_counts_from_many_threads_add_up_and_reach_the_summary(tmp_path):
    book = ledger(tmp_path)

    def work():
        for _ in range(50):
            book.count(solver_attempts=1, solved=1)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    saved = LoopState.load(tmp_path / "state.json").counters
    assert saved["solver_attempts"] == saved["solved"] == 200
    summary = book.summary()
    assert summary["solver_attempts"] == 200 and summary["status"] == "running" and summary["run_id"] == "r"


def test_events_reach_the_observer_and_a_failing_observer_is_logged_not_raised(tmp_path, caplog):
    seen = []

    class Observer:
        def on_event(self, event):
            seen.append((event.kind, event.iteration, event.message, event.summary["run_id"]))
            raise ValueError("display broke")

    ledger(tmp_path, Observer()).emit("phase", 2, "rollouts")
    assert seen == [("phase", 2, "rollouts", "r")]
    assert "run observer failed on phase" in caplog.text
