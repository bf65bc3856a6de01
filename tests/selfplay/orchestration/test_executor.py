"""`LocalExecutor`: one result per request, infrastructure failures retried, a raising runner survived.

Test double: `FlakyRunner` stands in for the worker (the real one is exercised with Docker in
test_worker.py, including through `LocalExecutor`): it fails the first `fail` attempts of chosen requests,
as a dead sandbox would, either as an infra-failure result or by raising.
"""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest

from selfplay.rollout.executor import LocalExecutor
from selfplay.rollout.requests import EpisodeRequest, EpisodeResult, infra_failure_result


class FlakyRunner:
    """Test double of a RequestRunner: request ids in `fail` lose their first N attempts."""

    def __init__(self, fail: dict[str, int], raise_instead: bool = False, delay: float = 0.0) -> None:
        self.fail, self.raise_instead, self.delay = dict(fail), raise_instead, delay
        self.calls: Counter[str] = Counter()
        self.lock = threading.Lock()
        self.closed = False

    def __call__(self, request: EpisodeRequest) -> EpisodeResult:
        with self.lock:
            self.calls[request.episode_id] += 1
            n = self.calls[request.episode_id]
        time.sleep(self.delay)
        if n <= self.fail.get(request.episode_id, 0):
            if self.raise_instead:
                raise RuntimeError(f"engine gone ({request.episode_id})")
            return infra_failure_result(request, "SandboxDead: container died")
        return EpisodeResult(request, None, "submitted", False, None, "diff")

    def close(self) -> None:
        self.closed = True


def _requests(n: int) -> list[EpisodeRequest]:
    return [EpisodeRequest(f"r-it0-solver-{i}", "solver", "toolz", 0, 0) for i in range(n)]


@pytest.mark.parametrize("raise_instead", [False, True])
def test_infra_failures_are_retried_and_every_request_yields_one_result(raise_instead):
    runner = FlakyRunner({"r-it0-solver-1": 1, "r-it0-solver-3": 1}, raise_instead=raise_instead, delay=0.01)
    executor = LocalExecutor(runner, workers=3, retries=1)
    results = list(executor.run(_requests(5)))
    executor.close()
    assert sorted(r.request.episode_id for r in results) == [f"r-it0-solver-{i}" for i in range(5)]
    assert not any(r.infra_failure for r in results)
    assert runner.calls["r-it0-solver-1"] == 2 and runner.calls["r-it0-solver-0"] == 1
    assert runner.closed  # close() also closes the runner's sandboxes


def test_exhausted_retries_yield_an_infra_failure_with_the_error():
    runner = FlakyRunner({"r-it0-solver-0": 5}, raise_instead=True)
    executor = LocalExecutor(runner, workers=2, retries=2)
    results = {r.request.episode_id: r for r in executor.run(_requests(2))}
    executor.close()
    lost = results["r-it0-solver-0"]
    assert lost.infra_failure and lost.trajectory is None and "RuntimeError: engine gone" in lost.error
    assert runner.calls["r-it0-solver-0"] == 3 and not results["r-it0-solver-1"].infra_failure


def test_results_come_as_they_complete():
    class Slow(FlakyRunner):
        def __call__(self, request):
            time.sleep(0.5 if request.episode_id.endswith("-0") else 0.0)
            return super().__call__(request)

    executor = LocalExecutor(Slow({}), workers=2, retries=0)
    order = [r.request.episode_id for r in executor.run(_requests(2))]
    executor.close()
    assert order == ["r-it0-solver-1", "r-it0-solver-0"]


def test_bad_sizes_are_refused():
    with pytest.raises(ValueError, match="workers must be >= 1"):
        LocalExecutor(FlakyRunner({}), workers=0)
