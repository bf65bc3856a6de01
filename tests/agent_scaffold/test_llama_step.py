"""`LlamaStep` against the HF forward it replaces in decode steps: the same tokens and logprobs (to float
rounding) for a batch whose rows join and leave, on a tiny random Llama and on the real SmolLM2; weights
changed in place reach it; models it does not write out are left to the HF forward with the reason."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from agent_scaffold.policies.hf import HFPolicy  # noqa: E402
from agent_scaffold.policies.llama_step import LlamaStep, unsupported  # noqa: E402
from agent_scaffold.policy import SamplingParams  # noqa: E402


def _rows(policy):
    """Prompts of 3 lengths, each with its own token budget (so rows leave the batch at different steps),
    greedy and sampled with fixed seeds."""
    tok = policy.tokenizer
    texts = ["Hi", "List the files in the repository, then run the tests.", "Write a function that merges two "
             "sorted lists and returns the merged list without duplicates."]
    prompts = [tok.encode(t) for t in texts] * 2
    params = [SamplingParams(temperature=0, max_new_tokens=n, seed=i) for i, n in enumerate((5, 12, 8))] + \
             [SamplingParams(temperature=1.0, max_new_tokens=n, seed=10 + i) for i, n in enumerate((9, 4, 12))]
    return prompts, params


def _calls(monkeypatch, step_class=LlamaStep):
    """The batch size of every call of `step_class` from now on (a list that fills as steps run)."""
    calls = []
    original = step_class.__call__

    def counted(self, *args, **kwargs):
        calls.append(len(args[0]))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(step_class, "__call__", counted)
    return calls


def _same_samples(fast, reference, abs_logp, prompts=None, params=None):
    """`fast` samples what `reference` does (tokens, finish reasons; logprobs to `abs_logp`) on `prompts`
    (default: `_rows`)."""
    if prompts is None:
        prompts, params = _rows(fast)
    got, want = fast.generate_rows(prompts, params), reference.generate_rows(prompts, params)
    for g, w in zip(got, want):
        assert g.token_ids == w.token_ids and g.finish_reason == w.finish_reason
        assert g.logprobs == pytest.approx(w.logprobs, abs=abs_logp)
    return got


def test_decode_steps_match_the_hf_forward_as_rows_join_and_leave(tiny_dir, monkeypatch):
    fast, reference = HFPolicy(tiny_dir), HFPolicy(tiny_dir, fast_decode=False)
    assert fast.llama_step() is not None and reference.llama_step() is None
    calls = _calls(monkeypatch)
    _same_samples(fast, reference, 1e-5)
    assert calls and max(calls) == 6 and min(calls) < 6  # every step ran it, at shrinking batch sizes


def test_rows_attending_in_separate_runs_decode_the_same(tiny_dir, monkeypatch):
    """Rows of different lengths attend in contiguous runs, each over its own columns (free calls make
    every length change a run of its own here): samples and logprobs equal the HF forward's."""
    import agent_scaffold.policies.llama_step as llama_step
    from agent_scaffold.policies.attention_segments import attention_segments

    splits = []

    def free_calls(*args, **kwargs):
        runs = attention_segments(*args, **kwargs, call_cost=0.0)
        splits.append(len(runs))
        return runs

    monkeypatch.setattr(llama_step, "attention_segments", free_calls)
    fast, reference = HFPolicy(tiny_dir), HFPolicy(tiny_dir, fast_decode=False)
    _same_samples(fast, reference, 1e-5)
    assert max(splits) > 1


def test_the_embedded_smollm2_decodes_the_same_through_it(monkeypatch):
    from agent_scaffold.embedded import default_model_dir

    model_dir = default_model_dir()
    fast, reference = HFPolicy(model_dir), HFPolicy(model_dir, fast_decode=False)
    calls = _calls(monkeypatch)
    _same_samples(fast, reference, 1e-4)
    assert calls


def test_products_padded_to_a_multiple_of_rows_give_the_rows_alone(tiny_dir):
    """Row counts that `PRODUCT_ROWS` pads (and those it does not) multiply to what `F.linear` gives."""
    step = HFPolicy(tiny_dir).llama_step()
    weight = step.layers[0][2]  # the fused gate and up projections, (out, in)
    gen = torch.Generator().manual_seed(0)
    for rows in (1, 2, 8, 9, 10, 13, 15, 16, 18, 23):
        x = torch.randn(rows, 1, weight.shape[1], generator=gen)
        got = step._product(x, weight)
        assert got.shape == (rows, 1, weight.shape[0])
        assert torch.allclose(got, torch.nn.functional.linear(x, weight), atol=1e-5), rows


def test_a_batch_of_padded_products_decodes_as_the_hf_forward(tiny_dir):
    """13 rows (products padded to 16) sample the tokens and logprobs of the HF forward."""
    fast, reference = HFPolicy(tiny_dir), HFPolicy(tiny_dir, fast_decode=False)
    prompts, params = _rows(fast)
    prompts, params = prompts * 2 + prompts[:1], params * 2 + params[:1]
    got, want = fast.generate_rows(prompts, params), reference.generate_rows(prompts, params)
    for g, w in zip(got, want):
        assert g.token_ids == w.token_ids and g.logprobs == pytest.approx(w.logprobs, abs=1e-5)


