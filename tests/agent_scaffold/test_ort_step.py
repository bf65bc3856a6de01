"""`OrtStep` (decode_engine "onnxruntime") against the HF forward: the same tokens and logprobs (to float
rounding) as rows join and leave, on a tiny random Llama and on the real SmolLM2; after a weight sync (a
checkpoint load, an in-memory copy) its greedy output is the synced model's; bad settings get errors
that name the setting."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

from agent_scaffold.policies.batching import BatchingPolicy  # noqa: E402
from agent_scaffold.policies.hf import HFPolicy  # noqa: E402
from agent_scaffold.policies.ort_step import OrtStep  # noqa: E402
from agent_scaffold.policy import SamplingParams  # noqa: E402
from tests.agent_scaffold.test_llama_step import _calls, _rows, _same_samples  # noqa: E402

ORT = {"decode_engine": "onnxruntime"}


def test_decode_steps_match_the_hf_forward_as_rows_join_and_leave(tiny_dir, monkeypatch):
    engine, reference = HFPolicy(tiny_dir, **ORT), HFPolicy(tiny_dir, fast_decode=False)
    assert isinstance(engine.llama_step(), OrtStep)
    calls = _calls(monkeypatch, OrtStep)
    _same_samples(engine, reference, 1e-5)
    assert calls and max(calls) == 6 and min(calls) < 6  # every step ran it, at shrinking batch sizes


def test_rows_admitted_mid_batch_with_stored_kv_decode_the_same(tiny_dir):
    """Continuous batching through the engine: rows join a running batch (their KV copied into slots of
    zero-filled buffers that other rows already widened) and a later turn reuses a stored prefix."""
    engine = HFPolicy(tiny_dir, kv_cache_mb=64, **ORT)
    reference = HFPolicy(tiny_dir, kv_cache_mb=64, fast_decode=False)
    prompts, params = _rows(engine)
    for policy in (engine, reference):
        batch = policy.decode_batch()
        out: dict[int, list[int]] = {}
        with policy._lock:
            batch.admit(prompts[2], params[2], 2, 2)
            steps = 0
            while len(batch):
                if steps == 3:  # mid-batch arrivals, shorter than the running row
                    batch.admit_many([(prompts[i], params[i], i, i) for i in (0, 1, 3)])
                for tag, completion in batch.step():
                    out[tag] = completion.token_ids
                steps += 1
        policy.out = out
    assert engine.out == reference.out
    turn2 = [prompts[1] + list(engine.out[1]) + prompts[0]]
    _same_samples(engine, reference, 1e-5, turn2, [params[4]])


def test_the_embedded_smollm2_decodes_the_same_through_it(monkeypatch):
    from agent_scaffold.embedded import default_model_dir

    model_dir = default_model_dir()
    engine, reference = HFPolicy(model_dir, **ORT), HFPolicy(model_dir, fast_decode=False)
    calls = _calls(monkeypatch, OrtStep)
    _same_samples(engine, reference, 1e-4)
    assert calls


def test_after_a_weight_sync_its_greedy_output_is_the_synced_models(tiny_dir, tmp_path):
    """The engine holds its own copy of the weights: after a checkpoint load, and after an in-memory copy
    (`HFPolicySync(mode='memory')`), it is rebuilt, and its greedy output for a fixed prompt equals that
    of the learner's model decoded through the HF forward."""
    from selfplay.learner.tiny_model import save_tiny_model
    from selfplay.learner.weight_sync import HFPolicySync

    other_dir = save_tiny_model(tmp_path / "other", seed=1)
    engine = HFPolicy(tiny_dir, **ORT)
    prompt = [engine.tokenizer.encode("Fix the failing test in utils.py")]
    greedy = [SamplingParams(temperature=0, max_new_tokens=16, seed=0)]
    before = engine.llama_step()
    start = engine.generate_rows(prompt, greedy)[0].token_ids

    HFPolicySync(engine).push(1, checkpoint_dir=other_dir)
    assert len(engine.engine_sync_s) == 2  # rebuilt inside the sync, before any generation
    learner = HFPolicy(other_dir, fast_decode=False)
    assert engine.llama_step() is not before and len(engine.engine_sync_s) == 2
    synced = _same_samples(engine, learner, 1e-5, prompt, greedy)
    assert synced[0].token_ids != start  # the sync moved the decode

    with torch.no_grad():
        for p in learner.model.parameters():
            p.mul_(1.5)
    batching = BatchingPolicy(engine, max_batch=4)  # as a run holds it: the sync goes through the wrapper
    HFPolicySync(batching, mode="memory").push(2, state_dict=learner.model.state_dict())
    assert engine.version == 2 and len(engine.engine_sync_s) == 3
    batching.close()
    _same_samples(engine, learner, 1e-5, prompt, greedy)


