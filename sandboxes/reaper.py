"""Leak-proofing: owner labels on every container, cleanup on Ctrl-C/SIGTERM/exit, and `gc` of orphans.

An owner is identified by pid + process start time (clock ticks since boot, plus the boot id) + hostname,
so a recycled pid, a reboot or another machine sharing the engine cannot pass for a live owner.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sandboxes.errors import SandboxError

if TYPE_CHECKING:
    import docker

log = logging.getLogger(__name__)

LABEL_MANAGED = "selfplay.sandbox"
LABEL_PID = "selfplay.owner.pid"
LABEL_START = "selfplay.owner.start"
LABEL_HOST = "selfplay.owner.host"
LABEL_RUN = "selfplay.run_id"
CREATE_GRACE = 10.0
"""Seconds a terminating signal waits for container creations already sent to the engine, so that what they
create is removed too (a creation answered after the process died would leak, as a "Created" container)."""


def process_start(pid: int) -> str | None:
    """'<start ticks>@<boot id>' of a live process, None when it does not exist (Linux /proc)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
    except OSError:
        return None
    # Field 22 (starttime) counted after the ')' closing the command name, which may contain spaces.
    fields = stat[stat.rindex(b")") + 2:].split()
    return f"{int(fields[19])}@{boot}"


def owner_labels(run_id: str | None = None) -> dict[str, str]:
    """Labels naming this process as the owner of a new container."""
    labels = {LABEL_MANAGED: "1", LABEL_PID: str(os.getpid()),
              LABEL_START: process_start(os.getpid()) or "unknown", LABEL_HOST: socket.gethostname()}
    if run_id:
        labels[LABEL_RUN] = run_id
    return labels


def owner_alive(labels: dict[str, str]) -> bool | None:
    """True/False for owners on this host; None when the owner is on another host (cannot tell)."""
    if labels.get(LABEL_HOST) != socket.gethostname():
        return None
    try:
        pid = int(labels.get(LABEL_PID, ""))
    except ValueError:
        return False
    start = labels.get(LABEL_START)
    return start is not None and start != "unknown" and process_start(pid) == start


@dataclass(frozen=True)
class SandboxInfo:
    """One labelled container, as `selfplay sandboxes ls` shows it."""

    id: str
    name: str
    image: str
    status: str
    run_id: str
    owner: str
    """'pid@host'."""
    owner_alive: bool | None
    """None when the owner lives on another host."""


def list_sandboxes(client: docker.DockerClient) -> list[SandboxInfo]:
    """Every container carrying our labels, running or not."""
    out = []
    for c in client.api.containers(all=True, filters={"label": LABEL_MANAGED}):
        labels = c.get("Labels") or {}
        out.append(SandboxInfo(id=c["Id"][:12], name=(c.get("Names") or ["?"])[0].lstrip("/"),
                               image=c.get("Image", "?"), status=c.get("Status", "?"),
                               run_id=labels.get(LABEL_RUN, ""),
                               owner=f"{labels.get(LABEL_PID, '?')}@{labels.get(LABEL_HOST, '?')}",
                               owner_alive=owner_alive(labels)))
    return out


def gc(client: docker.DockerClient, *, other_hosts: bool = False, dry_run: bool = False) -> list[SandboxInfo]:
    """Remove labelled containers whose owner process is gone; returns what was (or would be) removed.

    Containers owned from another host are left alone unless `other_hosts` (their liveness is unknown).
    """
    doomed = [s for s in list_sandboxes(client)
              if s.owner_alive is False or (s.owner_alive is None and other_hosts)]
    if not dry_run:
        _remove(client, [s.id for s in doomed])
    return doomed


def _remove(client: docker.DockerClient, ids: list[str]) -> None:
    import docker.errors

    def rm(cid: str) -> None:
        try:
            client.api.remove_container(cid, force=True, v=True)
        except docker.errors.NotFound:
            pass
        except Exception as exc:  # keep removing the others
            log.warning("could not remove container %s: %s", cid, exc)

    if len(ids) <= 1:
        for cid in ids:
            rm(cid)
        return
    with ThreadPoolExecutor(max_workers=min(16, len(ids))) as ex:
        list(ex.map(rm, ids))


