"""The project's cache root, ~/.cache/selfplay (SELFPLAY_CACHE overrides it), and a cross-process file lock.

Shared by every package (repo sources, images, the embedded model, warm starts): `repos` sits at the
bottom of the import graph, so this is the one definition the others import.
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