def test_weights_changed_in_place_reach_the_step(tiny_dir, tmp_path):
    """Its fused projections are the model's own weights: a checkpoint load, and a parameter edited in place,
    change what it decodes exactly as they change the HF forward's."""
    from selfplay.learner.tiny_model import save_tiny_model

    other_dir = save_tiny_model(tmp_path / "other", seed=1)
    fast, reference = HFPolicy(tiny_dir), HFPolicy(other_dir, fast_decode=False)
    assert fast.llama_step() is not None  # built before the load: the load must reach its fused weights
    fast.load_weights(other_dir, 1)
    loaded = _same_samples(fast, reference, 1e-5)
    for policy in (fast, reference):
        with torch.no_grad():
            policy.model.model.layers[0].self_attn.k_proj.weight.mul_(3.0)
            policy.model.model.layers[1].mlp.up_proj.weight.add_(0.5)
    edited = _same_samples(fast, reference, 1e-5)
    assert [c.logprobs for c in edited] != [c.logprobs for c in loaded]  # the edit moved the decode
    cfg = fast.model.config
    q_rows = cfg.num_attention_heads * (cfg.hidden_size // cfg.num_attention_heads)
    k_proj = fast.model.model.layers[0].self_attn.k_proj.weight
    qkv = fast.llama_step().layers[0][0]  # (q + 2 kv, in), the fused weight
    assert k_proj.data_ptr() == qkv[q_rows:].data_ptr() and k_proj.stride() == (qkv.shape[1], 1)


def test_a_policy_whose_weights_it_holds_saves_a_checkpoint_that_loads_back(tiny_dir, tmp_path):
    """Once the step is built the model's projections are views into its fused buffers (shared storage);
    `HFPolicy.save_pretrained` writes each as its own tensor, and what it wrote loads back into a fresh
    policy with every weight equal."""
    policy = HFPolicy(tiny_dir)
    assert policy.llama_step() is not None
    with torch.no_grad():
        policy.model.model.layers[0].self_attn.v_proj.weight.add_(0.25)  # not the weights of tiny_dir
    policy.save_pretrained(tmp_path / "ckpt")
    fresh = HFPolicy(tiny_dir, fast_decode=False)
    fresh.load_weights(tmp_path / "ckpt", 1)
    saved, loaded = policy.model.state_dict(), fresh.model.state_dict()
    assert saved.keys() == loaded.keys()
    assert all(torch.equal(saved[k], loaded[k]) for k in saved)


def test_models_it_does_not_write_out_decode_through_the_hf_forward(tiny_dir):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_dir)
    model.config.attention_bias = True
    assert unsupported(model) == "attention or MLP biases"
    with pytest.raises(ValueError, match="attention or MLP biases; decode it through the HF forward"):
        LlamaStep(model, torch)
    model.config.attention_bias = False
    assert unsupported(model) is None
    handle = model.model.layers[0].mlp.register_forward_hook(lambda *a: None)
    assert "forward hooks on ['model.layers.0.mlp']" in unsupported(model)
    handle.remove()
    model.config.model_type = "qwen2"
    assert unsupported(model) == "model_type 'qwen2' is not 'llama'"


def _peaked(policy):
    """Sharpen a random model's next-token distributions (final norm scaled up) and its attention (q/k/v
    scaled up), so that an error in the step moves logprobs by much more than bf16 rounding does: with RoPE
    left out of the step, the bf16 gap below is 0.62, against 0.06 for both paths."""
    with torch.no_grad():
        policy.model.model.norm.weight.mul_(20.0)
        for layer in policy.model.model.layers:
            for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                proj.weight.mul_(4.0)
    return policy


def _gap_to_full_forward(policy, prompts, params):
    """Largest |logprob of a sampled token - the same token's logprob in one full HF forward of prompt and
    completion| over all rows, with the number of tokens compared."""
    worst, n = 0.0, 0
    for prompt, c in zip(prompts, policy.generate_rows(prompts, params)):
        ids = torch.tensor([list(prompt) + list(c.token_ids)], device=policy.model.device)
        with torch.no_grad():
            logits = policy.model(ids).logits[0, len(prompt) - 1:-1].float()
        full = torch.log_softmax(logits, -1).gather(-1, ids[0, len(prompt):, None])[:, 0]
        # The first token comes from the prefill (the HF forward on both paths): compare the decoded ones.
        worst = max(worst, (full - torch.tensor(c.logprobs, device=full.device))[1:].abs().max().item())
        n += len(c.token_ids) - 1
    return worst, n


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_bf16_and_the_device_decode_as_close_to_a_full_forward_as_the_hf_forward_does(tiny_dir, device, monkeypatch):
    """fp32 on `device`: the same samples as the HF forward. bf16, where op order changes the rounding: the
    step's logprobs are as close to a full HF forward of the sampled sequence as the HF decode path's own."""
    fast, reference = HFPolicy(tiny_dir, device=device), HFPolicy(tiny_dir, device=device, fast_decode=False)
    calls = _calls(monkeypatch)
    _same_samples(_peaked(fast), _peaked(reference), 1e-4)
    assert calls
    prompts, _ = _rows(fast)
    params = [SamplingParams(temperature=1.0, max_new_tokens=16, seed=i) for i in range(len(prompts))]
    fast16 = _peaked(HFPolicy(tiny_dir, device=device, dtype=torch.bfloat16))
    ref16 = _peaked(HFPolicy(tiny_dir, device=device, dtype=torch.bfloat16, fast_decode=False))
    calls.clear()
    fast_gap, n = _gap_to_full_forward(fast16, prompts, params)
    ref_gap, _ = _gap_to_full_forward(ref16, prompts, params)
    assert calls and n == 15 * len(prompts)
    assert fast_gap <= 2 * ref_gap + 0.05, (fast_gap, ref_gap)
