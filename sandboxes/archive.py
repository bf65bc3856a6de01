"""Files in and out of a container through the engine's archive endpoints (tar), bytes-safe.

No exec is involved, so reading and writing work even while the container's pids limit is exhausted.
"""

from __future__ import annotations

import base64
import errno
import io
import json
import tarfile
import time
from typing import Any

from sandboxes.errors import FileTooLarge

_MODE_DIR = 1 << 31  # Go's os.ModeDir, as the engine reports it


def path_stat(api: Any, cid: str, path: str) -> dict | None:
    """The engine's stat of `path` (name, size, mode, mtime, linkTarget); None on 404, which a HEAD
    request cannot tell apart from a missing container (the caller checks the container then)."""
    r = api.head(api._url("/containers/{0}/archive", cid), params={"path": path})
    if r.status_code == 404:
        return None
    api._raise_for_status(r)
    header = r.headers.get("X-Docker-Container-Path-Stat")
    return json.loads(base64.b64decode(header)) if header else None


def get_file(api: Any, cid: str, path: str, max_bytes: int | None = None) -> bytes:
    """Bytes of the regular file at `path`, following symlinks (at most 20). Raises FileTooLarge when the
    engine's stat says it is over `max_bytes`, before transferring anything; the transfer itself stops
    past the cap too (a file that grows meanwhile)."""
    for _ in range(20):
        st = path_stat(api, cid, path)
        if st is None:
            raise FileNotFoundError(f"{path} does not exist in sandbox {cid[:12]}")
        if st.get("mode", 0) & _MODE_DIR:
            raise IsADirectoryError(f"{path} is a directory")
        target = st.get("linkTarget")
        if not target:
            break
        path = target if target.startswith("/") else f"{path.rsplit('/', 1)[0]}/{target}"
    if max_bytes is not None and st.get("size", 0) > max_bytes:
        raise _too_large(path, st.get("size", 0), max_bytes)
    stream, _ = api.get_archive(cid, path)
    buf, total = io.BytesIO(), 0
    room = None if max_bytes is None else max_bytes + 64 * 1024  # tar headers and padding
    for chunk in stream:
        total += len(chunk)
        if room is not None and total > room:
            getattr(stream, "close", lambda: None)()  # stop the transfer; the engine drops the rest
            raise _too_large(path, total, max_bytes)
        buf.write(chunk)
    buf.seek(0)
    with tarfile.open(fileobj=buf, mode="r") as tar:
        member = tar.next()
        extracted = tar.extractfile(member) if member is not None else None
        if extracted is None:
            raise OSError(f"could not read {path}: the engine returned no regular file")
        return extracted.read()


def _too_large(path: str, size: int, limit: int | None) -> FileTooLarge:
    return FileTooLarge(errno.EFBIG, f"{path} is larger than the read cap of {limit} bytes ({size} bytes); "
                        "read a part of it with a command (head, sed -n, grep) instead")


def put_file(api: Any, cid: str, path: str, data: bytes, mode: int = 0o644) -> None:
    """Write `data` to absolute `path`; missing parent directories are created by the engine."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo(path.lstrip("/"))
        info.size, info.mode, info.mtime = len(data), mode, int(time.time())
        tar.addfile(info, io.BytesIO(data))
    # Extracting at / with the full path lets the engine create missing parent directories.
    api.put_archive(cid, "/", buf.getvalue())
