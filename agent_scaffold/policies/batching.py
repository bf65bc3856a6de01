"""`BatchingPolicy`: merges the `generate` calls of concurrent episodes into batched calls of one policy.

Each episode runs in its own thread and asks for one completion at a time, so a local model would sample
one stream at a time. Here a worker thread gathers the calls that arrive within `max_wait_s` of the first
(up to `max_batch` prompts) and runs them as one batch; each caller gets its own completions, or its own
exception. Calls batch together when their `SamplingParams` differ only in `max_new_tokens` and `seed`.

Unlike vLLM's continuous batching, a call that arrives while a batch is decoding waits for the next batch:
episodes whose sandbox steps desynchronise them batch less. On GPUs use `vllm serve`; this is the CPU path.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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

    A wrapped policy with `generate_rows(prompts, params_per_prompt)` (e.g. `HFPolicy`) runs any calls of
    one key as a single batch, each prompt with its own seed and max_new_tokens. Any other policy gets
    merged calls only when their params are equal and unseeded (its `generate` numbers seeds seed + i);
    the rest run one call at a time. Weight swaps (`load_weights`, or a sync holding `_lock`) wait for the
    running batch and never interleave with one.
    """

    def __init__(self, policy: Any, max_batch: int = 8, max_wait_s: float = 0.02) -> None:
        if max_batch < 1 or max_wait_s < 0:
            raise ValueError(f"max_batch must be >= 1 and max_wait_s >= 0, got {max_batch} and {max_wait_s}")
        self.policy = policy
        self.tokenizer = policy.tokenizer
        self.max_batch = max_batch
        self.max_wait_s = max_wait_s
        self.batches = 0
        """Batches run so far (with `rows`, the mean batch size)."""
        self.rows = 0
        """Prompts sampled so far."""
        self._lock = threading.Lock()  # held while a batch runs; weight swaps take it too
        self._cond = threading.Condition()
        self._queue: list[_Call] = []
        self._closed = False
        self._worker = threading.Thread(target=self._serve, name="batching-policy", daemon=True)
        self._worker.start()

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

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Completion]:
        if not prompts:
            return []
        base = params.seed if params.seed is not None else random.randrange(2**62)
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