class _Registry:
    """Containers this process created and has not closed yet."""

    def __init__(self) -> None:
        self._lock = threading.RLock()  # re-entrant: the signal handler runs on the main thread
        self._settled = threading.Condition(self._lock)
        self._live: dict[str, docker.DockerClient] = {}
        self._previous: dict[int, object] = {}
        self._at_exit = False
        self._on_signals = False
        self._creating: dict[int, int] = {}  # thread id -> creations in flight
        self._closing = False
        self._last_signal: float | None = None  # time.monotonic() of the last SIGINT/SIGTERM handled

    @contextmanager
    def creating(self) -> Iterator[None]:
        """Around a container's creation and its `register`: a terminating signal waits (`CREATE_GRACE`) for
        the creations in flight, and refuses new ones, so that none outlives the process."""
        with self._lock:
            if self._closing:
                raise SandboxError("not creating a container: this process is shutting down on a signal")
            me = threading.get_ident()
            self._creating[me] = self._creating.get(me, 0) + 1
        try:
            yield
        finally:
            with self._lock:
                self._creating[me] -= 1
                if not self._creating[me]:
                    del self._creating[me]
                self._settled.notify_all()

    def register(self, client: docker.DockerClient, cid: str) -> None:
        with self._lock:
            if self._closing:  # created while the process shuts down: nobody would remove it later
                _remove(client, [cid])
                raise SandboxError("container removed at once: this process is shutting down on a signal")
            self._live[cid] = client
            if not self._at_exit:
                self._at_exit = True
                atexit.register(self.cleanup)
        self.install_signal_cleanup()

    def signalled_since(self, start: float) -> bool:
        """Whether this process removed its containers on a signal at or after `start` (time.monotonic()):
        work begun before it should stop rather than take its dead sandboxes for a failure of its own (a
        validation's control run, a retry), while work begun later (a program that caught the
        KeyboardInterrupt and goes on) is not affected."""
        return self._last_signal is not None and self._last_signal >= start

    def forget(self, cid: str) -> None:
        with self._lock:
            self._live.pop(cid, None)

    def cleanup(self) -> None:
        """Remove every container still registered (signal, exit)."""
        with self._lock:
            live, self._live = self._live, {}
        by_client: dict[int, tuple[docker.DockerClient, list[str]]] = {}
        for cid, client in live.items():
            by_client.setdefault(id(client), (client, []))[1].append(cid)
        for client, ids in by_client.values():
            _remove(client, ids)
        if live:
            log.info("removed %d sandbox container(s) on shutdown", len(live))

    def install_signal_cleanup(self) -> bool:
        """Remove this process's containers on SIGINT and SIGTERM, then act on the signal as before. Only the
        main thread can install a handler: off it this does nothing and returns False, so a program whose
        containers are all created by worker threads (a pool) calls it from its main thread first; atexit
        and `selfplay sandboxes gc` cover a process without it. Idempotent."""
        if threading.current_thread() is not threading.main_thread():
            return False
        with self._lock:
            if self._on_signals:
                return True
            self._on_signals = True
            for sig in (signal.SIGINT, signal.SIGTERM):
                prev = signal.getsignal(sig)
                if prev is signal.SIG_IGN:
                    continue
                self._previous[sig] = prev
                signal.signal(sig, self._on_signal)
        return True

    def _on_signal(self, signum: int, frame: object) -> None:
        self._last_signal = time.monotonic()
        self.cleanup()
        prev = self._previous.get(signum)
        if callable(prev):
            prev(signum, frame)  # SIGINT's default raises KeyboardInterrupt; a late creation meets atexit
            return
        # The default action (terminate): no atexit will run, so creations in flight are waited for and
        # removed here; then restore the action and die of the same signal, as the caller expects.
        me = threading.get_ident()  # the handler may interrupt this thread's own creation: not waited for

        def others() -> int:
            return sum(n for ident, n in self._creating.items() if ident != me)

        with self._lock:
            self._closing = True
            if not self._settled.wait_for(lambda: others() == 0, timeout=CREATE_GRACE):
                log.warning("%d container creation(s) still unanswered after %.0f s; `selfplay sandboxes gc` "
                            "removes what they leave", others(), CREATE_GRACE)
        self.cleanup()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


registry = _Registry()
