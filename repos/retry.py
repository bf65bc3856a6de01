"""`retry`: call a function again after transient failures, with a backoff between tries.

One loop for every client that talks to something that can be briefly unavailable (the policy server
over HTTP, the task store's database). What counts as transient and how long to wait stay with the
caller. Here, at the bottom of the import graph, with the project's other shared helpers (`repos.cache`,
`repos.errors`), so that `agent_scaffold` and `selfplay` both reach it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")


def retry(fn: Callable[[], T], *, attempts: int, transient: Callable[[Exception], bool],
          backoff: Callable[[int], float], what: str = "call") -> T:
    """`fn()`, tried up to `attempts` times. An exception `transient` rejects propagates at once; the last
    try's exception propagates whatever it is. Before try k (k = 1, 2, ...; try 0 runs at once) it sleeps
    `backoff(k)` seconds."""
    if attempts < 1:
        raise ValueError(f"retry needs attempts >= 1, got {attempts}")
    for attempt in range(attempts):
        if attempt:
            time.sleep(backoff(attempt))
        try:
            return fn()
        except Exception as exc:
            if attempt == attempts - 1 or not transient(exc):
                raise
            log.debug("retrying %s (try %d of %d) after %s: %s", what, attempt + 2, attempts,
                      exc.__class__.__name__, exc)
    raise AssertionError("unreachable")
