"""`BatchingPolicy`: merges the `generate` calls of concurrent episodes into batched calls of one policy.

Each episode runs in its own thread and asks for one completion at a time, so a local model would sample
one stream at a time. Two ways to batch them, picked by what the wrapped policy offers:

- continuous (a policy with `decode_batch()`, i.e. `HFPolicy`): `ContinuousScheduler` admits a call's
  prompts into the running batch at the next decode step and returns each row as soon as it finishes, as
  vLLM does; rows of any sampling params mix, up to `max_batch` live rows.
- gathered (any other policy): a worker thread gathers the calls that arrive within `max_wait_s` of the
  first (up to `max_batch` prompts) and runs them as one batch; calls batch together when their
  `SamplingParams` differ only in `max_new_tokens` and `seed`, and a call arriving mid-batch waits for
  the next one.

Each caller gets its own completions, or its own exception. On GPUs use `vllm serve`; this is the CPU path.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_scaffold.policies.continuous import ContinuousScheduler
from agent_scaffold.policies.drain_lock import DrainLock
from agent_scaffold.policy import Completion, SamplingParams

log = logging.getLogger(__name__)


def batch_key(params: SamplingParams) -> SamplingParams:
    """Calls with equal keys may share a batch: everything but `max_new_tokens` and `seed` must agree."""
    return params.with_(max_new_tokens=1, seed=None)


@dataclass
class _Call:
    """One caller's request, waiting for its completions (or its exception)."""

    prompts: list[list[int]]
    params: SamplingParams
    rows: list[SamplingParams]  # one per prompt, each with its resolved seed
    done: threading.Event = field(default_factory=threading.Event)
    result: list[Completion] | None = None
    error: BaseException | None = None


