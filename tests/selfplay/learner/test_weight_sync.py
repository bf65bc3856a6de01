"""Weight sync: a real `selfplay serve-policy` subprocess takes a learner checkpoint over HTTP; the
in-process HFPolicy backend in both modes; the vLLM call sequence against a documented test double."""

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from selfplay.learner.errors import WeightSyncError
from selfplay.learner.weight_sync import HFPolicySync, HTTPPolicySync, VLLMDiskSync

torch = pytest.importorskip("torch")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def serve_policy(trained):
    """`selfplay serve-policy` started, as rollout servers must be, from the learner's v0 checkpoint (which
    carries the model options, here YaRN: reloading copies tensors, not the RoPE config)."""
    root = trained[3]
    port = _free_port()
    exe = Path(sys.executable).with_name("selfplay")
    proc = subprocess.Popen([str(exe), "serve-policy", "--port", str(port), "--model", str(root / "v000000")], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, env={**os.environ})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 180
        while True:
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"serve-policy did not start: {proc.stdout.read().decode()[-2000:]}")
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def v1(trained):
    """The v1 checkpoint's own weights and version (the session engine may have trained further since)."""
    from transformers import AutoModelForCausalLM

    from selfplay.learner.checkpoint import read_version

    engine, _, _, _, path = trained
    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation="sdpa").eval(), \
        read_version(path)


def test_http_sync_to_real_serve_policy(trained, v1, serve_policy):
    engine, samples, _, _, path = trained
    model, version = v1
    assert httpx.get(f"{serve_policy}/weight_info").json()["weight_version"] == 0
    prompt = list(samples[0].input_ids[:5])
    request = {"prompt": prompt, "max_tokens": 4, "logprobs": 0, "return_token_ids": True, "seed": 3,
               "return_weight_versions": True}
    old = httpx.post(f"{serve_policy}/v1/completions", timeout=120, json=request).json()["choices"][0]
    assert engine.logprobs([prompt + old["token_ids"]], model)[0][len(prompt):] != pytest.approx(
        old["logprobs"]["token_logprobs"], abs=1e-3)  # the server still has the v0 weights
    sync = HTTPPolicySync(serve_policy)
    sync.push(version, checkpoint_dir=path)
    assert httpx.get(f"{serve_policy}/weight_info").json()["weight_version"] == version
    # The server now samples from the learner's weights: its behaviour logprobs match the learner's.
    r = httpx.post(f"{serve_policy}/v1/completions", timeout=120, json=request).json()["choices"][0]
    assert r["weight_versions"][0]["version"] == version
    ours = engine.logprobs([prompt + r["token_ids"]], model)[0][len(prompt):]
    assert ours == pytest.approx(r["logprobs"]["token_logprobs"], abs=1e-3)
    with pytest.raises(WeightSyncError, match="checkpoint_dir"):
        sync.push(version + 1)
    with pytest.raises(WeightSyncError, match="400|500"):
        sync.push(version + 1, checkpoint_dir=path.parent / "missing")
    sync.close()


@pytest.mark.parametrize("mode", ["disk", "memory"])
def test_hfpolicy_sync_modes(trained, v1, mode):
    from agent_scaffold.policies.hf import HFPolicy

    engine, samples, _, root, path = trained
    model, version = v1
    state = model.state_dict()
    with pytest.raises(WeightSyncError, match="RoPE"):  # a policy built without the learner's YaRN option
        HFPolicySync(HFPolicy(), "disk").push(version, checkpoint_dir=path)
    policy = HFPolicy(root / "v000000")
    before = policy.model.state_dict()["model.layers.0.self_attn.q_proj.weight"].clone()
    HFPolicySync(policy, mode).push(version, checkpoint_dir=path, state_dict=state)
    after = policy.model.state_dict()["model.layers.0.self_attn.q_proj.weight"]
    assert policy.version == version
    assert not torch.equal(before, after)
    assert torch.equal(after, state["model.layers.0.self_attn.q_proj.weight"])


def test_vllm_disk_sync_call_sequence(tmp_path):
    """Test double: an httpx.MockTransport answering like vLLM 0.33's dev-mode routes (read from the wheel,
    see docs/learner.md). It checks our request sequence and bodies; it is not vLLM."""
    calls = []
    state = {"version": "0", "paused": False}

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        calls.append((request.method, request.url.path, dict(request.url.params), body))
        path = request.url.path
        if path == "/pause":
            state["paused"] = True
        elif path == "/resume":
            state["paused"] = False
        elif path == "/collective_rpc":
            assert state["paused"] and body["method"] == "reload_weights"
            return httpx.Response(200, json={"results": [None]})
        elif path == "/update_weight_version":
            state["version"] = body["new_version"]
        elif path == "/weight_info":
            return httpx.Response(200, json={"weight_version": state["version"]})
        elif path != "/reset_prefix_cache":
            return httpx.Response(404, json={"detail": "Not Found"})
        return httpx.Response(200, json={})

    sync = VLLMDiskSync("http://vllm", transport=httpx.MockTransport(handler))
    sync.push(7, checkpoint_dir=tmp_path)
    assert [c[1] for c in calls] == ["/pause", "/collective_rpc", "/update_weight_version", "/reset_prefix_cache",
                                     "/resume", "/weight_info"]
    assert calls[0][2] == {"mode": "wait"}
    assert calls[1][3] == {"method": "reload_weights", "kwargs": {"weights_path": str(tmp_path.resolve())}}
    assert not state["paused"] and state["version"] == "7"

    def no_dev_mode(request):
        return httpx.Response(404 if request.url.path != "/resume" else 200, json={"detail": "Not Found"})

    with pytest.raises(WeightSyncError, match="VLLM_SERVER_DEV_MODE"):
        VLLMDiskSync("http://vllm", transport=httpx.MockTransport(no_dev_mode)).push(8, checkpoint_dir=tmp_path)
