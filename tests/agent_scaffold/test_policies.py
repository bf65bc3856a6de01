"""The real hf policy (embedded SmolLM2 on CPU) and the HTTP path against a real `serve-policy` server."""

import shutil
from pathlib import Path

import httpx
import pytest

from agent_scaffold.errors import PolicyError
from agent_scaffold.policies.openai import OpenAIPolicy, parse_token_ids
from agent_scaffold.policy import SamplingParams
from agent_scaffold.policy_server import PolicyServer

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def prompt(tokenizer):
    text = tokenizer.apply_chat_template([{"role": "user", "content": "List files."}], add_generation_prompt=True,
                                         tokenize=False)
    return tokenizer.encode(text, add_special_tokens=False)


@pytest.fixture(scope="module")
def server(hf_policy):
    # Loopback, random free port; a long batching window so concurrent test requests surely share a batch.
    srv = PolicyServer(hf_policy, port=0, max_wait_s=0.5)
    srv.start()
    yield srv
    srv.shutdown()


def test_hf_logprobs_are_the_temperature_1_log_softmax_and_seeded(hf_policy, prompt):
    import torch

    params = SamplingParams(max_new_tokens=6, seed=7)
    a, b = hf_policy.generate([prompt, prompt], params)
    alone = hf_policy.generate([prompt], params)[0]  # same seed, same sample (batch shape moves rounding only)
    assert alone.token_ids == a.token_ids and alone.logprobs == pytest.approx(a.logprobs, abs=1e-4)
    assert len(a.token_ids) == len(a.logprobs) == 6 and a.finish_reason == "length"
    with torch.inference_mode():
        logits = hf_policy.model(torch.tensor([prompt + list(a.token_ids)])).logits[0].float()
    ref = torch.log_softmax(logits, -1)[len(prompt) - 1:-1].gather(1, torch.tensor(a.token_ids)[:, None])[:, 0]
    assert torch.allclose(ref, torch.tensor(a.logprobs), atol=1e-4)


def test_http_client_matches_direct_hf(server, hf_policy, prompt):
    params = SamplingParams(max_new_tokens=5, seed=11)
    direct = hf_policy.generate([prompt, prompt], params)
    client = OpenAIPolicy(server.url, tokenizer=hf_policy.tokenizer)
    assert client.model == server.model_name and client.version == hf_policy.version
    remote = client.generate([prompt, prompt], params)  # two concurrent requests, seeds 11 and 12
    assert [c.token_ids for c in remote] == [c.token_ids for c in direct]
    for r, d in zip(remote, direct):
        # The server batches continuously: the two requests may decode in other batch shapes than the
        # direct call's, which moves logprobs by float rounding (~1e-5), never the sample.
        assert r.logprobs == pytest.approx(d.logprobs, abs=1e-4) and r.finish_reason == d.finish_reason
    chat = client.chat([[{"role": "user", "content": "List files."}]], params)[0]
    assert chat.token_ids == direct[0].token_ids and chat.text == direct[0].text


def test_concurrent_clients_are_sampled_in_one_batch(server, hf_policy, prompt):
    from concurrent.futures import ThreadPoolExecutor

    clients = [OpenAIPolicy(server.url, tokenizer=hf_policy.tokenizer) for _ in range(3)]
    params = [SamplingParams(max_new_tokens=3 + i, seed=20 + i) for i in range(3)]
    prompts = [prompt, prompt[:-3], prompt + prompt[-3:]]  # different lengths: padded rows
    before = server.policy.batches
    with ThreadPoolExecutor(3) as pool:
        remote = list(pool.map(lambda i: clients[i].generate([prompts[i]], params[i])[0], range(3)))
    assert server.policy.batches - before < 3  # three episodes' requests, fewer batches
    for i, r in enumerate(remote):
        direct = hf_policy.generate([prompts[i]], params[i])[0]
        assert r.token_ids == direct.token_ids and r.logprobs == pytest.approx(direct.logprobs, abs=1e-4)


def test_server_endpoints_and_errors(server, hf_policy, tmp_path):
    import torch
    from safetensors.torch import load_file, save_file

    with httpx.Client(base_url=server.url) as http:
        assert http.get("/health").json() == {"status": "ok"}
        assert http.get("/weight_info").json() == {"weight_version": 0}
        r = http.post("/v1/completions", json={"prompt": "Hi", "n": 2, "seed": 1, "max_tokens": 2, "logprobs": 0,
                                               "return_tokens_as_token_ids": True})
        choices = r.json()["choices"]
        assert len(choices) == 2 and len(parse_token_ids(choices[0])) == 2
        assert http.post("/v1/completions", json={"prompt": []}).status_code == 400
        assert "must be" in http.post("/v1/completions", json={"prompt": [[]]}).json()["error"]["message"]
        assert http.post("/reload_weights", json={}).status_code == 400
        assert http.get("/nope").status_code == 404
        # The learner's path: a checkpoint directory with changed weights, then /reload_weights.
        for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
            shutil.copy(Path(hf_policy.model_dir) / name, tmp_path / name)
        weights = load_file(Path(hf_policy.model_dir) / "model.safetensors")
        weights["model.norm.weight"] = weights["model.norm.weight"] * 2
        save_file(weights, tmp_path / "model.safetensors")
        before = hf_policy.model.model.norm.weight.detach().clone()
        assert http.post("/reload_weights", json={"weights_path": str(tmp_path), "version": 3}).json() == {"version": 3}
        assert http.get("/weight_info").json() == {"weight_version": 3}
        assert torch.allclose(hf_policy.model.model.norm.weight, before * 2)
        r = http.post("/v1/completions", json={"prompt": "Hi", "max_tokens": 1, "return_weight_versions": True})
        assert r.json()["choices"][0]["weight_versions"][0]["version"] == 3
        hf_policy.load_weights(hf_policy.model_dir, 0)  # restore for the other tests
    dead = OpenAIPolicy("http://127.0.0.1:9", model="m", max_retries=1, backoff=0.01, timeout=2)
    with pytest.raises(PolicyError, match="failed after 2 attempts: ConnectError"):
        dead.generate([[1, 2]], SamplingParams(max_new_tokens=1))


def test_make_policy_names_the_backends():
    from agent_scaffold.policies import make_policy

    with pytest.raises(ValueError, match="choose one of hf, openai, vllm, scripted"):
        make_policy("llamacpp")
    assert make_policy("scripted", actions=["```submit\n```"]).remaining == 1


@pytest.mark.gpu
def test_vllm_policy_matches_its_logprobs(tokenizer, prompt):
    pytest.importorskip("vllm", reason="vLLM is not installed (the `gpu` extra); CI never installs it")
    from agent_scaffold.policies.vllm import VLLMPolicy

    policy = VLLMPolicy(gpu_memory_utilization=0.3)
    a = policy.generate([prompt], SamplingParams(max_new_tokens=8, seed=3))[0]
    assert a == policy.generate([prompt], SamplingParams(max_new_tokens=8, seed=3))[0]
    assert len(a.token_ids) == len(a.logprobs) and all(lp <= 0 for lp in a.logprobs)
