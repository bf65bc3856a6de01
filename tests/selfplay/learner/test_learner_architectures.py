"""The learner on model classes other than Llama: its logprobs are the model's own, or it refuses the model.

The learner never runs the model's own forward (it packs sequences into one row and runs the head chunk by
chunk), so a class whose attention or head differs from Llama's can train on other logprobs than its
sampler drew with, silently. The reference here is the model's plain forward over each sequence alone.
Before `packing.sliding_window` and `head_transform.logit_multiplier`, the packed logprobs were off by up to
2.8 nats on the windowed classes (one full-attention mask served every layer) and up to 17 on Granite and
Cohere (their constant on the logits was skipped).
"""

from __future__ import annotations

import pytest

transformers = pytest.importorskip("transformers")

from selfplay.learner.head_transform import UnsupportedHeadError, logit_multiplier  # noqa: E402
from selfplay.learner.packing import sliding_window  # noqa: E402  (imports torch)


def _config(arch, **overrides):
    from selfplay.learner.tiny_model import ARCHITECTURES

    return transformers.AutoConfig.for_model(arch, **{"num_hidden_layers": 2, **ARCHITECTURES.get(arch, {}), **overrides})


def test_windows_and_logit_constants_are_read_from_each_class_config():
    assert sliding_window(_config("llama")) is None
    assert sliding_window(_config("qwen3")) is None
    assert sliding_window(_config("qwen2")) == 8  # one of two layers
    assert sliding_window(_config("qwen2", use_sliding_window=False)) is None  # Qwen 2.5's own configs
    assert sliding_window(_config("mistral")) == 8
    assert sliding_window(_config("mistral", sliding_window=None)) is None
    assert sliding_window(_config("gemma3_text")) == 8
    assert logit_multiplier(_config("llama")) == 1.0
    assert logit_multiplier(_config("granite")) == 0.25
    assert logit_multiplier(_config("cohere")) == 0.5
    with pytest.raises(UnsupportedHeadError, match="final_logit_softcapping=30.0"):
        logit_multiplier(_config("gemma2"))
    # a multimodal checkpoint (Gemma 3 from 4B up) keeps them in its text config
    text = {"num_hidden_layers": 2, "sliding_window": 8, "layer_types": ["sliding_attention", "full_attention"]}
    assert sliding_window(transformers.AutoConfig.for_model("gemma3", text_config=text)) == 8
    assert logit_multiplier(transformers.AutoConfig.for_model("gemma3", text_config=text)) == 1.0
    with pytest.raises(ValueError, match="chunked_attention layers"):
        sliding_window(transformers.AutoConfig.for_model("llama4"))


@pytest.fixture(scope="module")
def sequences():
    from agent_scaffold.embedded import default_model_dir

    tok = transformers.AutoTokenizer.from_pretrained(default_model_dir())
    return [tok.encode("The capital of France is Paris. " * 4), tok.encode("def f(x): return x + 1\n" * 3)]


def _own_logprobs(model_dir, sequences, temperature):
    """Each sequence alone through the model's own forward: log-softmax(logits / T) of its next tokens."""
    import torch

    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir).eval()
    out = []
    with torch.inference_mode():
        for s in sequences:
            logits = model(torch.tensor([s])).logits[0].float() / temperature
            picked = torch.log_softmax(logits, -1)[:-1].gather(1, torch.tensor(s[1:])[:, None])[:, 0]
            out.append([0.0, *picked.tolist()])
    return out


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["llama", "qwen2", "qwen3", "mistral", "gemma3_text", "phi3", "granite", "cohere"])
def test_packed_logprobs_and_a_step_are_the_models_own(arch, sequences, tmp_path, learner_engine):
    pytest.importorskip("deepspeed")
    from selfplay.learner.batch import Sample
    from selfplay.learner.config import EngineConfig
    from selfplay.learner.tiny_model import ARCHITECTURES, save_tiny_model

    model = str(save_tiny_model(tmp_path / arch, arch=arch, head_scale=20.0, **ARCHITECTURES.get(arch, {})))
    assert min(len(s) for s in sequences) > 2 * 8  # both longer than the windows
    own = _own_logprobs(model, sequences, 0.7)
    engines = [learner_engine(EngineConfig(model_dir=model, lr=1e-3, warmup_steps=1, gradient_checkpointing=False,
                                           temperature=0.7, fused_head=fused)) for fused in (False, True)]
    learner = engines[0].logprobs(sequences)  # both sequences packed into one row
    for got, want in zip(learner, own):
        assert got == pytest.approx(want, abs=1e-4)
    # The fused head's loss reads the same scaled hidden states as the chunked logprobs.
    assert engines[1].fused
    masks = [(0,) * 3 + (1,) * (len(s) - 3) for s in sequences]
    batch = [Sample(tuple(s), m, tuple(lp), adv) for s, m, lp, adv in zip(sequences, masks, learner, (1.0, -1.0))]
    plain, fused = (e.train_step(batch, learner_old=learner) for e in engines)
    assert plain["learner/loss"] == pytest.approx(fused["learner/loss"], rel=1e-4, abs=1e-6)
    # SFT's loss is the model's own token-mean NLL (temperature 1) over the masked tokens, through the fused head.
    sft = learner_engine(EngineConfig(model_dir=model, lr=1e-3, warmup_steps=1, gradient_checkpointing=False))
    assert sft.fused
    nll = [-lp for row, m in zip(_own_logprobs(model, sequences, 1.0), masks) for lp, keep in zip(row, m) if keep]
    assert sft.sft_step(batch)["sft/loss"] == pytest.approx(sum(nll) / len(nll), rel=1e-4)


