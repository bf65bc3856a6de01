"""Sampling below temperature 1: the learner's logprobs, entropy and gradients are those of softmax(logits / T),
the distribution the rollout engine draws from, on every head path; and a run takes T from one key."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from selfplay.learner.fused_loss import packed_policy_loss  # noqa: E402
from selfplay.learner.logprobs import chunked_logprobs, tempered  # noqa: E402
from selfplay.learner.packing import pack, shift_to_tokens, unpack  # noqa: E402


def _setup(seed: int = 0, lens=(5, 8), vocab: int = 30, hidden: int = 6):
    g = torch.Generator().manual_seed(seed)
    head = torch.nn.Linear(hidden, vocab, bias=False).double()
    with torch.no_grad():
        head.weight.copy_(torch.randn(vocab, hidden, generator=g, dtype=torch.float64))
    seqs = [torch.randint(0, vocab, (n,), generator=g).tolist() for n in lens]
    return head, pack(seqs), torch.randn(sum(lens), hidden, generator=g, dtype=torch.float64), seqs


@pytest.mark.parametrize("temperature", [0.5, 0.7, 1.0, 1.3])
def test_tempered_logprobs_are_log_softmax_of_logits_over_t(temperature):
    head, packed, hidden, _ = _setup()
    lp, ent = chunked_logprobs(head, tempered(hidden, temperature), packed.targets, chunk=3)
    logp = torch.log_softmax(head(hidden) / temperature, dim=-1)
    valid = packed.targets >= 0
    want = logp.gather(1, packed.targets.clamp(min=0)[:, None])[:, 0]
    assert torch.allclose(lp[valid], want[valid], atol=1e-12)
    assert torch.allclose(ent, -(logp.exp() * logp).sum(-1), atol=1e-10)
    if temperature != 1.0:  # the check can fail: T changes the values
        plain = torch.log_softmax(head(hidden), dim=-1).gather(1, packed.targets.clamp(min=0)[:, None])[:, 0]
        assert not torch.allclose(lp[valid], plain[valid], atol=1e-3)


def test_fused_policy_gradient_at_temperature_equals_autograd_of_the_tempered_softmax():
    head, packed, hidden, seqs = _setup(seed=1)
    t = max(len(s) for s in seqs)
    mask = torch.zeros(len(seqs), t, dtype=torch.float64)
    for b, s in enumerate(seqs):
        mask[b, 1:len(s)] = 1.0
    adv = torch.tensor([[1.0], [-0.5]], dtype=torch.float64) * mask
    with torch.no_grad():
        lp0 = unpack(shift_to_tokens(chunked_logprobs(head, tempered(hidden, 0.6), packed.targets)[0],
                                     packed.seq_lens), packed.seq_lens)
    grads = []
    for fused in (True, False):
        h = hidden.clone().requires_grad_(True)
        head.weight.grad = None
        if fused:
            loss, _ = packed_policy_loss(head, tempered(h, 0.6), packed, lp0, adv, mask, agg="token-mean", chunk=4)
        else:  # the reference: full logits divided by T, log-softmax, ratio 1 at the old logprobs
            logp = torch.log_softmax(head(h) / 0.6, dim=-1).gather(1, packed.targets.clamp(min=0)[:, None])[:, 0]
            lp = unpack(shift_to_tokens(torch.where(packed.targets >= 0, logp, 0.0), packed.seq_lens),
                        packed.seq_lens)
            loss = -((lp - lp0).exp() * adv * mask).sum() / mask.sum()
        loss.backward()
        grads.append((h.grad, head.weight.grad))
    for a, b in zip(*grads):
        assert torch.allclose(a, b, atol=1e-10), (a, b)
    assert float(grads[0][0].abs().sum()) > 0


@pytest.mark.slow
def test_learner_at_the_rollout_temperature_reproduces_the_samplers_logprobs(tmp_path, learner_engine):
    pytest.importorskip("deepspeed")
    from agent_scaffold.policies.hf import HFPolicy
    from agent_scaffold.policy import TRAINING
    from selfplay.learner.config import EngineConfig
    from selfplay.learner.tiny_model import save_tiny_model

    model = save_tiny_model(tmp_path / "tiny")
    policy = HFPolicy(model)
    prompt = policy.tokenizer.encode("def add(a, b):\n    return")
    done = policy.generate([prompt], TRAINING.with_(temperature=0.6, max_new_tokens=24, seed=5))[0]
    seq = prompt + list(done.token_ids)
    at_t = learner_engine(EngineConfig(model_dir=str(model), temperature=0.6, gradient_checkpointing=False))
    ours = at_t.logprobs([seq])[0][len(prompt):]
    assert ours == pytest.approx(list(done.logprobs), abs=1e-4)
    plain = learner_engine(EngineConfig(model_dir=str(model), gradient_checkpointing=False))
    assert plain.logprobs([seq])[0][len(prompt):] != pytest.approx(list(done.logprobs), abs=1e-2)


def test_a_run_takes_the_learner_temperature_from_the_rollout_key():
    from selfplay.config.loader import load_config

    cfg = load_config("smoke", ["rollout.temperature=0.7"])
    assert cfg.rollout.temperature == 0.7
    with pytest.raises(ValueError, match=r"rollout.temperature must be in \(0, 2\]"):
        load_config("smoke", ["rollout.temperature=0"])
    with pytest.raises(ValueError, match="set rollout.temperature only"):
        load_config("smoke", ["rollout.temperature=0.7", "learner.engine.temperature=0.5"])
