"""RFT/SFT: masking of format-error turns, the SFT loss on the learner engine, the checkpoint as an `hf`
policy, and clear errors for a store with nothing to train on.

A tiny random Llama (the embedded tokenizer, hidden size 32) keeps these fast on 2 cores; trajectories
are recorded by the real scaffold (`run_episode` with the scripted backend in a local sandbox).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("deepspeed")

from agent_scaffold.agent import run_episode  # noqa: E402
from agent_scaffold.policies.scripted import ScriptedPolicy  # noqa: E402
from agent_scaffold.roles import EpisodeLimits, load_role, solver_variables  # noqa: E402
from agent_scaffold.trajectory import save_jsonl  # noqa: E402
from selfplay.learner.rft import RFTDataError, collect, sft_samples, valid_turn_mask  # noqa: E402
from selfplay.learner.sft import SFTConfig, batches, lr_factor, train_sft  # noqa: E402
from tests.agent_scaffold.local_sandbox import LocalSandbox  # noqa: E402

ACTIONS = ["Look around.\n```bash\nls\n```",
           "oops, no block here",  # a format error: must carry no loss
           "Read it.\n```bash\ncat a.py\n```",
           "```submit\n```"]


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from agent_scaffold.embedded import default_model_dir

    return AutoTokenizer.from_pretrained(default_model_dir())


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from selfplay.learner.tiny_model import save_tiny_model

    return save_tiny_model(tmp_path_factory.mktemp("tiny-llama"), max_position_embeddings=2048)


@pytest.fixture(scope="module")
def trajectory(tmp_path_factory, tokenizer):
    sb = LocalSandbox(tmp_path_factory.mktemp("repo"), {"a.py": "x = 1\n"})
    ep = run_episode(ScriptedPolicy(ACTIONS, tokenizer=tokenizer), sb, load_role("solver"),
                     solver_variables("fix it", "issue"), limits=EpisodeLimits(max_turns=6))
    assert ep.termination == "submitted" and ep.format_errors == 1
    return ep.trajectory


def test_format_error_turn_is_masked(trajectory):
    mask = valid_turn_mask(trajectory)
    spans = trajectory.turn_spans
    assert trajectory.loss_mask[spans[1][0]:spans[1][1]] and not any(mask[spans[1][0]:spans[1][1]])
    for i in (0, 2, 3):
        s, e = spans[i]
        assert mask[s:e] == trajectory.loss_mask[s:e] and all(mask[s:e])
    # observations and prompt stay unmasked-out
    assert sum(mask) == sum(trajectory.loss_mask) - (spans[1][1] - spans[1][0])


def test_masked_turns_carry_zero_gradient(trajectory, tiny_model):
    """Per-token gradients of the SFT loss: zero on the format-error turn with masking, non-zero without."""
    from transformers import AutoModelForCausalLM

    from selfplay.learner.logprobs import packed_token_logprobs
    from selfplay.learner.losses import token_weights
    from selfplay.learner.packing import pack, unpack

    model = AutoModelForCausalLM.from_pretrained(tiny_model, attn_implementation="sdpa")
    ids = trajectory.input_ids
    s, e = trajectory.turn_spans[1]
    grads = {}
    for name, mask in (("masked", valid_turn_mask(trajectory)), ("unmasked", trajectory.loss_mask)):
        packed = pack([ids], block_mask=False)
        lp, _ = packed_token_logprobs(model, packed)
        lp = unpack(lp, packed.seq_lens)  # (1, T)
        lp.retain_grad()
        m = torch.tensor([mask], dtype=torch.float32)
        loss = -(lp * token_weights(m, "token-mean")).sum()
        loss.backward()
        grads[name] = lp.grad[0]
    assert torch.all(grads["masked"][s:e] == 0)
    assert torch.all(grads["unmasked"][s:e] != 0)
    good = torch.tensor(valid_turn_mask(trajectory), dtype=torch.bool)
    assert torch.all(grads["masked"][good] < 0) and torch.all(grads["masked"][~good] == 0)


def test_lr_schedule_warmup_then_cosine_to_zero():
    total, warm = 20, 10
    f = [lr_factor(k, warm, total) for k in range(total)]
    assert f[0] == pytest.approx(0.1) and f[9] == pytest.approx(1.0)
    assert all(a >= b for a, b in zip(f[9:], f[10:])) and 0 < f[-1] < 0.05


def test_a_run_shorter_than_its_warm_up_says_so():
    from selfplay.learner.sft import short_run_warning

    # the Nebius preset (10 warm-up steps) on 63 demonstrations at batch 64: one step at a tenth of the LR
    assert "peaks at 10% of the preset's" in short_run_warning(10, 1)
    assert lr_factor(0, 10, 1) == pytest.approx(0.1)
    assert short_run_warning(10, 10) is None and short_run_warning(1, 16) is None


def test_batches_cover_every_sample_once_per_epoch(trajectory):
    samples = sft_samples([trajectory] * 5)
    plan = batches(samples, SFTConfig(batch_size=2, epochs=2))
    assert [len(b) for b in plan] == [2, 2, 1, 2, 2, 1]


def test_injector_samples_join_only_the_first_injector_epochs(trajectory):
    from dataclasses import replace

    solver = sft_samples([trajectory] * 3)
    injector = [replace(s, role="injector", input_ids=(*s.input_ids, 7)) for s in solver[:2]]
    samples = solver + injector
    plan = batches(samples, SFTConfig(batch_size=2, epochs=3, injector_epochs=1))
    epochs = [plan[:3], plan[3:5], plan[5:]]  # 5 samples, then 3, then 3
    assert [len(b) for b in plan] == [2, 2, 1, 2, 1, 2, 1]
    assert [sum(s.role == "injector" for b in e for s in b) for e in epochs] == [2, 0, 0]
    assert all(sum(s.role == "solver" for b in e for s in b) == 3 for e in epochs)
    # None trains them every epoch, as before the field existed
    assert batches(samples, SFTConfig(batch_size=2, epochs=3)) == batches(
        samples, SFTConfig(batch_size=2, epochs=3, injector_epochs=3))
    with pytest.raises(ValueError, match="injector_epochs"):
        SFTConfig(injector_epochs=0)


def _demo_store(tmp_path, trajectory, reward: float):
    from selfplay.store import open_store

    tmp_path.mkdir(exist_ok=True)
    path = tmp_path / "t.jsonl"
    save_jsonl([trajectory], path, append=False)
    st = open_store(str(tmp_path / "s.db"))
    st.record_attempt(None, role="solver", policy_version=0, reward=reward, turns=4, tokens=len(trajectory.input_ids),
                      termination="submitted", trajectory_path=str(path), source="demo")
    return st


def test_empty_store_and_store_without_successes_are_clear_errors(tmp_path, trajectory):
    from selfplay.store import open_store

    with open_store(str(tmp_path / "empty.db")) as st:
        with pytest.raises(RFTDataError, match="no attempts.*selfplay demos"):
            collect(st)
    with _demo_store(tmp_path, trajectory, -1.0) as st:
        with pytest.raises(RFTDataError, match="no successful one"):
            collect(st)
    with _demo_store(tmp_path / "ok", trajectory, 1.0) as st:
        with pytest.raises(RFTDataError, match="no successful one from source 'success'"):
            collect(st, source="success")  # demos only, policy successes asked for
        data = collect(st, source="demo")
        assert data.stats["rft/kept"] == 1


def test_sft_loss_falls_and_not_at_lr_zero_and_checkpoint_loads_as_hf_policy(tmp_path, trajectory, tiny_model):
    samples = sft_samples([trajectory] * 4)
    cfg = SFTConfig(model_dir=str(tiny_model), lr=2e-2, warmup_steps=1, batch_size=4, epochs=6,
                    gradient_checkpointing=False, weight_decay=0.0)
    trained = train_sft(samples, tmp_path / "trained", cfg)
    losses = [m["sft/loss"] for m in trained.history]
    # each step reports the LR it took, not the next one's
    assert [m["sft/lr"] for m in trained.history] == pytest.approx([2e-2 * lr_factor(k, 1, 6) for k in range(6)])
    assert losses[-1] < losses[0] - 1.0 and all(b < a for a, b in zip(losses, losses[1:])), losses
    # the engine's first loss (fused head, packed micro-batch) is the masked NLL of the initial weights
    from transformers import AutoModelForCausalLM

    initial = AutoModelForCausalLM.from_pretrained(tiny_model, attn_implementation="sdpa")
    with torch.no_grad():
        ids = torch.tensor([trajectory.input_ids])
        lp0 = torch.log_softmax(initial(input_ids=ids).logits[0, :-1].float(), -1).gather(-1, ids[0, 1:, None])[:, 0]
        m0 = torch.tensor(valid_turn_mask(trajectory)[1:], dtype=torch.float32)
    assert losses[0] == pytest.approx(float(-(lp0 * m0).sum() / m0.sum()), rel=1e-4)
    frozen = train_sft(samples, tmp_path / "frozen", SFTConfig(**{**cfg.__dict__, "lr": 0.0}))
    still = [m["sft/loss"] for m in frozen.history]
    assert max(still) - min(still) < 1e-5 * abs(still[0]), still
    assert still[0] == pytest.approx(losses[0], rel=1e-6)

    from agent_scaffold.policies import make_policy
    from agent_scaffold.policy import SamplingParams

    policy = make_policy("hf", model_dir=str(trained.out_dir))
    prompt = list(trajectory.input_ids[:trajectory.turn_spans[0][0]])
    (c,) = policy.generate([prompt], SamplingParams(temperature=0.0, max_new_tokens=4))
    assert len(c.token_ids) >= 1
    # the engine's masked NLL equals the NLL recomputed by the saved policy's own forward pass
    with torch.no_grad():
        ids = torch.tensor([trajectory.input_ids])
        logits = policy.model(input_ids=ids).logits[0, :-1].float()
        lp = torch.log_softmax(logits, -1).gather(-1, ids[0, 1:, None])[:, 0]
        m = torch.tensor(valid_turn_mask(trajectory)[1:], dtype=torch.float32)
        nll = float(-(lp * m).sum() / m.sum())
    assert nll < losses[0]


def test_sft_frees_its_engine_before_it_returns(tmp_path, trajectory, tiny_model, monkeypatch):
    """A run's warm start trains SFT in the run's process, then builds the run's learner: the SFT engine's
    model and optimizer state must not stay beside it (`LearnerEngine.close`, test_engine_close.py)."""
    import gc
    import weakref

    from selfplay.learner import sft

    engines = []
    build = sft.sft_engine

    def recording_build(*args, **kwargs):
        engine = build(*args, **kwargs)
        engines.append(weakref.ref(engine.engine))
        return engine

    monkeypatch.setattr(sft, "sft_engine", recording_build)
    train_sft(sft_samples([trajectory]), tmp_path / "out", SFTConfig(model_dir=str(tiny_model), warmup_steps=1,
                                                                    batch_size=1, epochs=1))
    gc.collect()
    assert len(engines) == 1 and engines[0]() is None


def test_sft_step_fused_and_unfused_heads_take_the_same_step(trajectory, tiny_model, learner_engine):
    """The fused head computes logits only at the loss-bearing positions: its SFT step (loss, grad norm,
    updated weights, the tied head included) is the unfused full-logits step's."""
    from selfplay.learner.config import EngineConfig

    samples = sft_samples([trajectory] * 2)
    out = []
    for fused in (True, False):
        engine = learner_engine(EngineConfig(model_dir=str(tiny_model), lr=1e-2, warmup_steps=1, weight_decay=0.0,
                                             gradient_checkpointing=False, token_budget=4096, fused_head=fused))
        assert engine.fused is fused
        m = engine.sft_step(samples)
        out.append((m, {k: v.detach().clone() for k, v in engine.module.state_dict().items()}))
        engine.close()  # before the next engine: each holds its optimizer state
    (m1, w1), (m2, w2) = out
    assert m1["sft/loss"] == pytest.approx(m2["sft/loss"], rel=1e-5)
    assert m1["sft/grad_norm"] == pytest.approx(m2["sft/grad_norm"], rel=1e-4)
    assert m1["sft/loss_tokens"] < m1["sft/tokens"]  # some positions carry no loss, so some were skipped
    assert float(m1["sft/grad_norm"]) > 0
    # Adam's first step is ~lr * sign(grad): a gradient near 0 may round to either sign on the two paths
    diff = torch.cat([(w1[k] - w2[k]).abs().flatten() for k in w1])
    assert float(diff.max()) <= 1e-2 and float(diff.gt(1e-5).float().mean()) < 1e-4


