"""`SandboxPool`: N warm containers of one image, handed out clean.

A returned sandbox is reset in a background thread (reset beats recreate; see docs/benchmarks.md) and
only then goes back on the shelf, so `checkout()` never waits for a reset unless all N are busy. A
sandbox that ran model code is proven clean by its reset (which verifies its result; see
`DockerSandbox.reset`) or recreated; one whose reset raises, or whose container died, is replaced.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

from sandboxes.docker import DockerSandbox, DockerSandboxConfig
from sandboxes.errors import SandboxError

log = logging.getLogger(__name__)


class SandboxPool:
    """Keeps `size` warm sandboxes of `image`; thread-safe."""

    def __init__(self, image: str, size: int, *, workdir: str = "/testbed",
                 config: DockerSandboxConfig | None = None, run_id: str | None = None) -> None:
        if size < 1:
            raise ValueError(f"pool size must be at least 1, got {size}")
        self.image, self.size, self.workdir = image, size, workdir
        self.config = config or DockerSandboxConfig()
        self.run_id = run_id
        self._idle: queue.Queue[DockerSandbox | Exception] = queue.Queue()
        self._all: set[DockerSandbox] = set()
        self._lock = threading.Lock()
        self._closed = False
        self._workers = ThreadPoolExecutor(max_workers=size, thread_name_prefix="sandbox-pool")
        futures = [self._workers.submit(self._new) for _ in range(size)]
        errors = [f.exception() for f in futures if f.exception() is not None]
        if errors:
            self.close()
            raise SandboxError(f"could not start {len(errors)} of {size} sandboxes of {image}: {errors[0]}")
        for f in futures:
            self._idle.put(f.result())

    def _new(self) -> DockerSandbox:
        sb = DockerSandbox.create(self.image, workdir=self.workdir, config=self.config, run_id=self.run_id)
        with self._lock:
            if self._closed:
                sb.close()
                raise SandboxError("pool closed while a sandbox was starting")
            self._all.add(sb)
        return sb

    @contextmanager
    def checkout(self, timeout: float | None = None) -> Iterator[DockerSandbox]:
        """A clean sandbox for the duration of the `with` block; reset in the background afterwards."""
        if self._closed:
            raise SandboxError(f"pool of {self.image} is closed")
        try:
            item = self._idle.get(timeout=timeout)
        except queue.Empty:
            raise SandboxError(f"no sandbox of {self.image} became free within {timeout} s "
                               f"(pool size {self.size}); raise the size or the timeout") from None
        if isinstance(item, Exception):  # a replacement failed to start; let the next one retry
            self._workers.submit(self._refill)
            raise SandboxError(f"pool of {self.image} could not replace a broken sandbox: {item}") from item
        try:
            item._require_live()  # one inspect (~ms): a container that died while idle is replaced
        except SandboxError as exc:
            log.warning("pool %s: idle sandbox %s died (%s); starting a new one", self.image, item, exc)
            self._discard(item)
            item = self._new()
        try:
            yield item
        finally:
            if self._closed:
                self._discard(item)
            else:
                self._workers.submit(self._recycle, item)

    def _recycle(self, sb: DockerSandbox) -> None:
        if self._closed:
            self._discard(sb)
            return
        try:
            sb.reset()  # falls back to recreate itself when the restore fails
            if sb.id is None:
                raise SandboxError("sandbox closed during reset")
        except Exception as exc:
            log.warning("pool %s: sandbox %s could not be reset (%s); replacing it", self.image, sb, exc)
            self._discard(sb)
            self._refill()
            return
        self._idle.put(sb)

    def _refill(self) -> None:
        try:
            self._idle.put(self._new())
        except Exception as exc:  # handed to the next checkout, which reports it
            self._idle.put(exc)

    def _discard(self, sb: DockerSandbox) -> None:
        with self._lock:
            self._all.discard(sb)
        sb.close()

    def close(self) -> None:
        """Remove every container of the pool (busy ones too). Idempotent."""
        with self._lock:
            self._closed = True
            sandboxes, self._all = list(self._all), set()
        self._workers.shutdown(wait=True, cancel_futures=True)
        for sb in sandboxes:
            sb.close()

    def __enter__(self) -> SandboxPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

