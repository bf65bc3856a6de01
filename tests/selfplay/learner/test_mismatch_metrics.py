"""Rollout-learner mismatch, logged every update when TIS is on: learner/mismatch_abs (mean |logp_learner -
logp_engine| over trained tokens) and learner/tis_clipfrac (share of those tokens whose TIS weight is capped)."""

from __future__ import annotations

import pytest

from selfplay.learner.batch import Sample
from selfplay.learner.config import EngineConfig, LossConfig


@pytest.mark.slow
def test_mismatch_and_tis_clip_fraction_are_measured_against_the_learners_own_logprobs(tmp_path):
    pytest.importorskip("deepspeed")
    from selfplay.learner.engine import LearnerEngine
    from selfplay.learner.tiny_model import save_tiny_model

    engine = LearnerEngine(EngineConfig(model_dir=str(save_tiny_model(tmp_path / "tiny")), lr=1e-6, warmup_steps=1,
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
