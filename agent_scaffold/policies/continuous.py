"""`ContinuousScheduler`: continuous batching of concurrent `generate` calls on one `HFPolicy`.

A worker thread drives one `DecodeBatch`. Before every decode step it admits queued rows (FIFO, up to
`max_batch` live rows); after every step the rows that finished go back to their callers at once. A call
that arrives while others decode therefore starts at the next step instead of waiting for the batch to end,
and a short row never waits for a long one. Rows of any `SamplingParams` share a batch: sampling is per row.

The GIL: a decode step is ~600 torch ops, and the worker releases the GIL around each. With Python's
default switch interval (5 ms), every time an episode thread takes the GIL in between, the worker waits up
to 5 ms to get it back: on the 2-core box a 10-row step took 216 ms alone, 256 ms beside 18 threads that
each ran 0.5 ms of Python every 50 ms, and 39 s beside 18 threads at 2 ms every 20 ms. So the scheduler
lowers the process's switch interval to `switch_interval_s` (0.5 ms: 210 ms and 1.1 s there; a later run of
scripts/bench_decode_contention.py gave 297 ms at 5 ms and 277 ms at 0.5 ms); None leaves it.

Weight swaps: the worker holds the policy's locks (`DrainLock`s) while its batch has rows. When a swap waits
on one of them, the worker stops admitting, lets the running rows finish, and hands the locks over; every
completion is therefore sampled by one weights version.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_scaffold.policy import Completion, SamplingParams

log = logging.getLogger(__name__)


@dataclass
class _Call:
    """One caller's request: its rows' completions fill `result`; `done` is set when all are in (or on error)."""

    prompts: list[list[int]]
    rows: list[SamplingParams]  # one per prompt, each with its resolved seed
    result: list[Completion | None] = field(default_factory=list)
    left: int = 0
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None

    def fail(self, exc: BaseException) -> None:
        if not self.done.is_set():
            self.error = exc
            self.done.set()


class ContinuousScheduler:
    """Owns the worker thread; `generate` blocks its caller until the call's rows are sampled."""

    def __init__(self, policy: Any, max_batch: int, locks: Sequence[Any],
                 switch_interval_s: float | None = 0.0005) -> None:
        if switch_interval_s is not None and sys.getswitchinterval() > switch_interval_s:
            log.info("GIL switch interval %.2f ms -> %.2f ms: the decode worker re-takes the GIL after every torch op",
                     sys.getswitchinterval() * 1e3, switch_interval_s * 1e3)
            sys.setswitchinterval(switch_interval_s)
        self.policy = policy
        self.max_batch = max_batch
        self.locks = list(locks)  # taken in this order while a batch runs (outer wrapper first)
        self.sizes: Counter[int] = Counter()
        """Decode steps run so far, by batch size."""
        self._cond = threading.Condition()
        self._pending: deque[tuple[_Call, int]] = deque()
        self._closed = False
        self._worker = threading.Thread(target=self._serve, name="continuous-batching", daemon=True)
        self._worker.start()

    def generate(self, prompts: list[list[int]], rows: list[SamplingParams]) -> list[Completion]:
        check = getattr(self.policy, "check_prompts", None)
        if check is not None:
            check(prompts)  # a bad prompt fails its own call, before it reaches a batch
        call = _Call(prompts, rows, [None] * len(prompts), len(prompts))
        with self._cond:
            if self._closed:
                raise RuntimeError("BatchingPolicy is closed; build a new one to generate")
            self._pending.extend((call, i) for i in range(len(prompts)))
            self._cond.notify_all()
        call.done.wait()
        if call.error is not None:
            raise call.error
        return call.result  # type: ignore[return-value]

    def close(self) -> None:
        """Stop admitting; queued calls fail with a RuntimeError, running rows finish."""
        with self._cond:
            self._closed = True
            pending, self._pending = list(self._pending), deque()
            self._cond.notify_all()
        for call, _ in pending:
            call.fail(RuntimeError("BatchingPolicy was closed before this call ran"))
        self._worker.join(timeout=60)

    # --- worker ------------------------------------------------------------------------------------

    def _serve(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
            for lock in self.locks:
                lock.acquire()
            try:
                self._drain()
            finally:
                for lock in reversed(self.locks):
                    lock.release()
                for lock in self.locks:
                    lock.let_waiters_in()

    def _swap_waiting(self) -> bool:
        return any(lock.waiting for lock in self.locks)

    def _drain(self) -> None:
        """Run one batch until it has no rows: admit before each step, deliver after it."""
        batch = self.policy.decode_batch()
        while True:
            if not self._swap_waiting():
                self._admit(batch)
            if not len(batch):
                return
            size = len(batch)
            try:
                finished = batch.step()
            except Exception as exc:  # the batch's state is unknown now: fail its rows, start a fresh one
                log.exception("a decode step of %d rows failed; failing their calls", size)
                for row in batch.rows:
                    row.tag[0].fail(exc)
                return
            self.sizes[size] += 1
            for (call, i), completion in finished:
                call.result[i] = completion
                call.left -= 1
                if call.left == 0:
                    call.done.set()

    def _admit(self, batch: Any) -> None:
        taken: list[tuple[_Call, int]] = []
        with self._cond:
            while self._pending and not self._closed and len(batch) + len(taken) < self.max_batch:
                call, i = self._pending.popleft()
                if not call.done.is_set():  # else an earlier row of this call already failed
                    taken.append((call, i))
        if not taken:
            return
        reqs = [(call.prompts[i], call.rows[i], call.rows[i].seed, (call, i)) for call, i in taken]
        try:
            batch.admit_many(reqs)  # rows without stored KV share one prefill forward
            return
        except Exception as exc:  # which row broke it is unknown: the rows not yet in go one by one
            log.warning("a prefill of %d rows failed (%s: %s); admitting them one by one", len(reqs),
                        exc.__class__.__name__, exc)
        admitted = {id(row.tag) for row in batch.rows}
        for req in reqs:
            call = req[3][0]
            if id(req[3]) in admitted or call.done.is_set():
                continue
            try:
                batch.admit(*req)
            except Exception as exc:  # only this call is affected
                log.warning("prefill of a %d-token prompt failed: %s: %s", len(req[0]), exc.__class__.__name__, exc)
                call.fail(exc)