@pytest.mark.slow
def test_a_soft_capped_head_is_refused_before_its_weights_load(tmp_path):
    pytest.importorskip("deepspeed")
    from selfplay.learner.config import EngineConfig
    from selfplay.learner.engine import LearnerEngine
    from selfplay.learner.tiny_model import save_tiny_model

    model = save_tiny_model(tmp_path / "gemma2", arch="gemma2", head_dim=8)
    (model / "model.safetensors").unlink()  # refused from the config alone: the weights are never read
    with pytest.raises(UnsupportedHeadError, match="soft-caps its logits"):
        LearnerEngine(EngineConfig(model_dir=str(model)))


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["memory", "disk"])
@pytest.mark.parametrize("arch", ["qwen2", "granite"])
def test_after_an_update_and_a_weight_sync_the_sampler_and_the_learner_agree(arch, mode, sequences, tmp_path,
                                                                              learner_engine):
    """The loop's invariant on an untied, windowed class and on a scaled head: the rollout engine's logprobs
    of what it samples after a sync are the learner's of the same tokens (TIS weights of 1)."""
    pytest.importorskip("deepspeed")
    from agent_scaffold.policies.hf import HFPolicy
    from agent_scaffold.policy import SamplingParams
    from selfplay.learner.batch import Sample
    from selfplay.learner.checkpoint import save_checkpoint
    from selfplay.learner.config import EngineConfig
    from selfplay.learner.tiny_model import ARCHITECTURES, save_tiny_model
    from selfplay.learner.weight_sync import HFPolicySync

    model = str(save_tiny_model(tmp_path / arch, arch=arch, head_scale=20.0, **ARCHITECTURES[arch]))
    engine = learner_engine(EngineConfig(model_dir=model, lr=1e-2, warmup_steps=1, gradient_checkpointing=False))
    before = engine.logprobs(sequences)
    masks = [(0,) * 3 + (1,) * (len(s) - 3) for s in sequences]
    engine.train_step([Sample(tuple(s), m, tuple(lp), adv)
                       for s, m, lp, adv in zip(sequences, masks, before, (1.0, -1.0))], learner_old=before)
    moved = engine.logprobs(sequences)
    assert max(abs(a - b) for a, b in zip(moved[0], before[0])) > 1e-2  # the update moved the policy
    policy = HFPolicy(model)
    sync = HFPolicySync(policy, mode=mode)
    if mode == "memory":
        sync.push(engine.version, state_dict=engine.state_dict())
    else:
        sync.push(engine.version, checkpoint_dir=save_checkpoint(engine, tmp_path / "ck", optimizer=False))
    sampled = policy.generate(sequences, SamplingParams(max_new_tokens=10, seed=1, stop_token_ids=()))
    for prompt, c in zip(sequences, sampled):
        assert c.policy_version == engine.version
        learner = engine.logprobs([list(prompt) + list(c.token_ids)])[0][-10:]
        assert c.logprobs == pytest.approx(learner, abs=1e-4)


@pytest.mark.slow
def test_sequence_parallelism_is_refused_for_a_windowed_model(tmp_path):
    pytest.importorskip("deepspeed")
    from selfplay.learner.config import EngineConfig
    from selfplay.learner.engine import LearnerEngine
    from selfplay.learner.tiny_model import ARCHITECTURES, save_tiny_model

    model = save_tiny_model(tmp_path / "mistral", arch="mistral", **ARCHITECTURES["mistral"])
    with pytest.raises(ValueError, match="sliding-window attention .window 8.*sequence_parallel_size to 1"):
        LearnerEngine(EngineConfig(model_dir=str(model), sequence_parallel_size=2))


