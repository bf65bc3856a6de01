"""The kill-all count read while PID 1 rewrites it: a torn read is read again, not an engine error.

The real race (PID 1 rewriting the count during the engine's archive transfer) is timing-dependent; it
is exercised for real by test_docker.py::test_pid_one_still_reaps_after_a_kill_all. Here the engine is a
documented test double: `_FakeApi` answers the two archive calls `archive.get_file` makes, first with a
tar cut short (what the engine sends when the file shrinks under it), then with the whole file.
"""

from __future__ import annotations

import base64
import io
import json
import tarfile

import pytest

from sandboxes import archive
from sandboxes.docker import DockerSandbox
from sandboxes.errors import SandboxError


def _tar(name: str, data: bytes, *, cut: int = 0) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    raw = buf.getvalue()
    # Keep the header and `len(data) - cut` bytes of content: the header promises more than follows.
    return raw[:512 + len(data) - cut] if cut else raw


class _Head:
    def __init__(self, size: int) -> None:
        self.status_code = 200
        stat = {"name": "killed-all", "size": size, "mode": 0o644}
        self.headers = {"X-Docker-Container-Path-Stat": base64.b64encode(json.dumps(stat).encode()).decode()}


class _FakeApi:
    """Test double of docker's APIClient for `archive.get_file`: serves `bodies` in turn."""

    def __init__(self, bodies: list[bytes]) -> None:
        self.bodies = list(bodies)
        self.reads = 0

    def _url(self, template: str, cid: str) -> str:
        return template.format(cid)

    def _raise_for_status(self, response: object) -> None:
        pass

    def head(self, url: str, params: dict) -> _Head:
        return _Head(3)

    def get_archive(self, cid: str, path: str) -> tuple[list[bytes], dict]:
        self.reads += 1
        return [self.bodies.pop(0) if len(self.bodies) > 1 else self.bodies[0]], {}


def _sandbox(api: _FakeApi) -> DockerSandbox:
    sb = object.__new__(DockerSandbox)  # no container: only the count reader is under test
    sb._api, sb.id, sb.image = api, "c" * 64, "img"
    return sb


def test_a_torn_tar_is_a_tar_error():
    # The class the reader retries on is the one a cut-short transfer raises.
    with pytest.raises(tarfile.TarError, match="unexpected end of data"):
        archive.get_file(_FakeApi([_tar("killed-all", b"12\n", cut=2)]), "c" * 64, "/x/killed-all", max_bytes=64)


def test_a_torn_read_of_the_kill_count_is_read_again():
    api = _FakeApi([_tar("killed-all", b"12\n", cut=2), _tar("killed-all", b"12\n", cut=1),
                    _tar("killed-all", b"12\n")])
    assert _sandbox(api)._kills_done("c" * 64) == b"12\n"
    assert api.reads == 3


def test_a_count_that_is_always_torn_names_the_file_and_what_to_do():
    api = _FakeApi([_tar("killed-all", b"12\n", cut=2)])
    with pytest.raises(SandboxError, match="killed-all .* read torn .* close this sandbox"):
        _sandbox(api)._kills_done("c" * 64)