class BatchingPolicy:
    """A `Policy` wrapping `policy`; thread-safe. Call `close()` to stop its worker thread.

    A wrapped policy with `decode_batch()` (`HFPolicy`) is batched continuously (see the module docstring).
    Otherwise, a wrapped policy with `generate_rows(prompts, params_per_prompt)` runs any calls of
    one key as a single batch, each prompt with its own seed and max_new_tokens. Any other policy gets
    merged calls only when their params are equal and unseeded (its `generate` numbers seeds seed + i);
    the rest run one call at a time. Weight swaps (`load_weights`, or a sync holding `_lock`) wait for the
    running batch and never interleave with one (in continuous mode the batch stops admitting and drains).
    """

    def __init__(self, policy: Any, max_batch: int = 8, max_wait_s: float = 0.02,
                 switch_interval_s: float | None = 0.0005) -> None:
        """`switch_interval_s`: continuous mode lowers Python's GIL switch interval to this (None: leave it;
        `ContinuousScheduler` says why)."""
        if switch_interval_s is not None and not switch_interval_s > 0:
            raise ValueError(f"switch_interval_s must be > 0 seconds, or None to leave Python's, got {switch_interval_s}")
        if max_batch < 1 or max_wait_s < 0:
            raise ValueError(f"max_batch must be >= 1 and max_wait_s >= 0, got {max_batch} and {max_wait_s}")
        self.policy = policy
        self.tokenizer = policy.tokenizer
        self.max_batch = max_batch
        self.max_wait_s = max_wait_s
        """Gathered mode only: how long the first call of a batch waits for mates (continuous mode needs no wait)."""
        self.batches = 0
        """Gathered mode: batches run so far (with `rows`, the mean batch size)."""
        self.rows = 0
        """Gathered mode: prompts sampled so far."""
        self._lock = DrainLock()  # held while a batch runs; weight swaps take it too
        self._cond = threading.Condition()
        self._queue: list[_Call] = []
        self._closed = False
        self._continuous: Any = None
        if hasattr(policy, "decode_batch"):
            inner = getattr(policy, "_lock", None)
            locks = [self._lock] + ([inner] if isinstance(inner, DrainLock) else [])
            self._continuous = ContinuousScheduler(policy, max_batch, locks, switch_interval_s)
            return
        self._sizes: Counter[int] = Counter()
        self._worker = threading.Thread(target=self._serve, name="batching-policy", daemon=True)
        self._worker.start()

    @property
    def continuous(self) -> bool:
        """True when calls join a running batch at the next decode step (the wrapped policy has `decode_batch`)."""
        return self._continuous is not None

    @property
    def sizes(self) -> Counter[int]:
        """Batch sizes reached so far: decode steps by live rows (continuous), or batches by prompts (gathered)."""
        return self._continuous.sizes if self._continuous is not None else self._sizes

    @property
    def version(self) -> int:
        return self.policy.version

    @version.setter
    def version(self, value: int) -> None:  # HFPolicySync(mode="memory") sets it after copying tensors
        self.policy.version = value

    @property
    def model(self) -> Any:
        """The wrapped policy's model (weight sync copies tensors into it under `_lock`)."""
        return self.policy.model

    @property
    def model_dir(self) -> str:
        return str(getattr(self.policy, "model_dir", "policy"))

    def load_weights(self, checkpoint_dir: str | Path, version: int) -> None:
        with self._lock:
            self.policy.load_weights(checkpoint_dir, version)

    def sync_engine(self) -> float:
        """The wrapped policy's `sync_engine` (0.0 when it has none)."""
        sync = getattr(self.policy, "sync_engine", None)
        return sync() if sync is not None else 0.0

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Completion]:
        if not prompts:
            return []
        base = params.seed if params.seed is not None else random.randrange(2**62)
        if self._continuous is not None:
            return self._continuous.generate([list(p) for p in prompts],
                                             [params.with_(seed=base + i) for i in range(len(prompts))])
        call = _Call([list(p) for p in prompts], params,
                     [params.with_(seed=base + i) for i in range(len(prompts))])
        with self._cond:
            if self._closed:
                raise RuntimeError("BatchingPolicy is closed; build a new one to generate")
            self._queue.append(call)
            self._cond.notify_all()
        call.done.wait()
        if call.error is not None:
            raise call.error
        assert call.result is not None
        return call.result

    def close(self) -> None:
        """Stop the worker; calls still queued fail with a RuntimeError."""
        if self._continuous is not None:
            self._continuous.close()
            return
        with self._cond:
            self._closed = True
            pending, self._queue = self._queue, []
            self._cond.notify_all()
        for call in pending:
            call.error = RuntimeError("BatchingPolicy was closed before this call ran")
            call.done.set()
        self._worker.join(timeout=60)

    # --- worker ------------------------------------------------------------------------------------

    def _serve(self) -> None:
        while True:
            batch = self._next_batch()
            if batch is None:
                return
            with self._lock:
                self._run(batch)

    def _next_batch(self) -> list[_Call] | None:
        """Wait for a call, then up to `max_wait_s` for mates of its key; take them off the queue."""
        with self._cond:
            while not self._queue and not self._closed:
                self._cond.wait()
            if self._closed:
                return None
            deadline = time.monotonic() + self.max_wait_s
            while self._rows_ready(self._queue[0]) < self.max_batch:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
                if self._closed:  # close() failed the queued calls
                    return None
            first = self._queue[0]
            batch, rows = [], 0
            for call in list(self._queue):
                if self._fits(first, call) and (not batch or rows + len(call.prompts) <= self.max_batch):
                    batch.append(call)
                    rows += len(call.prompts)
                    self._queue.remove(call)
            return batch

    def _rows_ready(self, first: _Call) -> int:
        return sum(len(c.prompts) for c in self._queue if self._fits(first, c))

    def _fits(self, first: _Call, call: _Call) -> bool:
        if call is first:
            return True
        if hasattr(self.policy, "generate_rows"):
            return batch_key(call.params) == batch_key(first.params)
        return call.params == first.params and first.params.seed is None

    def _run(self, batch: list[_Call]) -> None:
        try:
            outs = self._generate(batch)
            if len(outs) != sum(len(c.prompts) for c in batch):
                raise RuntimeError(f"{self.policy.__class__.__name__} returned {len(outs)} completions for "
                                   f"{sum(len(c.prompts) for c in batch)} prompts")
        except Exception as exc:
            if len(batch) == 1:
                batch[0].error = exc
                batch[0].done.set()
                return
            # Which call broke the batch is unknown: run each alone, so the error reaches only its caller.
            log.warning("a batch of %d calls failed (%s: %s); running them one by one", len(batch),
                        exc.__class__.__name__, exc)
            for call in batch:
                self._run([call])
            return
        self.batches += 1
        start = 0
        self._sizes[sum(len(c.prompts) for c in batch)] += 1
        for call in batch:
            call.result = outs[start:start + len(call.prompts)]
            start += len(call.prompts)
            call.done.set()
        self.rows += start

    def _generate(self, batch: list[_Call]) -> list[Completion]:
        prompts = [p for call in batch for p in call.prompts]
        if hasattr(self.policy, "generate_rows"):
            rows = [r for call in batch for r in call.rows]
            # A call wider than max_batch (an n=64 request) runs in slices, so memory stays bounded.
            return [c for i in range(0, len(prompts), self.max_batch)
                    for c in self.policy.generate_rows(prompts[i:i + self.max_batch], rows[i:i + self.max_batch])]
        # Otherwise a batch is one call, or equal unseeded calls (see _fits): one params serves them all.
        return self.policy.generate(prompts, batch[0].params)
