"""Where the repos package keeps what it fetches: ~/.cache/selfplay (SELFPLAY_CACHE overrides it).

Duplicated from `agent_scaffold.embedded.cache_root` on purpose: `repos` sits below every other package
and must not import upward.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path


def cache_root() -> Path:
    """Root of the project's caches; SELFPLAY_CACHE overrides ~/.cache/selfplay."""
    return Path(os.environ.get("SELFPLAY_CACHE", Path.home() / ".cache" / "selfplay"))


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive advisory lock on `path` (created if missing): serialises work across processes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