def test_bad_engine_settings_get_errors_that_name_them(tiny_dir, monkeypatch):
    with pytest.raises(ValueError, match="decode_engine must be 'torch' or 'onnxruntime', got 'ctranslate2'"):
        HFPolicy(tiny_dir, decode_engine="ctranslate2")
    with pytest.raises(ValueError, match="lookup_tokens must be 0"):
        HFPolicy(tiny_dir, lookup_tokens=4, **ORT)
    with pytest.raises(ValueError, match="fast_decode is off; use decode_engine 'torch'"):
        HFPolicy(tiny_dir, fast_decode=False, **ORT)
    with pytest.raises(ValueError, match=r"dtype torch.bfloat16 \(ONNX Runtime decodes float32 models here\)"):
        HFPolicy(tiny_dir, dtype=torch.bfloat16, **ORT)
    import builtins

    real_import = builtins.__import__

    def no_onnxruntime(name, *args, **kwargs):
        if name == "onnxruntime":
            raise ImportError("No module named 'onnxruntime'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_onnxruntime)
    with pytest.raises(ImportError, match=r"policy.decode_engine = 'onnxruntime' needs .*pip install -e '.\[ort\]'"):
        HFPolicy(tiny_dir, **ORT)


def test_run_config_refuses_a_bad_decode_engine_by_its_key(monkeypatch):
    import importlib.util

    from selfplay.config.run_config import PolicyConfig, RunConfig

    with pytest.raises(ValueError, match="policy.decode_engine must be 'torch' or 'onnxruntime', got 'llama.cpp'"):
        RunConfig(policy=PolicyConfig(decode_engine="llama.cpp"))
    with pytest.raises(ValueError, match="policy.decode_engine = 'onnxruntime' feeds one position.*lookup_tokens = 0"):
        RunConfig(policy=PolicyConfig(decode_engine="onnxruntime", lookup_tokens=4))
    assert RunConfig(policy=PolicyConfig(decode_engine="onnxruntime")).policy.decode_engine == "onnxruntime"
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "onnxruntime" else real(name, *a))
    with pytest.raises(ValueError, match=r"needs onnxruntime, not installed: pip install -e '.\[ort\]'"):
        RunConfig(policy=PolicyConfig(decode_engine="onnxruntime"))


def test_the_run_policy_factory_builds_the_engine_it_is_asked_for(tiny_dir):
    from selfplay.config.run_config import PolicyConfig
    from selfplay.rollout.policy_factory import hf_policy

    batching = hf_policy(PolicyConfig(decode_engine="onnxruntime", device="cpu"), model_dir=str(tiny_dir))
    assert isinstance(batching.policy.llama_step(), OrtStep)


def test_serve_policy_refuses_an_unknown_engine_before_loading_a_model():
    from typer.testing import CliRunner

    from selfplay.cli import app

    result = CliRunner().invoke(app, ["serve-policy", "--decode-engine", "bogus"])
    assert result.exit_code == 2
    assert "--decode-engine" in result.output and "must be torch or onnxruntime" in result.output
