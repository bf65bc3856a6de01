"""Shared Docker fixtures: one tiny repo image (built once, reused by tag) and one session sandbox.

The image is `selfplay-base:bookworm` plus a small git repository at /testbed (a text module, a
binary file, a subdirectory, a line no other file has, and its bytecode) committed and tagged
`selfplay-base`, and an empty /opt/venv/bin: the same layout repo images have, without the minutes a real
`pip install` costs.
"""

from __future__ import annotations

import hashlib

import pytest

BASE = "selfplay-base:bookworm"
SETUP = r"""
set -e
mkdir -p /opt/venv/bin /testbed/pkg
cd /testbed
printf 'def add(a, b):\n    return a + b\n\nORIGIN = "selfplay-original-line-5c1e"\n' > pkg/calc.py
printf 'hello\n' > README.txt
printf '\x00\x01\x02\xff\xfe binary\n' > data.bin
printf 'caf\xe9 latin-1\n' > latin1.txt
git init -q
git add -A
git -c user.name=selfplay -c user.email=selfplay@localhost commit -qm base
git tag selfplay-base
printf '__pycache__/\n' >> .git/info/exclude
python3 -m compileall -q pkg  # bytecode of the original in the image, as an installed repo may have
"""


def _image_tag(kind: str) -> str:
    from sandboxes.shell import IMAGE_SNAPSHOT

    text = SETUP + (IMAGE_SNAPSHOT if kind == "snapshot" else "")
    return f"selfplay-test-repo-{kind}:" + hashlib.sha256(text.encode()).hexdigest()[:12]


def _build(kind: str) -> str:
    """The test repo image: "snapshot" carries the workdir's snapshot like sandboxes.images builds do
    (tmpfs workdir); "plain" is an image not built by us (overlay workdir, snapshot made at start)."""
    import docker.errors

    from sandboxes.engine import docker_client
    from sandboxes.shell import IMAGE_SNAPSHOT, SNAPSHOT_LABEL

    client = docker_client()
    tag = _image_tag(kind)
    try:
        client.images.get(tag)
        return tag
    except docker.errors.ImageNotFound:
        pass
    try:
        client.images.get(BASE)
    except docker.errors.ImageNotFound:
        from sandboxes.images import ensure_base_image

        ensure_base_image()
    script = SETUP + ("bash -c \"$0\" snapshot /testbed" if kind == "snapshot" else "")
    container = client.containers.run(BASE, ["bash", "-c", script, IMAGE_SNAPSHOT], detach=True,
                                      network_mode="none")
    try:
        status = container.wait(timeout=120)
        assert status["StatusCode"] == 0, container.logs().decode(errors="replace")
        repo, _, version = tag.partition(":")
        changes = [f"LABEL {SNAPSHOT_LABEL}=1"] if kind == "snapshot" else []
        container.commit(repository=repo, tag=version, changes=changes)
    finally:
        container.remove(force=True)
    return tag


@pytest.fixture(scope="session")
def repo_image() -> str:
    """Tag of the test repo image with a snapshot (as repo images are built); built on first use (tests
    using it carry the `docker` marker, whose gate runs before fixtures)."""
    return _build("snapshot")


@pytest.fixture(scope="session")
def plain_image() -> str:
    """Tag of the same repo in an image not built by us (no snapshot, no label)."""
    return _build("plain")


def _sandbox(image: str):
    from sandboxes.docker import DockerSandbox, DockerSandboxConfig

    return DockerSandbox.create(image, config=DockerSandboxConfig(cpus=1.0, mem_limit="512m", pids_limit=128),
                                run_id="pytest-sandboxes")


@pytest.fixture(scope="session")
def session_sandbox(repo_image):
    sb = _sandbox(repo_image)
    yield sb
    sb.close()


@pytest.fixture(scope="session")
def plain_session_sandbox(plain_image):
    sb = _sandbox(plain_image)
    yield sb
    sb.close()


@pytest.fixture
def sandbox(session_sandbox):
    """The shared sandbox, reset after each test (which also exercises `reset`)."""
    yield session_sandbox
    session_sandbox.reset()


@pytest.fixture(params=["tmpfs", "overlay"])
def any_sandbox(request):
    """The shared sandbox of each workdir kind (tmpfs: snapshot image; overlay: plain image), reset after."""
    sb = request.getfixturevalue("session_sandbox" if request.param == "tmpfs" else "plain_session_sandbox")
    assert sb.mode == request.param
    yield sb
    sb.reset()
