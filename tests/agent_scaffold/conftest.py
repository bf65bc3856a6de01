"""Shared fixtures: the real SmolLM2 tokenizer and policy are loaded once per session; the toolz Docker
sandbox is created once per session and reset between tests."""

from __future__ import annotations

import pytest
from local_sandbox import LocalSandbox
from toolz_box import toolz_box


@pytest.fixture(scope="session")
def hf_policy():
    pytest.importorskip("transformers")
    from agent_scaffold.policies.hf import HFPolicy

    return HFPolicy()  # the embedded default, converted once and cached


@pytest.fixture(scope="session")
def tokenizer(hf_policy):
    return hf_policy.tokenizer


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory):
    """A 2-layer random Llama with the embedded tokenizer (`save_tiny_model`): decode steps cost milliseconds."""
    pytest.importorskip("transformers")
    from selfplay.learner.tiny_model import save_tiny_model

    return save_tiny_model(tmp_path_factory.mktemp("tiny"))


@pytest.fixture
def local_sandbox(tmp_path):
    return LocalSandbox(tmp_path, {"pkg/mod.py": "def add(a, b):\n    return a - b\n\n\ndef one():\n    return 1\n",
                                   "README": "demo\n"})


@pytest.fixture(scope="session")
def toolz_sandbox_session():
    yield from toolz_box()


@pytest.fixture
def toolz_sandbox(toolz_sandbox_session):
    toolz_sandbox_session.reset()
    return toolz_sandbox_session
