"""Policy backends, each one module imported on first use: hf, openai, vllm, scripted."""

from __future__ import annotations

import importlib
from typing import Any

BACKENDS = {
    "hf": ("agent_scaffold.policies.hf", "HFPolicy"),
    "openai": ("agent_scaffold.policies.openai", "OpenAIPolicy"),
    "vllm": ("agent_scaffold.policies.vllm", "VLLMPolicy"),
    "scripted": ("agent_scaffold.policies.scripted", "ScriptedPolicy"),
}


def make_policy(name: str, **kwargs: Any) -> Any:
    """Construct the backend `name` with `kwargs` (heavy imports happen here, not at package import).

    Local weights take `version=` (hf, scripted): a policy built from checkpoint N must report version N,
    or a resumed run sees every rollout as stale. Endpoint backends (openai) read it from the server."""
    if name not in BACKENDS:
        raise ValueError(f"unknown policy backend {name!r}; choose one of {', '.join(BACKENDS)}")
    module, cls = BACKENDS[name]
    return getattr(importlib.import_module(module), cls)(**kwargs)
