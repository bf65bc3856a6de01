"""Shared Docker fixtures: one tiny repo image (built once, reused by tag) and one session sandbox.

The image is `selfplay-base:bookworm` plus a small git repository at /testbed (a text module, a
binary file, a subdirectory) committed and tagged `selfplay-base`, and an empty /opt/venv/bin: the same
layout engineer B's repo images have, without the minutes a real `pip install` costs.
"""

from __future__ import annotations

import hashlib

import pytest

BASE = "selfplay-base:bookworm"
SETUP = r"""
set -e
mkdir -p /opt/venv/bin /testbed/pkg
cd /testbed
printf 'def add(a, b):\n    return a + b\n' > pkg/calc.py
printf 'hello\n' > README.txt
printf '\x00\x01\x02\xff\xfe binary\n' > data.bin
printf 'caf\xe9 latin-1\n' > latin1.txt
git init -q
git add -A
git -c user.name=selfplay -c user.email=selfplay@localhost commit -qm base
git tag selfplay-base
"""


def _image_tag() -> str:
    return "selfplay-test-repo:" + hashlib.sha256(SETUP.encode()).hexdigest()[:12]


@pytest.fixture(scope="session")
def repo_image() -> str:
    """Tag of the test repo image; built from the base image on first use (tests using it carry the
    `docker` marker, whose gate runs before fixtures)."""
    import docker.errors

    from sandboxes.engine import docker_client

    client = docker_client()
    tag = _image_tag()
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
    container = client.containers.run(BASE, ["bash", "-c", SETUP], detach=True, network_mode="none")
    try:
        status = container.wait(timeout=120)
        assert status["StatusCode"] == 0, container.logs().decode(errors="replace")
        repo, _, version = tag.partition(":")
        container.commit(repository=repo, tag=version)
    finally:
        container.remove(force=True)
    return tag


@pytest.fixture(scope="session")
def session_sandbox(repo_image):
    from sandboxes.docker import DockerSandbox, DockerSandboxConfig

    sb = DockerSandbox.create(repo_image, config=DockerSandboxConfig(cpus=1.0, mem_limit="512m",
                                                                       pids_limit=128),
                              run_id="pytest-sandboxes")
    yield sb
    sb.close()


@pytest.fixture
def sandbox(session_sandbox):
    """The shared sandbox, reset after each test (which also exercises `reset`)."""
    yield session_sandbox
    session_sandbox.reset()
