"""Engine step, checkpoint round-trip through transformers and HFPolicy, YaRN carried into the rollout
engine, resume with optimizer state and training state (injector baselines), monotonic versions."""

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("deepspeed")

from selfplay.learner.baseline import RunningMeanBaseline  # noqa: E402
from selfplay.learner.checkpoint import latest_checkpoint, read_version  # noqa: E402
from selfplay.learner.errors import LearnerError  # noqa: E402

from .conftest import YARN, make_samples  # noqa: E402


def test_train_step_metrics(trained):
    engine, samples, m, _, _ = trained
    for key in ("learner/loss", "learner/clipfrac", "learner/approx_kl", "learner/entropy", "learner/grad_norm",
                "learner/tokens_per_s"):
        assert key in m and m[key] == m[key], key  # present and not NaN
    assert m["learner/microbatches"] == 2  # token_budget 24 splits the four samples
    assert m["learner/grad_norm"] > 0 and m["learner/entropy"] > 0
    assert engine.version == 1


def test_checkpoint_loads_in_transformers_and_hfpolicy_identically(trained):
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from agent_scaffold.policies.hf import HFPolicy

    engine, samples, _, root, path = trained
    assert path.name == "v000001" and read_version(path) == 1 and latest_checkpoint(root) == path
    cfg = json.loads((path / "config.json").read_text())
    assert "quantization_config" not in cfg
    assert cfg["rope_parameters"]["rope_type"] == "yarn" and cfg["rope_scaling"]["factor"] == YARN["factor"]
    assert cfg["max_position_embeddings"] == 16384
    assert AutoConfig.from_pretrained(path).rope_parameters["rope_type"] == "yarn"
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    state = engine.state_dict()
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, state[name]), name
    assert AutoTokenizer.from_pretrained(path).encode("hello") == engine.tokenizer.encode("hello")

    # The rollout engine loads the same weights *and* the same RoPE scaling: logprobs agree.
    policy = HFPolicy(path)
    assert policy.model.config.rope_parameters["rope_type"] == "yarn"
    seq = list(samples[0].input_ids)
    with torch.no_grad():
        logits = policy.model(input_ids=torch.tensor([seq])).logits[0]
    ref = torch.log_softmax(logits.float(), -1)[:-1].gather(-1, torch.tensor(seq[1:])[:, None])[:, 0]
    ours = torch.tensor(engine.logprobs([seq])[0][1:])
    assert torch.allclose(ours, ref, atol=1e-4)


def test_resume_restores_optimizer_and_version(trained, learner_engine):
    from selfplay.learner.config import EngineConfig

    engine, samples, _, root, path = trained
    resumed = learner_engine(EngineConfig(lr=1e-4, warmup_steps=1, rope_scaling=YARN, max_position_embeddings=16384,
                                          token_budget=24))
    state = resumed.resume(path)
    assert resumed.version == 1
    baseline = RunningMeanBaseline.from_state_dict(state["injector_baseline"])
    assert baseline.baseline("toolz|removal") == pytest.approx(0.35) and baseline.baseline("toolz|history") == -1.0
    assert baseline.baseline("other|removal") == pytest.approx(-0.1)  # the role-wide mean, restored too
    probe = ["model.layers.3.mlp.up_proj.weight", "model.embed_tokens.weight"]
    for name in probe:
        assert torch.equal(resumed.state_dict()[name], engine.state_dict()[name])
    batch = make_samples(engine.tokenizer, 2)
    engine.train_step(batch)
    resumed.train_step(batch)
    # Adam's second step depends on the first step's moments: equal only if optimizer state was restored.
    for name in probe:
        assert torch.allclose(resumed.state_dict()[name], engine.state_dict()[name], atol=1e-7), name
    assert engine.version == resumed.version == 2
    with pytest.raises(LearnerError, match="JSON-serialisable"):
        resumed.save(root, state={"baseline": object()})
    with pytest.raises(LearnerError, match="not newer"):
        resumed.version = 1
        resumed.save(root)


def test_a_weights_only_checkpoint_seeds_an_engine_but_refuses_to_resume(trained, learner_engine):
    """v0 was saved without optimizer/ (as every checkpoint but the newest ends up): its weights load into
    a new engine (EngineConfig.model_dir), and resuming from it names the reason instead of starting Adam
    afresh."""
    from safetensors.torch import load_file

    from selfplay.learner.checkpoint import checkpoint_name, has_optimizer_state
    from selfplay.learner.config import EngineConfig

    _, _, _, root, _ = trained
    v0 = root / checkpoint_name(0)
    assert not has_optimizer_state(v0)
    seeded = learner_engine(EngineConfig(model_dir=str(v0), lr=1e-4, warmup_steps=1, token_budget=24))
    saved = load_file(str(v0 / "model.safetensors"))
    name = "model.layers.3.mlp.up_proj.weight"
    assert torch.equal(seeded.state_dict()[name], saved[name])
    with pytest.raises(LearnerError, match="no optimizer/ state"):
        seeded.resume(v0)
    assert seeded.version == 0
