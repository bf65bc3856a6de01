"""Pushing new weights from the learner to rollout engines, and telling them the new version.

`WeightSync.push(version, checkpoint_dir=None, state_dict=None)` must return only once the engine
serves `version` (each backend verifies it), so every rollout sampled afterwards reports that version.

Backends:
- `HFPolicySync`   in-process `HFPolicy`: from a checkpoint dir via `HFPolicy.load_weights` ("disk"), or
                   by copying tensors from the learner's state dict into the policy's model ("memory",
                   no disk I/O; used by the CPU learning demo).
- `HTTPPolicySync` `selfplay serve-policy`: POST /reload_weights {"weights_path", "version"}, then
                   GET /weight_info must answer the new version. Tested in CI against a real subprocess.
- `VLLMDiskSync`   remote `vllm serve` 0.33 (VLLM_SERVER_DEV_MODE=1): POST /pause?mode=wait ->
                   POST /collective_rpc {"method": "reload_weights", "kwargs": {"weights_path"}} ->
                   POST /update_weight_version -> POST /reset_prefix_cache -> POST /resume, then
                   GET /weight_info. Written from reading the vLLM 0.33.0 wheel's routes (see
                   docs/learner.md); NOT run here (no GPU). The NCCL broadcast path (vLLM's
                   WeightTransferTrainerFactory) is not implemented: it needs vLLM in the trainer process.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from selfplay.learner.errors import WeightSyncError

log = logging.getLogger(__name__)


class WeightSync(Protocol):
    """Moves the learner's weights of `version` into a rollout engine."""

    def push(self, version: int, checkpoint_dir: Path | None = None,
             state_dict: Mapping[str, Any] | None = None) -> None:
        """Load the weights (from `checkpoint_dir`, or `state_dict` where supported); engine serves `version` after."""
        ...


class HFPolicySync:
    """In-process `HFPolicy` (or any object with `model`, `version`, `load_weights`)."""

    def __init__(self, policy: Any, mode: str = "disk") -> None:
        if mode not in ("disk", "memory"):
            raise ValueError(f"mode must be 'disk' or 'memory', got {mode!r}")
        self.policy = policy
        self.mode = mode

    def push(self, version: int, checkpoint_dir: Path | None = None,
             state_dict: Mapping[str, Any] | None = None) -> None:
        if self.mode == "disk":
            if checkpoint_dir is None:
                raise WeightSyncError("HFPolicySync(mode='disk') needs checkpoint_dir; save a checkpoint first "
                                      "or use mode='memory'")
            _check_rope(self.policy, Path(checkpoint_dir))
            self.policy.load_weights(checkpoint_dir, version)
        else:
            if state_dict is None:
                raise WeightSyncError("HFPolicySync(mode='memory') needs state_dict (LearnerEngine.state_dict())")
            self._copy(state_dict, version)
        if self.policy.version != version:
            raise WeightSyncError(f"policy reports version {self.policy.version} after loading {version}")
        sync_engine = getattr(self.policy, "sync_engine", None)
        if sync_engine is not None:  # an engine with its own copy of the weights rebuilds now, inside the sync
            sync_engine()

    def _copy(self, state: Mapping[str, Any], version: int) -> None:
        import torch

        own = self.policy.model.state_dict()
        missing = [k for k in own if k not in state and "lm_head" not in k]  # tied heads may be absent
        if missing:
            raise WeightSyncError(f"learner state lacks {missing[:5]}: learner and policy differ in architecture")
        # HFPolicy's lock keeps generation from seeing half-copied weights.
        lock = getattr(self.policy, "_lock", None) or contextlib.nullcontext()
        with lock, torch.no_grad():
            for name, tensor in own.items():
                if name in state:
                    tensor.copy_(state[name].to(tensor.dtype))
            self.policy.version = int(version)