def test_rft_command_on_an_empty_store_says_what_to_do(tmp_path):
    from typer.testing import CliRunner

    from selfplay.cli import app
    from selfplay.store import open_store

    open_store(str(tmp_path / "empty.db")).close()  # an empty store (a missing one: tests/selfplay/cli/test_bad_inputs.py)
    res = CliRunner().invoke(app, ["rft", "--store", str(tmp_path / "empty.db"), "--out", str(tmp_path / "o")])
    assert res.exit_code == 2
    assert "no attempts" in res.output and "selfplay demos" in res.output
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_sft_on_the_embedded_model_lowers_the_demonstration_loss(tmp_path, trajectory):
    """One real check: two SFT steps of SmolLM2-135M-Instruct on a scripted trajectory lower its NLL."""
    samples = sft_samples([trajectory])
    result = train_sft(samples, tmp_path / "real", SFTConfig(lr=1e-4, warmup_steps=1, batch_size=1, epochs=3,
                                                            gradient_checkpointing=False))
    losses = [m["sft/loss"] for m in result.history]
    assert losses[-1] < losses[0], losses


def test_turns_the_metadata_lists_as_unlearned_carry_no_loss(trajectory):
    """A recovery demonstration's wrong first edit (`unlearned_turns`) is masked like a format error."""
    from dataclasses import replace

    marked = replace(trajectory, metadata={**trajectory.metadata, "unlearned_turns": [2]})
    mask, plain = valid_turn_mask(marked), valid_turn_mask(trajectory)
    s, e = trajectory.turn_spans[2]
    assert any(plain[s:e]) and not any(mask[s:e])
    assert sum(mask) == sum(plain) - (e - s)
    assert sum(sft_samples([marked])[0].loss_mask) == sum(mask)