@pytest.mark.slow
def test_a_multimodal_checkpoints_text_path_is_the_models_own(sequences, tmp_path, learner_engine):
    """Gemma 3 from 4B up ships as `Gemma3ForConditionalGeneration`, its window in `text_config`: the learner
    reads it there (at the top level it found none, and packed the windowed layer with a full mask), and
    both the learner's and the sampler's logprobs of text are the model's own."""
    pytest.importorskip("deepspeed")
    import torch

    from agent_scaffold.embedded import default_model_dir
    from agent_scaffold.policies.hf import HFPolicy
    from agent_scaffold.policy import SamplingParams
    from selfplay.learner.config import EngineConfig

    tok = transformers.AutoTokenizer.from_pretrained(default_model_dir())
    vocab = len(tok)
    text = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                head_dim=8, vocab_size=vocab, sliding_window=8, layer_types=["sliding_attention", "full_attention"],
                bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    vision = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4, image_size=28,
                  patch_size=14)
    config = transformers.AutoConfig.for_model("gemma3", text_config=text, vision_config=vision, mm_tokens_per_image=4,
                                               image_token_index=vocab - 1, boi_token_index=vocab - 2,
                                               eoi_token_index=vocab - 3)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config)
    assert type(model).__name__ == "Gemma3ForConditionalGeneration"
    with torch.no_grad():
        model.get_output_embeddings().weight.mul_(20.0)
    model.save_pretrained(tmp_path / "gemma3")
    tok.save_pretrained(tmp_path / "gemma3")
    path = str(tmp_path / "gemma3")
    engine = learner_engine(EngineConfig(model_dir=path, gradient_checkpointing=False))
    assert not engine.block_mask  # the windowed layer's masks come from transformers
    for got, want in zip(engine.logprobs(sequences), _own_logprobs(path, sequences, 1.0)):
        assert got == pytest.approx(want, abs=1e-4)
    sampled = HFPolicy(path).generate(sequences, SamplingParams(max_new_tokens=8, seed=3, stop_token_ids=()))
    for prompt, c in zip(sequences, sampled):
        own = _own_logprobs(path, [list(prompt) + list(c.token_ids)], 1.0)[0][-8:]
        assert c.logprobs == pytest.approx(own, abs=1e-4)


@pytest.mark.gpu
@pytest.mark.parametrize("arch", ["qwen2", "gemma3_text"])
def test_packed_logprobs_on_the_gpu_are_the_models_own(arch, sequences, tmp_path, learner_engine):
    """The GPU twin of the packed-logprob check: bf16, and flash-attention's varlen kernel where it is
    installed (which takes the window as an argument, not through a mask). The model's own forward runs
    alone per sequence in float32, so the tolerance is bf16's, far below the 1-3 nats a lost window costs."""
    pytest.importorskip("deepspeed")
    from selfplay.learner.config import EngineConfig
    from selfplay.learner.tiny_model import ARCHITECTURES, save_tiny_model

    model = str(save_tiny_model(tmp_path / arch, arch=arch, head_scale=20.0, **ARCHITECTURES[arch]))
    engine = learner_engine(EngineConfig(model_dir=model, gradient_checkpointing=False))
    assert engine.device.type == "cuda" and engine.dtype is not None
    for got, want in zip(engine.logprobs(sequences), _own_logprobs(model, sequences, 1.0)):
        assert got == pytest.approx(want, abs=0.15)


def test_yarn_scales_the_full_attention_layers_of_a_per_layer_type_rope(tmp_path):
    """Gemma 3 keeps RoPE per layer type: merged at the top level (as for one RoPE), YaRN's keys were ignored
    and no layer was scaled. Now its full-attention layers are, the windowed ones keep theirs, a multimodal
    checkpoint's text config takes them, and the legacy `rope_scaling` key mirrors the scaled layers'."""
    import json

    from selfplay.learner.model_options import apply_model_options, write_legacy_rope_key

    yarn = {"rope_type": "yarn", "factor": 4.0}
    text = apply_model_options(_config("gemma3_text", max_position_embeddings=4096), yarn, 16384)
    full, local = text.rope_parameters["full_attention"], text.rope_parameters["sliding_attention"]
    assert (full["rope_type"], full["factor"], full["original_max_position_embeddings"]) == ("yarn", 4.0, 4096)
    assert local["rope_type"] == "default" and "factor" not in local and "rope_type" not in text.rope_parameters
    assert text.max_position_embeddings == 16384
    model = transformers.AutoModelForCausalLM.from_config(text)
    assert model.model.rotary_emb.rope_type == {"full_attention": "yarn", "sliding_attention": "default"}
    composite = transformers.AutoConfig.for_model("gemma3", text_config={"num_hidden_layers": 2})
    apply_model_options(composite, yarn, 16384)
    assert composite.text_config.rope_parameters["full_attention"]["rope_type"] == "yarn"
    assert composite.text_config.max_position_embeddings == 16384
    text.save_pretrained(tmp_path)
    write_legacy_rope_key(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["rope_scaling"]["rope_type"] == "yarn" and saved["rope_scaling"]["factor"] == 4.0
    # one RoPE for every layer (Qwen 3) is scaled as before
    qwen = apply_model_options(_config("qwen3"), yarn, None)
    assert qwen.rope_parameters["rope_type"] == "yarn" and qwen.rope_parameters["factor"] == 4.0
