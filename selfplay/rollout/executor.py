"""`LocalExecutor`: episodes on a thread pool of this process (the default; Ray is `ray_executor.py`).

Threads suit this work: an episode waits on Docker and on the policy (a batched model or HTTP), not on
the GIL. A request whose result is an infrastructure failure is played again, up to `retries` times, and
a runner that raises is an infrastructure failure too, so one bad episode never ends the run.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from selfplay.rollout.requests import EpisodeRequest, EpisodeResult, RequestRunner, infra_failure_result

log = logging.getLogger(__name__)


def call_runner(runner: RequestRunner, request: EpisodeRequest, worker: str = "") -> EpisodeResult:
    """`runner(request)`, with any exception turned into an infrastructure-failure result."""
    try:
        return runner(request)
    except Exception as exc:  # the run goes on; the error is logged with its traceback and kept in the result
        log.exception("episode %s: the worker raised", request.episode_id)
        return infra_failure_result(request, f"worker error: {exc.__class__.__name__}: {exc}",
                                    worker=worker or threading.current_thread().name)


class LocalExecutor:
    """Runs requests on `workers` threads sharing one `runner`."""

    def __init__(self, runner: RequestRunner, workers: int = 2, retries: int = 1) -> None:
        if workers < 1 or retries < 0:
            raise ValueError(f"workers must be >= 1 and retries >= 0 (got {workers}, {retries})")
        self.runner, self.workers, self.retries = runner, workers, retries
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="episode")

    def run(self, requests: Sequence[EpisodeRequest]) -> Iterator[EpisodeResult]:
        """Yield exactly one result per request, as they complete; infrastructure failures are retried up
        to `retries` times, then yielded with infra_failure=True."""
        attempts: dict[Future, tuple[EpisodeRequest, int]] = {
            self._pool.submit(call_runner, self.runner, r): (r, 0) for r in requests}
        while attempts:
            done, _ = wait(attempts, return_when=FIRST_COMPLETED)
            for future in done:
                request, tries = attempts.pop(future)
                result = future.result()  # call_runner never raises
                if result.infra_failure and tries < self.retries:
                    log.info("episode %s: infrastructure failure (%s); retry %d of %d", request.episode_id,
                             result.error, tries + 1, self.retries)
                    attempts[self._pool.submit(call_runner, self.runner, request)] = (request, tries + 1)
                    continue
                yield result

    def close(self) -> None:
        """Stop the threads (episodes in flight finish first) and close the runner's sandboxes."""
        self._pool.shutdown(wait=True, cancel_futures=True)
        close = getattr(self.runner, "close", None)
        if callable(close):
            close()