def test_sft_in_bf16_trains_and_its_checkpoint_loads_as_hf_policy(tmp_path, trajectory, tiny_model):
    """`SFTConfig.dtype` reaches the engine: bf16 SFT (measured on a CPU, not a default) lowers the loss as
    fp32 does, and the policy loads what it saved."""
    with pytest.raises(ValueError, match="dtype must be auto, bf16 or fp32"):
        SFTConfig(dtype="fp16")
    samples = sft_samples([trajectory] * 4)
    cfg = SFTConfig(model_dir=str(tiny_model), lr=2e-2, warmup_steps=1, batch_size=4, epochs=4,
                    gradient_checkpointing=False, weight_decay=0.0, dtype="bf16")
    from selfplay.learner.sft import sft_engine

    with sft_engine(cfg, 4) as engine:
        assert engine.dtype == torch.bfloat16
    trained = train_sft(samples, tmp_path / "bf16", cfg)
    losses = [m["sft/loss"] for m in trained.history]
    assert losses[-1] < losses[0] - 0.5, losses

    from agent_scaffold.policies import make_policy
    from agent_scaffold.policy import SamplingParams

    policy = make_policy("hf", model_dir=str(trained.out_dir))
    (c,) = policy.generate([list(trajectory.input_ids[:trajectory.turn_spans[0][0]])],
                           SamplingParams(temperature=0.0, max_new_tokens=4))
    assert len(c.token_ids) >= 1
