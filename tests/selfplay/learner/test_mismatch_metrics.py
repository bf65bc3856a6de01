"""Rollout-learner mismatch, logged every update when TIS is on: learner/mismatch_abs (mean |logp_learner -
logp_engine| over trained tokens) and learner/tis_clipfrac (share of those tokens whose TIS weight is capped)."""

from __future__ import annotations

import pytest

from selfplay.learner.batch import Sample
from selfplay.learner.config import EngineConfig, LossConfig

torch = pytest.importorskip("torch")


@pytest.mark.slow
def test_mismatch_and_tis_clip_fraction_are_measured_against_the_learners_own_logprobs(tmp_path, learner_engine):
    pytest.importorskip("deepspeed")
    from selfplay.learner.tiny_model import save_tiny_model

    engine = learner_engine(EngineConfig(model_dir=str(save_tiny_model(tmp_path / "tiny")), lr=1e-6, warmup_steps=1,
                                         gradient_checkpointing=False, loss=LossConfig(tis_cap=2.0)))
    tok = engine.tokenizer
    seqs = [tok.encode("The capital of France is Paris."), tok.encode("def f(x): return x + 1")]
    learner = engine.logprobs(seqs)
    masks = [(0,) * 3 + (1,) * (len(s) - 3) for s in seqs]

    def samples(shift):  # the sampler's logprobs: the learner's own, shifted by `shift` on every token
        return [Sample(tuple(s), m, tuple(lp - shift for lp in row), 1.0) for s, m, row in zip(seqs, masks, learner)]

    exact = engine.train_step(samples(0.0), learner_old=learner)
    assert exact["learner/mismatch_abs"] == pytest.approx(0.0, abs=1e-6) and exact["learner/tis_clipfrac"] == 0.0
    # logp_engine = logp_learner - 1: every weight is e > 2, so every trained token is clipped.
    off = engine.train_step(samples(1.0), learner_old=learner)
    assert off["learner/mismatch_abs"] == pytest.approx(1.0, abs=1e-5) and off["learner/tis_clipfrac"] == 1.0
    small = engine.train_step(samples(0.25), learner_old=learner)
    assert small["learner/mismatch_abs"] == pytest.approx(0.25, abs=1e-5) and small["learner/tis_clipfrac"] == 0.0


@pytest.mark.slow
@pytest.mark.parametrize("fused", [True, False])
def test_a_first_step_takes_the_learners_old_logprobs_from_its_own_forward(tmp_path, fused, learner_engine):
    """`train_step(learner_old=None)` with TIS on: the ratio's and the TIS weight's learner logprobs are this
    step's own forward, detached (the weights have not moved yet), so the step, its loss and its mismatch
    metrics equal those of a step given the same logprobs from a separate pass, without that pass."""
    pytest.importorskip("deepspeed")
    from selfplay.learner.engine import LearnerEngine
    from selfplay.learner.tiny_model import save_tiny_model

    model = str(save_tiny_model(tmp_path / "tiny"))
    # Adam's eps 1 makes its first step about lr * gradient (at eps 1e-8 it is lr * sign(gradient), which
    # float noise flips for gradients near 0), so the two steps compare by their gradients
    cfg = EngineConfig(model_dir=model, lr=1.0, eps=1.0, warmup_steps=1, gradient_checkpointing=False,
                       fused_head=fused, weight_decay=0.0, loss=LossConfig(tis_cap=2.0))
    own, given = learner_engine(cfg), learner_engine(cfg)
    tok = own.tokenizer
    seqs = [tok.encode("The capital of France is Paris."), tok.encode("def f(x): return x + 1")]
    learner = given.logprobs(seqs)
    masks = [(0,) * 3 + (1,) * (len(s) - 3) for s in seqs]
    # the sampler's logprobs 0.9 below the learner's on every other token: those TIS weights (e^0.9) hit the cap
    batch = [Sample(tuple(s), m, tuple(lp - 0.9 * (i % 2) for i, lp in enumerate(row)), adv)
             for s, m, row, adv in zip(seqs, masks, learner, (1.0, -1.0))]
    before = {k: v.detach().clone() for k, v in own.state_dict().items()}
    calls = []
    original = LearnerEngine.logprobs
    LearnerEngine.logprobs = lambda self, *a, **k: calls.append(1) or original(self, *a, **k)
    try:
        a = own.train_step(batch)
    finally:
        LearnerEngine.logprobs = original
    b = given.train_step(batch, learner_old=learner)
    assert not calls  # no pass of its own
    assert 0 < a["learner/tis_clipfrac"] < 1 and a["learner/ratio_mean"] == pytest.approx(1.0, abs=1e-6)
    for key in ("learner/loss", "learner/mismatch_abs", "learner/tis_clipfrac", "learner/tis_weight_mean"):
        assert a[key] == pytest.approx(b[key], rel=1e-4, abs=1e-6), key
    wa, wb = own.state_dict(), given.state_dict()
    moved = {k: wa[k] - before[k] for k in wa}
    assert max(float(d.abs().max()) for d in moved.values()) > 1e-4  # the step moved them
    assert all(torch.allclose(moved[k], wb[k] - before[k], rtol=1e-3, atol=1e-7) for k in wa)