def _check_rope(policy: Any, checkpoint_dir: Path) -> None:
    """Reloading copies tensors only; RoPE settings live in the config, so they must already agree."""
    cfg_path = checkpoint_dir / "config.json"
    if not cfg_path.exists():
        raise WeightSyncError(f"{checkpoint_dir} has no config.json; pass a checkpoint written by the learner")
    theirs = json.loads(cfg_path.read_text()).get("rope_parameters") or {}
    ours = dict(getattr(policy.model.config, "rope_parameters", None) or {})
    if theirs.get("rope_type", "default") != ours.get("rope_type", "default") or \
            theirs.get("factor") != ours.get("factor"):
        raise WeightSyncError(f"{checkpoint_dir} uses RoPE {theirs} but the policy was built with {ours}; start "
                              "the rollout engine from the learner's v0 checkpoint so both apply the same "
                              "model options")


class HTTPPolicySync:
    """`selfplay serve-policy` (agent_scaffold.policy_server): /reload_weights + /weight_info."""

    def __init__(self, base_url: str, timeout: float = 600.0, transport: Any = None) -> None:
        import httpx  # lazy: httpx loads its CLI (rich, click, pygments), ~80 ms on `selfplay --help`

        self.base_url = base_url.rstrip("/")
        self.client = httpx.Client(base_url=self.base_url, timeout=timeout, transport=transport)

    def push(self, version: int, checkpoint_dir: Path | None = None,
             state_dict: Mapping[str, Any] | None = None) -> None:
        if checkpoint_dir is None:
            raise WeightSyncError(f"{self.base_url} loads weights from disk: pass checkpoint_dir")
        r = self.client.post("/reload_weights", json={"weights_path": str(Path(checkpoint_dir).resolve()),
                                                      "version": int(version)})
        if r.status_code != 200:
            raise WeightSyncError(f"{self.base_url}/reload_weights answered {r.status_code}: {r.text[:500]}")
        _check_version(self.client, self.base_url, version)

    def close(self) -> None:
        self.client.close()


class VLLMDiskSync:
    """Remote `vllm serve` (0.33, dev mode) reloading a checkpoint from a filesystem it shares with us."""

    def __init__(self, base_url: str, timeout: float = 1800.0, pause_mode: str = "wait",
                 transport: Any = None) -> None:
        import httpx  # lazy: as in HTTPPolicySync

        self.base_url = base_url.rstrip("/")
        self.pause_mode = pause_mode
        # `transport` lets tests substitute an httpx.MockTransport for the network.
        self.client = httpx.Client(base_url=self.base_url, timeout=timeout, transport=transport)

    def _post(self, path: str, **kwargs: Any) -> Any:
        r = self.client.post(path, **kwargs)
        if r.status_code != 200:
            hint = (" (vLLM registers these routes only with VLLM_SERVER_DEV_MODE=1)" if r.status_code == 404 else "")
            raise WeightSyncError(f"{self.base_url}{path} answered {r.status_code}{hint}: {r.text[:500]}")
        return r

    def push(self, version: int, checkpoint_dir: Path | None = None,
             state_dict: Mapping[str, Any] | None = None) -> None:
        if checkpoint_dir is None:
            raise WeightSyncError("VLLMDiskSync reloads from disk: pass checkpoint_dir (an HF safetensors dir)")
        self._post("/pause", params={"mode": self.pause_mode})
        try:
            self._post("/collective_rpc", json={"method": "reload_weights",
                                                "kwargs": {"weights_path": str(Path(checkpoint_dir).resolve())}})
            self._post("/update_weight_version", json={"new_version": str(version)})
            self._post("/reset_prefix_cache")  # cached KV was computed with the old weights
        finally:
            self._post("/resume")
        _check_version(self.client, self.base_url, version)

    def close(self) -> None:
        self.client.close()


def _check_version(client: Any, base_url: str, version: int) -> None:
    r = client.get("/weight_info")
    got = r.json().get("weight_version") if r.status_code == 200 else None
    if got is None or str(got) != str(version):
        raise WeightSyncError(f"{base_url} serves weight version {got!r} after loading {version}")
    log.info("%s now serves weight version %s", base_url, version)


class MultiSync:
    """Push to several engines in turn (e.g. a local HFPolicy and remote servers)."""

    def __init__(self, *targets: WeightSync) -> None:
        self.targets = targets

    def push(self, version: int, checkpoint_dir: Path | None = None,
             state_dict: Mapping[str, Any] | None = None) -> None:
        for t in self.targets:
            t.push(version, checkpoint_dir, state_dict)
