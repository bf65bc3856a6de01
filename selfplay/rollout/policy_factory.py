"""The rollout policy of a run, built from `PolicyConfig`: one source of a `Policy` per episode.

hf: one in-process checkpoint shared by every worker thread, wrapped in `BatchingPolicy` so concurrent
episodes are sampled in one continuously batched decode, with their KV caches kept between turns.
openai/vllm: HTTP endpoints (`vllm serve`, `selfplay serve-policy`), load-balanced round robin per
generate call. scripted: per-role queues of action lists
from a JSON file, one list per episode, replayed with the embedded model's tokenizer (a real backend for
tests and benchmarks, not a mock).
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from agent_scaffold.embedded import default_model_dir
from agent_scaffold.policies.batching import BatchingPolicy
from agent_scaffold.policies.hf import HFPolicy
from agent_scaffold.policies.openai import OpenAIPolicy
from agent_scaffold.policies.scripted import ScriptedPolicy
from agent_scaffold.policy import Completion, Policy, SamplingParams
from selfplay.config.refs import hub_id
from selfplay.config.run_config import PolicyConfig
from selfplay.errors import SelfPlayError

log = logging.getLogger(__name__)


class PolicySource(Protocol):
    """Hands each episode the policy it plays with."""

    def policy_for(self, role: str, version: int) -> Policy:
        """The policy of one episode of `role`, requested at policy `version`."""
        ...


class SharedPolicy:
    """Every episode plays with the same policy (hf, openai, vllm)."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy

    def policy_for(self, role: str, version: int) -> Policy:
        return self.policy


class ScriptedQueues:
    """Per-role queues of action lists: each episode of a role takes that role's next list (cycling
    when all were used, so a long scripted run never runs dry); thread-safe."""

    def __init__(self, actions: Mapping[str, Sequence[Sequence[str]]], tokenizer: Any) -> None:
        self.actions = {role: [list(a) for a in lists] for role, lists in actions.items()}
        self.tokenizer = tokenizer
        self._next = {role: itertools.cycle(lists) for role, lists in self.actions.items() if lists}
        self._lock = threading.Lock()

    def policy_for(self, role: str, version: int) -> Policy:
        with self._lock:
            if role not in self._next:
                raise SelfPlayError(f"the scripted policy has no action lists for the {role} role; add "
                                    f'"{role}": [[action, ...], ...] to policy.scripted_actions')
            actions = next(self._next[role])
        # the script plays "as" the requested version: it has no weights, so it is never stale
        return ScriptedPolicy(actions, tokenizer=self.tokenizer, version=version)


class RoundRobinPolicy:
    """Several OpenAI-compatible endpoints of the same weights; each generate call goes to the next one."""

    def __init__(self, policies: Sequence[Policy]) -> None:
        if not policies:
            raise ValueError("RoundRobinPolicy needs at least one policy")
        self.policies = list(policies)
        self.tokenizer = self.policies[0].tokenizer
        self._turn = itertools.cycle(range(len(self.policies)))
        self._lock = threading.Lock()

    @property
    def version(self) -> int:
        return min(int(p.version) for p in self.policies)

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Completion]:
        with self._lock:
            policy = self.policies[next(self._turn)]
        return policy.generate(prompts, params)


def load_scripted_actions(path: str | Path) -> dict[str, list[list[str]]]:
    """Read and check `policy.scripted_actions`: {"injector": [[action, ...], ...], "solver": [...]}."""
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except FileNotFoundError:
        raise SelfPlayError(f"policy.scripted_actions: {p} does not exist") from None
    except json.JSONDecodeError as exc:
        raise SelfPlayError(f"policy.scripted_actions: {p} is not JSON ({exc})") from None
    shape = '{"injector": [[action, ...], ...], "solver": [[action, ...], ...]}'
    if not isinstance(data, dict) or not set(data) <= {"injector", "solver"} or not data:
        raise SelfPlayError(f"policy.scripted_actions: {p} must be an object {shape}")
    for role, lists in data.items():
        if not isinstance(lists, list) or not all(
                isinstance(a, list) and all(isinstance(s, str) for s in a) for a in lists):
            raise SelfPlayError(f"policy.scripted_actions: {p}[{role!r}] must be a list of lists of action "
                                f"texts ({shape})")
    return data


