"""The `hf` sampler on model classes other than Llama: every logprob it reports is the model's own.

The reference is the model's plain forward over the whole sequence (transformers' own masks and cache), not
another path of the sampler. Each class runs with the config that makes its own path show at tiny size
(`tiny_model.ARCHITECTURES`): an 8-token sliding window, shorter than every prompt here, on all layers or on
one of two. Before the prefill kept every column of every layer, the model's own cache kept only a windowed
layer's last 7, and a left-padded row of a batch sampled from a different distribution (errors up to 0.6
nats on Qwen 2, 1.3 on Mistral).
"""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from agent_scaffold.policies.decode_batch import DecodeBatch
from agent_scaffold.policies.hf import HFPolicy
from agent_scaffold.policies.kv_store import PrefixKVStore
from agent_scaffold.policy import SamplingParams
from selfplay.learner.tiny_model import ARCHITECTURES, save_tiny_model


@pytest.fixture(scope="module", params=sorted(ARCHITECTURES))
def arch(request, tmp_path_factory):
    from transformers import AutoModelForCausalLM

    path = save_tiny_model(tmp_path_factory.mktemp(request.param), arch=request.param, head_scale=20.0,
                           **ARCHITECTURES[request.param])
    return HFPolicy(path), AutoModelForCausalLM.from_pretrained(path).eval()


def _model_logprobs(model, prompt, tokens):
    """The model's own log-softmax of each of `tokens` after `prompt`, from one forward."""
    import torch

    with torch.inference_mode():
        logits = model(torch.tensor([list(prompt) + list(tokens)])).logits[0].float()
    picked = torch.log_softmax(logits, -1)[len(prompt) - 1:-1].gather(1, torch.tensor(tokens)[:, None])[:, 0]
    return picked.tolist()


def _drain(batch):
    done = []
    while len(batch):
        done += batch.step()
    return done


def test_batched_joined_and_reused_rows_sample_the_models_own_distribution(arch):
    policy, model = arch
    assert policy.llama_step() is None  # the HF forward path, which these classes take
    tok = policy.tokenizer
    prompts = [tok.encode("The capital of France is Paris. " * 4), tok.encode("def f(x): return x + 1\n" * 3),
               tok.encode("List the files, then run the tests and read the failure. " * 2)]
    assert min(len(p) for p in prompts) > 2 * 8  # well past the window
    params = SamplingParams(max_new_tokens=12, stop_token_ids=())
    store = PrefixKVStore(64 * 2**20)
    batch = DecodeBatch(policy, store)
    batch.admit_many([(prompts[0], params, 1, 0), (prompts[1], params, 2, 1)])  # one left-padded prefill
    done = batch.step() + batch.step() + batch.step()
    batch.admit(prompts[2], params, 3, 2)  # joins the running batch
    done += _drain(batch)
    assert sorted(tag for tag, _ in done) == [0, 1, 2]
    for tag, c in done:
        assert len(c.token_ids) == 12
        assert c.logprobs == pytest.approx(_model_logprobs(model, prompts[tag], c.token_ids), abs=1e-4), tag
    # The next turn of row 0 prefills only its new tokens after the stored KV of the first turn's prompt.
    first = dict(done)[0]
    turn = prompts[0] + list(first.token_ids) + tok.encode("\n<observation>\nok: 3 passed\n</observation>\n")
    batch = DecodeBatch(policy, store)
    batch.admit(turn, params, 4, 0)
    (_, c), = _drain(batch)
    assert batch.prefilled_tokens < len(turn) - len(prompts[0]) + 1
    assert c.logprobs == pytest.approx(_model_logprobs(model, turn, c.token_ids), abs=1e-4)
