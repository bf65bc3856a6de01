"""Files in and out of a container through the engine's archive endpoints (tar), bytes-safe.

No exec is involved, so reading and writing work even while the container's pids limit is exhausted.
"""

from __future__ import annotations

import base64
import io
import json
import tarfile
import time
from typing import Any

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


def get_file(api: Any, cid: str, path: str) -> bytes:
    """Bytes of the regular file at `path`, following symlinks (at most 20)."""
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
    stream, _ = api.get_archive(cid, path)
    with tarfile.open(fileobj=io.BytesIO(b"".join(stream)), mode="r") as tar:
        member = tar.next()
        extracted = tar.extractfile(member) if member is not None else None
        if extracted is None:
            raise OSError(f"could not read {path}: the engine returned no regular file")
        return extracted.read()


def put_file(api: Any, cid: str, path: str, data: bytes, mode: int = 0o644) -> None:
    """Write `data` to absolute `path`; missing parent directories are created by the engine."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo(path.lstrip("/"))
        info.size, info.mode, info.mtime = len(data), mode, int(time.time())
        tar.addfile(info, io.BytesIO(data))
    # Extracting at / with the full path lets the engine create missing parent directories.
    api.put_archive(cid, "/", buf.getvalue())