def embedded_tokenizer(model_dir: str | None = None) -> Any:
    """The HF tokenizer of `model_dir` (default: the embedded model) whose chat template renders prompts."""
    try:
        from transformers import AutoTokenizer
    except ImportError as exc:
        raise ImportError("the scripted and HTTP policies render the chat template of the model's tokenizer: "
                          "pip install 'selfplay-swe[train]'") from exc
    if model_dir is None:
        model_dir = str(default_model_dir())
    try:
        return AutoTokenizer.from_pretrained(model_dir)
    except (OSError, ValueError) as exc:  # a hub id without the hub, a folder without tokenizer files
        why = " ".join(str(exc).split())[:300]
        raise SelfPlayError(f"cannot load a tokenizer from {model_dir!r} ({why}); name a local folder that holds "
                            "the model's tokenizer files") from None


def resolve_device(device: str) -> str:
    """`auto` is cuda when torch sees a GPU, else cpu."""
    if device != "auto":
        return device
    try:
        import torch
    except ImportError:
        return "cpu"
    return "cuda" if torch.cuda.is_available() else "cpu"


def hf_policy(config: PolicyConfig, model_dir: str | None = None, version: int = 0) -> Policy:
    """The in-process checkpoint, batched across episode threads by `BatchingPolicy`."""
    policy = HFPolicy(model_dir or config.model_dir, device=resolve_device(config.device), version=int(version),
                      kv_cache_mb=config.kv_cache_mb, cpu_threads=config.cpu_threads,
                      adapt_threads=config.adapt_threads, fast_decode=config.fast_decode,
                      lookup_tokens=config.lookup_tokens, lookup_rows=config.lookup_rows,
                      decode_engine=config.decode_engine)
    return BatchingPolicy(policy, max_batch=config.max_batch, max_wait_s=config.batch_wait_s,
                          switch_interval_s=config.gil_switch_ms / 1e3 or None)


def http_policy(config: PolicyConfig) -> Policy:
    """Round robin over `config.endpoints`, in token mode with one tokenizer: the first endpoint's client's
    (`served_client`, `policy.model_dir` as its tokenizer)."""
    first = served_client(config.endpoints[0], config.model_name, tokenizer=config.model_dir,
                          setting="policy.model_dir")
    rest = [OpenAIPolicy(url, config.model_name, tokenizer=first.tokenizer) for url in config.endpoints[1:]]
    return RoundRobinPolicy([first, *rest])


def served_client(base_url: str, model: str | None = None, *, tokenizer: str | None = None,
                  api_key: str | None = None, setting: str = "--tokenizer") -> OpenAIPolicy:
    """A client of one server, always in token mode, because the agent loop is token-exact. Its tokenizer is
    `tokenizer` (a folder or hub id; `setting` names where the user sets it), else the served model's name when
    it is either (`vllm serve DIR`), else the embedded model's, with a warning (`--served-model-name NAME`)."""
    client = OpenAIPolicy(base_url, model, tokenizer=tokenizer, api_key=api_key)
    if client.tokenizer is None:
        client.tokenizer = embedded_tokenizer(served_name_source(client.model, setting))
    return client


def served_name_source(name: str | None, setting: str) -> str | None:
    """`name`, a served model's, when a tokenizer can be loaded from it (a directory or a hub id), else None:
    the embedded model's tokenizer renders prompts, with a warning naming `setting`."""
    if name and (Path(name).is_dir() or hub_id(name)):
        return name
    log.warning("%s is not set and the served model %r is neither a directory nor a hub id: prompts are "
                "rendered with the embedded model's tokenizer; set %s to the served checkpoint if that is not "
                "its tokenizer", setting, name, setting)
    return None


def policy_source(config: PolicyConfig, policy: Policy | None = None) -> PolicySource:
    """The per-episode policy source of `config` (or of `policy`, an already built one)."""
    if policy is not None:
        return policy if hasattr(policy, "policy_for") else SharedPolicy(policy)  # type: ignore[return-value]
    if config.backend == "scripted":
        if not config.scripted_actions:
            raise SelfPlayError("policy.backend=scripted needs policy.scripted_actions, a JSON file "
                                '{"injector": [[action, ...], ...], "solver": [[action, ...], ...]}')
        return ScriptedQueues(load_scripted_actions(config.scripted_actions), embedded_tokenizer(config.model_dir))
    if config.backend in ("openai", "vllm"):
        return SharedPolicy(http_policy(config))
    if config.backend == "hf":
        return SharedPolicy(hf_policy(config))
    raise SelfPlayError(f"policy.backend must be hf, openai, vllm or scripted, got {config.backend!r}")
