"""LoRA adapters (selfplay/learner/lora.py): the adapted model starts as the base model, only adapters
train, and what leaves the engine (state dict, checkpoint) is a plain HF model computing what the adapted
one does."""

import pytest

torch = pytest.importorskip("torch")

from selfplay.learner.config import EngineConfig  # noqa: E402


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from selfplay.learner.tiny_model import save_tiny_model

    return save_tiny_model(tmp_path_factory.mktemp("tiny"))


def _load(path):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation="sdpa").eval()


def _logits(model, ids):
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids])).logits


IDS = [1, 57, 902, 33, 4015, 77, 12, 9]


def test_adapters_start_at_the_base_model_and_merge_into_plain_weights(tiny):
    from selfplay.learner.lora import add_adapters, merged_state_dict

    base, adapted = _load(tiny), _load(tiny)
    n = add_adapters(adapted, rank=2, alpha=8.0, targets=("q_proj", "v_proj", "down_proj"))
    trainable = {k for k, p in adapted.named_parameters() if p.requires_grad}
    assert trainable and all(k.endswith((".lora_A", ".lora_B")) for k in trainable)
    assert n == sum(p.numel() for p in adapted.parameters() if p.requires_grad)
    assert torch.equal(_logits(base, IDS), _logits(adapted, IDS))  # B = 0: exactly the base model
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for k, p in adapted.named_parameters():
            if k.endswith(".lora_B"):
                p.copy_(torch.randn(p.shape, generator=g) * 0.05)
    moved = _logits(adapted, IDS)
    assert not torch.allclose(moved, _logits(base, IDS), atol=1e-3)
    merged = merged_state_dict(adapted.state_dict(), scale=8.0 / 2)
    assert set(merged) == set(base.state_dict())
    base.load_state_dict(merged)
    assert torch.allclose(_logits(base, IDS), moved, atol=1e-5)


def test_adapter_settings_are_checked(tiny):
    from selfplay.learner.lora import add_adapters

    with pytest.raises(ValueError, match="lora_targets"):
        add_adapters(_load(tiny), rank=2, alpha=8.0, targets=("no_such_proj",))
    with pytest.raises(ValueError, match="lora_rank"):
        EngineConfig(lora_rank=-1)
    with pytest.raises(ValueError, match="lora_targets"):
        EngineConfig(lora_rank=4, lora_targets=())


@pytest.mark.parametrize("lr", [0.0, 1e-2])
def test_engine_trains_only_adapters_and_exports_the_merged_model(tiny, tmp_path, lr, learner_engine):
    pytest.importorskip("deepspeed")
    from selfplay.learner.checkpoint import save_checkpoint

    from .conftest import make_samples

    engine = learner_engine(EngineConfig(model_dir=str(tiny), lr=lr, warmup_steps=1, lora_rank=4))
    before = {k: v.clone() for k, v in engine.module.state_dict().items()}
    m = engine.train_step(make_samples(engine.tokenizer))
    assert m["learner/grad_norm"] > 0
    after = engine.module.state_dict()
    for k, v in before.items():
        if k.endswith(".lora_B") and lr:
            continue
        if k.endswith(".lora_A"):
            continue  # B was 0 at the step: A's gradient is 0 and only weight decay moves it
        assert torch.equal(v, after[k]), k  # frozen base weights (and, at LR 0, everything) stay bit-identical
    if lr:
        assert any(not torch.equal(before[k], after[k]) for k in before if k.endswith(".lora_B"))
    state = engine.state_dict()
    base = _load(tiny)
    assert set(state) == set(base.state_dict())
    if not lr:  # the control arm's weights: bit-identical to the base
        assert all(torch.equal(state[k], v) for k, v in base.state_dict().items())
    path = save_checkpoint(engine, tmp_path / "ckpt", optimizer=False)
    engine.module.eval()
    ids = make_samples(engine.tokenizer)[0].input_ids
    with torch.no_grad():
        live = engine.module(input_ids=torch.tensor([ids])).logits
    saved = _logits(_load(path), list(ids))
    assert torch.allclose(saved, live, atol=1e-5)
    assert lr == 0 or not torch.allclose(saved, _logits(base, list(ids)), atol=1e-6)


def test_targets_a_model_lacks_are_named(tmp_path, caplog):
    """Phi-3 fuses q/k/v into qkv_proj and gate/up into gate_up_proj: the default targets match only two of
    its projections, which is said, with the names that did match."""
    from selfplay.learner.config import EngineConfig as Defaults
    from selfplay.learner.lora import add_adapters
    from selfplay.learner.tiny_model import save_tiny_model

    phi3 = _load(save_tiny_model(tmp_path / "phi3", arch="phi3"))
    with caplog.at_level("WARNING", logger="selfplay.learner.lora"):
        add_adapters(phi3, rank=2, alpha=8.0, targets=Defaults().lora_targets)
    assert "no nn.Linear layer named q_proj, k_proj, v_proj, gate_proj, up_proj in Phi3ForCausalLM" in caplog.text
    assert "adapters only on down_proj, o_proj" in caplog.text
