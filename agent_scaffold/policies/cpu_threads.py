"""`ThreadGovernor`: how many torch threads a CPU forward uses while other processes hold some of the cores.

In a self-play run the sampler shares the machine with the sandboxes: test suites run in containers beside
the decode steps. A torch op split over every core then waits at the end of each parallel region for the
thread whose core a test run holds, and one busy core slows the whole step far more than losing that core
would. Measured on the 2-core box (SmolLM2-135M, a decode step of 10 rows of 800-1,700 tokens): 177 ms with
2 threads on an idle machine, 548-608 ms with 2 threads while one core ran a busy loop, 236 ms with 1 thread
either way (a later run of scripts/bench_decode_contention.py did not reproduce it: 326 against 317 ms).
A busy loop at 10-50% duty did not hurt 2 threads.

So before each forward the governor looks at how much CPU the other processes used over the last window
(`/proc/stat` minus this process's own `/proc/self/stat`) and runs on the cores they leave free: at most the
ceiling (torch's thread count when the policy was built), at least 1. `threads_for` is the rule, apart from
the I/O. Where `/proc` cannot be read (not Linux), the governor leaves torch alone.

`torch.set_num_threads` sets the calling thread's OpenMP team size, so only the thread that samples is
governed: a learner step on another thread keeps its own count.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)


def threads_for(cores: int, others_busy: float, ceiling: int) -> int:
    """Threads for a forward on `cores` usable cores while other processes keep `others_busy` of them busy
    (in cores, averaged over the last window): the free cores rounded to the nearest, within [1, ceiling]."""
    return max(1, min(ceiling, int(cores - others_busy + 0.5)))


@dataclass(frozen=True)
class CpuTimes:
    """Cumulative CPU time, in clock ticks, of the usable cores and of this process, at `wall` (seconds)."""

    busy: int
    """Ticks the usable cores spent busy (everything but idle and iowait; steal counts as busy)."""
    own: int
    """Ticks this process spent on a CPU (all its threads, user + system)."""
    wall: float


def read_cpu_times(cpus: frozenset[int] | None = None) -> CpuTimes:
    """`CpuTimes` now, over the CPUs in `cpus` (None: all of them). Raises OSError where /proc is missing."""
    busy = 0
    with open("/proc/stat") as f:
        for line in f:
            if not line.startswith("cpu"):
                break
            name, *fields = line.split()
            if cpus is None and name != "cpu":
                continue
            if cpus is not None and (name == "cpu" or int(name[3:]) not in cpus):
                continue
            ticks = [int(x) for x in fields[:8]]  # user nice system idle iowait irq softirq steal
            busy += sum(ticks) - ticks[3] - ticks[4]
    with open("/proc/self/stat") as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) "; comm may hold spaces
    own = int(fields[11]) + int(fields[12])  # utime, stime: fields 14 and 15 of proc(5)
    return CpuTimes(busy, own, time.monotonic())


class ThreadGovernor:
    """Sets the calling thread's torch thread count from the other processes' CPU use (see the module)."""

    def __init__(self, ceiling: int | None = None, adapt: bool = True, window_s: float = 0.5,
                 reader: Callable[[], CpuTimes] | None = None, cores: int | None = None) -> None:
        """`ceiling`: most threads (None: torch's count now). `adapt`: False keeps `ceiling` threads whatever
        the load. `window_s`: how often the load is re-read. `reader`/`cores`: the CPU-time source and the
        usable core count (tests pass their own)."""
        import torch

        self.torch = torch
        if ceiling is not None and (isinstance(ceiling, bool) or not isinstance(ceiling, int) or ceiling < 1):
            raise ValueError(f"torch thread ceiling must be a positive int, got {ceiling!r}")
        self.ceiling = ceiling if ceiling is not None else torch.get_num_threads()
        self.adapt = adapt
        self.window_s = window_s
        affinity = frozenset(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
        self.cores = cores if cores is not None else (len(affinity) if affinity else os.cpu_count() or 1)
        cpus = None if affinity is None or len(affinity) == os.cpu_count() else affinity
        self._read = reader if reader is not None else functools.partial(read_cpu_times, cpus)
        self._ticks_per_s = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self.threads = self.ceiling
        self.others_busy = 0.0
        """Cores the other processes kept busy over the last window."""
        self._last: CpuTimes | None = None
        if not adapt:
            return
        try:
            self._last = self._read()
        except (OSError, ValueError, IndexError) as exc:
            log.info("CPU load unreadable (%s: %s); torch threads stay at %d", exc.__class__.__name__, exc,
                     self.ceiling)

    def update(self) -> int:
        """Re-read the load when a window has passed and set the calling thread's torch thread count."""
        if self._last is not None and self.ceiling > 1 and time.monotonic() - self._last.wall >= self.window_s:
            self._reread(self._last)
        if self.torch.get_num_threads() != self.threads:
            self.torch.set_num_threads(self.threads)
        return self.threads

    def _reread(self, last: CpuTimes) -> None:
        try:
            cur = self._read()
        except (OSError, ValueError, IndexError):
            return
        span = (cur.wall - last.wall) * self._ticks_per_s
        others = ((cur.busy - last.busy) - (cur.own - last.own)) / span if span > 0 else 0.0
        self.others_busy = max(0.0, others)
        self._last = cur
        threads = threads_for(self.cores, self.others_busy, self.ceiling)
        if threads != self.threads:
            log.debug("other processes keep %.2f of %d cores busy: sampling on %d torch threads",
                      self.others_busy, self.cores, threads)
        self.threads = threads
