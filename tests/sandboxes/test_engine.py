"""The engine client: DOCKER_HOST is respected, and a dead one gives an error naming the fix."""

from __future__ import annotations

import pytest

from sandboxes import engine
from sandboxes.errors import EngineUnavailable


def test_unreachable_docker_host_names_the_fix(monkeypatch, tmp_path):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/nothing.sock")
    with pytest.raises(EngineUnavailable, match="selfplay setup") as info:
        engine.docker_client()
    assert "nothing.sock" in str(info.value)
    assert "nothing.sock" in engine.engine_problem()


def test_ensure_engine_does_not_install_for_a_custom_docker_host(monkeypatch, tmp_path):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/nothing.sock")
    said: list[str] = []
    asked: list[str] = []
    assert engine.ensure_engine(yes=True, ask=lambda q: asked.append(q) or True, say=said.append) is False
    assert asked == [] and "start that engine" in said[0]


@pytest.mark.docker
def test_client_is_cached_per_docker_host():
    assert engine.docker_client() is engine.docker_client()
    assert engine.engine_problem() is None
