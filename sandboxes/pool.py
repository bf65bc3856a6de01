"""`SandboxPool`: N warm containers of one image, handed out clean.

A returned sandbox is reset in a background thread (reset beats recreate; see docs/benchmarks.md) and
only then goes back on the shelf, so `checkout()` never waits for a reset unless all N are busy. A
sandbox that ran model code is proven clean by its reset (which verifies its result; see
`DockerSandbox.reset`) or recreated; one whose reset raises, or whose container died, is replaced.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

from sandboxes.docker import DockerSandbox, DockerSandboxConfig
from sandboxes.errors import SandboxError
from sandboxes.reaper import registry
from sandboxes.sandbox import WORKDIR

log = logging.getLogger(__name__)


class SandboxPool:
    """Keeps `size` warm sandboxes of `image`; thread-safe.

    Takers are served first come, first served: `checkout_many(n)` waits until n sandboxes are idle at
    once and takes them together, and single checkouts that arrive later queue behind it. Holding some
    sandboxes while waiting for more is how concurrent validations deadlocked; taking all or nothing
    never holds any while waiting, and the queue keeps a many-taker from starving behind single ones."""

    def __init__(self, image: str, size: int, *, workdir: str = WORKDIR,
                 config: DockerSandboxConfig | None = None, run_id: str | None = None) -> None:
        if size < 1:
            raise ValueError(f"pool size must be at least 1, got {size}")
        self.image, self.size, self.workdir = image, size, workdir
        self.config = config or DockerSandboxConfig()
        self.run_id = run_id
        self._idle: deque[DockerSandbox | Exception] = deque()
        self._waiters: deque[object] = deque()
        self._cond = threading.Condition()
        self._all: set[DockerSandbox] = set()
        self._lock = threading.Lock()
        self._closed = False
        # its sandboxes are created by worker threads, which cannot install the signal handler that
        # removes them on SIGTERM: the constructing thread does (when it is the main one)
        registry.install_signal_cleanup()
        self._workers = ThreadPoolExecutor(max_workers=size, thread_name_prefix="sandbox-pool")
        futures = [self._workers.submit(self._new) for _ in range(size)]
        errors = [f.exception() for f in futures if f.exception() is not None]
        if errors:
            self.close()
            raise SandboxError(f"could not start {len(errors)} of {size} sandboxes of {image}: {errors[0]}")
        for f in futures:
            self._put(f.result())

    def _new(self) -> DockerSandbox:
        sb = DockerSandbox.create(self.image, workdir=self.workdir, config=self.config, run_id=self.run_id)
        with self._lock:
            if self._closed:
                sb.close()
                raise SandboxError("pool closed while a sandbox was starting")
            self._all.add(sb)
        return sb

    def _put(self, item: DockerSandbox | Exception) -> None:
        with self._cond:
            self._idle.append(item)
            self._cond.notify_all()

    def _take(self, n: int, timeout: float | None) -> list[DockerSandbox]:
        """n idle sandboxes at once, in arrival order of the takers; raises after `timeout` seconds."""
        if not 1 <= n <= self.size:
            raise ValueError(f"cannot take {n} sandboxes at once from the pool of {self.image} of size "
                             f"{self.size}; ask for 1 to {self.size} or make the pool bigger")
        timeout = self.config.checkout_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        ticket = object()
        with self._cond:
            self._waiters.append(ticket)
            try:
                while True:
                    if self._closed:
                        raise SandboxError(f"pool of {self.image} is closed")
                    if self._waiters[0] is ticket and len(self._idle) >= n:
                        break
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise SandboxError(
                            f"no {n} sandbox(es) of {self.image} became free together within {timeout:g} s "
                            f"(pool size {self.size}, {len(self._idle)} idle, {len(self._waiters) - 1} other "
                            f"taker(s) waiting); raise the pool size (rollout.sandboxes_per_repo) or "
                            f"DockerSandboxConfig.checkout_timeout, or check for a holder that never returns")
                    self._cond.wait(left)
                items = [self._idle.popleft() for _ in range(n)]
            finally:
                self._waiters.remove(ticket)
                self._cond.notify_all()  # the next taker in line may be servable now
        broken = [item for item in items if isinstance(item, Exception)]
        if broken:  # a replacement failed to start: give back the good ones, let the next taker retry
            for item in items:
                if isinstance(item, Exception):
                    self._workers.submit(self._refill)
                else:
                    self._put(item)
            raise SandboxError(f"pool of {self.image} could not replace a broken sandbox: {broken[0]}") \
                from broken[0]
        live: list[DockerSandbox] = []
        try:
            for sb in items:
                live.append(self._live(sb))
        except Exception:  # a dead one's replacement failed: keep the pool at full size, give back the rest
            for sb in live + items[len(live) + 1:]:
                self._put(sb)
            self._workers.submit(self._refill)
            raise
        return live

    def _live(self, sb: DockerSandbox) -> DockerSandbox:
        try:
            sb._require_live()  # one inspect (~ms): a container that died while idle is replaced
        except SandboxError as exc:
            log.warning("pool %s: idle sandbox %s died (%s); starting a new one", self.image, sb, exc)
            self._discard(sb)
            return self._new()
        return sb

    @contextmanager
    def checkout(self, timeout: float | None = None) -> Iterator[DockerSandbox]:
        """A clean sandbox for the duration of the `with` block; reset in the background afterwards.
        Waits at most `timeout` seconds (None: `config.checkout_timeout`) for one to be free."""
        with self.checkout_many(1, timeout) as (sb,):
            yield sb

    @contextmanager
    def checkout_many(self, n: int, timeout: float | None = None) -> Iterator[list[DockerSandbox]]:
        """`n` clean sandboxes taken together (all or nothing) for the `with` block; each is reset in the
        background afterwards. Waits at most `timeout` seconds (None: `config.checkout_timeout`)."""
        if self._closed:
            raise SandboxError(f"pool of {self.image} is closed")
        items = self._take(n, timeout)
        try:
            yield items
        finally:
            for item in items:
                if self._closed:
                    self._discard(item)
                else:
                    self._workers.submit(self._recycle, item)

    def _recycle(self, sb: DockerSandbox) -> None:
        if self._closed:
            self._discard(sb)
            return
        try:
            if sb.rebased:  # its reset snapshot is someone's buggy tree: only a new container is the image again
                sb.recreate()
            else:
                sb.reset()  # falls back to recreate itself when the restore fails
            if sb.id is None:
                raise SandboxError("sandbox closed during reset")
        except Exception as exc:
            log.warning("pool %s: sandbox %s could not be reset (%s); replacing it", self.image, sb, exc)
            self._discard(sb)
            self._refill()
            return
        self._put(sb)

    def _refill(self) -> None:
        try:
            self._put(self._new())
        except Exception as exc:  # handed to the next checkout, which reports it
            self._put(exc)

    def _discard(self, sb: DockerSandbox) -> None:
        with self._lock:
            self._all.discard(sb)
        sb.close()

    def close(self) -> None:
        """Remove every container of the pool (busy ones too). Idempotent."""
        with self._lock:
            self._closed = True
            sandboxes, self._all = list(self._all), set()
        with self._cond:
            self._cond.notify_all()  # waiting takers wake up and raise "closed"
        self._workers.shutdown(wait=True, cancel_futures=True)
        for sb in sandboxes:
            sb.close()

    def __enter__(self) -> SandboxPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

