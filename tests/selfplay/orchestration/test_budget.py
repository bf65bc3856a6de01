"""`max_hours`: the run finishes within its budget, projecting each iteration by the slowest so far. The
projection is pure (`fits_budget`); the loop test runs the real loop with the worker's documented test
double (loop_double.TableRunner) on a clock that advances only when the double says an iteration took
time, so the figures are exact."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import pytest

from selfplay.orchestration import ledger, loop
from selfplay.orchestration.budget import fits_budget
from selfplay.orchestration.loop import run_selfplay
from selfplay.orchestration.rundir import RunDir
from tests.selfplay.orchestration.loop_double import TableRunner
from tests.selfplay.orchestration.test_loop import G, config


def test_fits_budget():
    assert fits_budget(0, 0, 60)
    assert fits_budget(30, 30, 60)  # ends exactly at the budget
    assert not fits_budget(31, 30, 60)
    assert fits_budget(59, 0, 60)  # no iteration finished yet: start while the budget is not spent
    assert not fits_budget(60, 0, 60) and not fits_budget(61, 0, 60)


@dataclass
class Clock:
    """`time` for the loop and the ledger: monotonic time moves only through `advance`."""

    now: float = 1000.0

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return time.time()

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class TimedRunner(TableRunner):
    """Each iteration takes `iteration_s` of the clock (charged on its first injector episode)."""

    clock: Clock | None = None
    iteration_s: float = 100.0

    def __call__(self, request):
        if request.role == "injector" and request.episode_id.endswith("-0"):
            self.clock.advance(self.iteration_s)
        return super().__call__(request)


@pytest.fixture()
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(loop, "time", c)
    monkeypatch.setattr(ledger, "time", c)
    return c


def test_no_iteration_starts_that_would_end_past_max_hours(tmp_path, clock):
    runner = TimedRunner(group_size=G, clock=clock)
    # 350 s: iterations end at 100, 200 and 300 s; a fourth would end at 400 s, so it does not start
    path = run_selfplay(config(tmp_path, iterations=10, max_hours=350 / 3600), runner=runner)
    state = json.loads(RunDir(path).state.read_text())
    assert state["completed"] == 3
    assert state["slowest_iteration_s"] == pytest.approx(100.0)
    assert state["wall_s"] == pytest.approx(300.0)
    assert json.loads(RunDir(path).summary.read_text())["stopped_by"] == "max_hours"


def test_first_iteration_starts_while_the_budget_is_not_spent(tmp_path, clock):
    runner = TimedRunner(group_size=G, clock=clock, iteration_s=500.0)
    # no iteration has a duration yet, so the first starts, and its 500 s tell the loop to stop
    path = run_selfplay(config(tmp_path, iterations=10, max_hours=350 / 3600), runner=runner)
    assert json.loads(RunDir(path).state.read_text())["completed"] == 1


def test_a_run_within_its_budget_stops_at_its_iterations(tmp_path, clock):
    path = run_selfplay(config(tmp_path, iterations=2, max_hours=1.0), runner=TimedRunner(group_size=G, clock=clock))
    summary = json.loads(RunDir(path).summary.read_text())
    assert summary["iterations"] == 2 and summary["stopped_by"] == "iterations"


def test_max_hours_must_be_positive(tmp_path):
    with pytest.raises(ValueError, match="max_hours must be > 0"):
        config(tmp_path, max_hours=0)
