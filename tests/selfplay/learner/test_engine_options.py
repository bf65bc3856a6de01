"""Engine options that need a GPU: bf16 on CUDA and the Ulysses sequence-parallel wiring."""

import pytest

from selfplay.learner.config import EngineConfig, LossConfig


def test_config_errors_name_the_field():
    with pytest.raises(ValueError, match="zero_stage"):
        EngineConfig(zero_stage=1)
    with pytest.raises(ValueError, match="norm_len"):
        LossConfig(agg="seq-mean-token-sum-norm")
    with pytest.raises(ValueError, match="agg"):
        LossConfig(agg="mean")
    with pytest.raises(ValueError, match="eps"):
        EngineConfig(eps=0.0)


def test_adam_eps_reaches_the_optimizer():
    from selfplay.learner.engine import ds_config

    assert ds_config(EngineConfig(), bf16=False)["optimizer"]["params"]["eps"] == 1e-8
    assert ds_config(EngineConfig(eps=1e-5), bf16=False)["optimizer"]["params"]["eps"] == 1e-5


def test_each_step_reports_the_lr_it_took(tmp_path, learner_engine):
    """Warm-up over 2 steps: the first update takes half the LR and says so (the scheduler has moved on to the
    next step's LR by the time the step's metrics are read)."""
    pytest.importorskip("deepspeed")
    from selfplay.learner.tiny_model import save_tiny_model

    from .conftest import make_samples

    engine = learner_engine(EngineConfig(model_dir=str(save_tiny_model(tmp_path / "tiny")), lr=1e-3, warmup_steps=2))
    lrs = [engine.train_step(make_samples(engine.tokenizer))["learner/lr"] for _ in range(3)]
    assert lrs == pytest.approx([5e-4, 1e-3, 1e-3])


@pytest.mark.gpu
def test_bf16_step_on_gpu(learner_engine):
    from .conftest import make_samples

    engine = learner_engine(EngineConfig(lr=1e-5, warmup_steps=1))
    assert str(engine.dtype) == "torch.bfloat16" and engine.device.type == "cuda"
    m = engine.train_step(make_samples(engine.tokenizer))
    assert m["learner/grad_norm"] > 0


@pytest.mark.gpu
def test_sequence_parallel_needs_several_gpus(learner_engine):
    """Ulysses/ALST on GPUs (NCCL, flash-attention varlen). The same path runs on CPU with two gloo ranks
    in test_sequence_parallel.py; this one needs a `deepspeed --num_gpus N` launch."""
    import os

    if int(os.environ.get("WORLD_SIZE", "1")) < 2:
        pytest.skip("Ulysses needs >= 2 ranks: run under `deepspeed --num_gpus 2 -m pytest -m gpu ...`")

    engine = learner_engine(EngineConfig(sequence_parallel_size=2))
    assert engine.sp_group is not None


@pytest.mark.slow
def test_zero3_with_tis_and_kl_on_cpu(tmp_path, learner_engine):
    """ZeRO-3 (gathered weights for saving), TIS recompute and the KL reference path, in one engine."""
    pytest.importorskip("deepspeed")
    import torch
    from transformers import AutoModelForCausalLM

    from selfplay.learner.checkpoint import save_checkpoint

    from .conftest import make_samples

    engine = learner_engine(EngineConfig(zero_stage=3, lr=1e-4, warmup_steps=1, gradient_checkpointing=False,
                                         loss=LossConfig(tis_cap=2.0, kl_coef=0.05)))
    m = engine.train_step(make_samples(engine.tokenizer, 2))
    # Rollout logprobs in make_samples are -1.0, far from the model's: TIS weights are capped at 2.
    assert 0 < m["learner/tis_weight_mean"] <= 2.0
    assert m["learner/kl"] == pytest.approx(0.0, abs=1e-6)  # first step: policy == reference
    assert m["learner/grad_norm"] > 0
    path = save_checkpoint(engine, tmp_path, optimizer=False)
    saved = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).state_dict()
    state = engine.state_dict()
    assert state["model.embed_tokens.weight"].shape == saved["model.embed_tokens.weight"].shape  # gathered, not a shard
    assert torch.equal(saved["model.layers.0.mlp.up_proj.weight"], state["model.layers.0.mlp.up_proj.weight"].float())
    engine.train_step(make_samples(engine.tokenizer, 2))
    assert engine.train_step(make_samples(engine.tokenizer, 2))["learner/kl"] > 0  # moved away from the reference
