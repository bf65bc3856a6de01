"""The loop's learner path on a tiny random Llama (the embedded tokenizer, hidden size 32) with the
documented worker double (loop_double.TableRunner): real DeepSpeed updates, checkpoints with retention,
the injector baseline saved with them, an empty batch skipped and counted, infrastructure failures
excluded, and the async mode's staleness accounting."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("deepspeed")

from selfplay.config.run_config import LearnerConfig, PolicyConfig, RolloutConfig  # noqa: E402
from selfplay.learner.checkpoint import latest_checkpoint, read_state, read_version  # noqa: E402
from selfplay.learner.config import EngineConfig  # noqa: E402
from selfplay.orchestration.loop import run_selfplay  # noqa: E402
from selfplay.orchestration.rundir import RunDir  # noqa: E402
from tests.selfplay.orchestration.loop_double import TableRunner, trajectory  # noqa: E402
from tests.selfplay.orchestration.test_loop import G, config  # noqa: E402


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from selfplay.learner.tiny_model import save_tiny_model

    return save_tiny_model(tmp_path_factory.mktemp("tiny-llama"), max_position_embeddings=2048)


def learner_config(tmp_path, tiny_model, **kw):
    learner = LearnerConfig(engine=EngineConfig(lr=1e-3, warmup_steps=1, token_budget=256),
                            checkpoint_every=1, keep_checkpoints=1, **kw)
    return config(tmp_path, learner=learner, policy=PolicyConfig(backend="scripted", model_dir=str(tiny_model)))


def test_updates_checkpoints_and_retention(tmp_path, tiny_model):
    path = run_selfplay(learner_config(tmp_path, tiny_model), runner=TableRunner(group_size=G))
    run = RunDir(path)
    summary = json.loads(run.summary.read_text())
    assert summary["status"] == "finished"
    assert summary["learner_updates"] == 2 and summary["policy_version"] == 2
    latest = latest_checkpoint(run.checkpoints)
    assert latest is not None and read_version(latest) == 2
    assert sorted(p.name for p in run.checkpoints.glob("v*")) == ["v000002"]  # keep_checkpoints=1
    assert read_state(latest)["injector_baseline"]["values"]
    records = [json.loads(x) for x in run.metrics.read_text().splitlines()]
    assert all(r["learner/skipped_empty_batch"] == 0 for r in records)
    assert records[-1]["learner/policy_version"] == 2 and "learner/loss" in records[-1]


def test_a_finished_run_frees_its_learner(tmp_path, tiny_model, monkeypatch):
    """The loop closes its learner (`PolicyLearner.close`): a process that runs loops one after another (the
    learning experiment's arms) keeps none of their models and optimizer states (DeepSpeed's gradient hooks
    hold a dropped engine alive, `test_engine_close.py`)."""
    import gc
    import weakref

    from selfplay.orchestration import learning

    engines = []
    init = learning.PolicyLearner.__init__

    def recording_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        engines.append(weakref.ref(self.engine.engine))

    monkeypatch.setattr(learning.PolicyLearner, "__init__", recording_init)
    run_selfplay(learner_config(tmp_path, tiny_model), runner=TableRunner(group_size=G))
    gc.collect()
    assert len(engines) == 1 and engines[0]() is None


def test_empty_batch_is_skipped_and_infra_excluded(tmp_path, tiny_model):
    from selfplay.orchestration.learning import PolicyLearner

    cfg = learner_config(tmp_path, tiny_model)
    learner = PolicyLearner(cfg, str(tiny_model), tmp_path / "ckpt")
    solved = [replace(trajectory("solver", 0), reward=1.0, metadata={"group_id": "g", "task_id": "t", "id": str(i)})
              for i in range(G)]  # all equal: dynamic sampling drops the group
    broken = replace(trajectory("solver", 0), reward=-1.0,
                     metadata={"group_id": "g2", "task_id": "t2", "id": "x", "infra_failure": True})
    promptless = replace(trajectory("injector", 0), reward=-1.0, loss_mask=(0,) * 6, metadata={"id": "p"})
    update = learner.update(solved + [broken, promptless])
    assert not update.trained and update.version == 0 and update.checkpoint is None
    assert update.metrics["learner/skipped_empty_batch"] == 1.0
    assert update.metrics["batch/excluded_untrainable"] == 2.0  # the infra failure, the unsampled episode
    assert not (tmp_path / "ckpt").exists() or not list((tmp_path / "ckpt").glob("v*"))


def test_loop_counts_skipped_batches(tmp_path, tiny_model):
    cfg = learner_config(tmp_path, tiny_model)
    cfg = replace(cfg, iterations=1, rollout=RolloutConfig(injector_episodes=0, solver_tasks=1, workers=1))
    path = run_selfplay(cfg, runner=TableRunner(group_size=G))
    summary = json.loads(RunDir(path).summary.read_text())
    assert summary["skipped_batches"] == 1 and summary["learner_updates"] == 0 and summary["policy_version"] == 0


def test_async_mode_trains_on_one_version_stale_rollouts(tmp_path, tiny_model):
    cfg = replace(learner_config(tmp_path, tiny_model, mode="async"), iterations=3)
    path = run_selfplay(cfg, runner=TableRunner(group_size=G))
    run = RunDir(path)
    summary = json.loads(run.summary.read_text())
    assert summary["status"] == "finished" and summary["learner_updates"] == 3
    records = [json.loads(x) for x in run.metrics.read_text().splitlines()]
    assert [r["iteration"] for r in records] == [0, 1, 2]
    # iterations 1 and 2 were played while the previous update ran: one version behind, none dropped
    assert records[0]["staleness/mean"] == 0 and records[2]["staleness/mean"] == 1
    assert all(r["staleness/dropped"] == 0 for r in records)


def _variance_batch():
    from tests.selfplay.orchestration.loop_double import trajectory as traj

    return [replace(traj("solver", 0), reward=r, metadata={"group_id": "g", "task_id": "t", "id": str(i)})
            for i, r in enumerate((1.0, -1.0, -1.0, 1.0))]


@pytest.mark.parametrize("lr", [0.0, 1e-3])
def test_steps_per_update_and_the_lr_zero_control_is_bit_identical(tmp_path, tiny_model, lr):
    """An update of several mini-batch steps advances the version by that many steps; at lr=0 (the
    learning experiment's control arm) every weight is bit-identical afterwards, TIS on (the default)."""
    from selfplay.orchestration.learning import PolicyLearner

    cfg = learner_config(tmp_path, tiny_model, steps_per_update=2)
    cfg = replace(cfg, learner=replace(cfg.learner, engine=replace(cfg.learner.engine, lr=lr)))
    assert cfg.learner.engine.loss.tis_cap is not None
    learner = PolicyLearner(cfg, str(tiny_model), tmp_path / "ckpt")
    before = {k: v.detach().clone() for k, v in learner.engine.state_dict().items()}
    update = learner.update(_variance_batch())
    assert update.trained and update.version == 2 and update.metrics["learner/steps"] == 2.0
    assert update.metrics["batch/solver/samples_trained"] == 4 and update.metrics["batch/kept_groups"] == 1
    after = learner.engine.state_dict()
    same = all(torch.equal(before[k], after[k]) for k in before)
    assert same if lr == 0.0 else not same


def test_an_update_computes_old_logprobs_only_for_the_mini_batches_after_its_first(tmp_path, tiny_model):
    """With TIS and 2 steps an update, the learner's logprobs before the update come from a separate pass
    only for the second mini-batch's samples (the first step takes them from its own forward); the
    second step gets them, the first gets None."""
    from selfplay.learner.engine import LearnerEngine
    from selfplay.orchestration.learning import PolicyLearner

    cfg = learner_config(tmp_path, tiny_model, steps_per_update=2)
    learner = PolicyLearner(cfg, str(tiny_model), tmp_path / "ckpt")
    passes, steps = [], []
    logprobs, train_step = LearnerEngine.logprobs, LearnerEngine.train_step
    learner.engine.logprobs = lambda seqs: passes.append(len(seqs)) or logprobs(learner.engine, seqs)
    learner.engine.train_step = lambda s, old=None: steps.append((len(s), old is None)) or train_step(
        learner.engine, s, old)
    update = learner.update(_variance_batch())
    assert update.trained and passes == [2] and steps == [(2, True), (2, False)]


@pytest.mark.parametrize("split", ["group", "sample"])
def test_an_update_keeps_each_group_in_one_mini_batch(tmp_path, tiny_model, split):
    """Two groups with variance and 2 steps an update: the group split gives each step one whole group
    (its 4 attempts); the sample split spreads a group over both steps (seeded: this seed and version
    put 2 of each group in each step)."""
    from selfplay.learner.engine import LearnerEngine
    from selfplay.orchestration.learning import PolicyLearner

    cfg = learner_config(tmp_path, tiny_model, steps_per_update=2)
    cfg = replace(cfg, learner=replace(cfg.learner, minibatches=split))
    groups = []
    train_step = LearnerEngine.train_step
    batch = _variance_batch() + [replace(t, metadata={**t.metadata, "group_id": "h", "task_id": "u"})
                                 for t in _variance_batch()]
    with PolicyLearner(cfg, str(tiny_model), tmp_path / "ckpt") as learner:
        learner.engine.train_step = lambda s, old=None: groups.append(sorted(x.group for x in s)) or train_step(
            learner.engine, s, old)
        update = learner.update(batch)
    assert update.trained and update.metrics["learner/steps"] == 2.0 and len(groups) == 2
    if split == "group":
        assert sorted(len(set(g)) for g in groups) == [1, 1] and {g[0] for g in groups} == {"solver:g", "solver:h"}
    else:
        assert all(len(set(g)) == 2 for g in groups)


@pytest.mark.parametrize("lr", [0.0, 1e-3])
def test_measure_shift_reports_how_far_a_one_step_update_moved_the_policy(tmp_path, tiny_model, lr):
    """With one step an update the loss's approx_kl is taken at the behaviour weights; `measure_shift`
    compares the logprobs of the trained tokens before and after the step: exactly 0 at lr=0, and at lr>0 a
    positive KL with the positive-advantage tokens raised against the negative ones."""
    from selfplay.orchestration.learning import PolicyLearner
    from tests.selfplay.orchestration.loop_double import trajectory as traj

    cfg = learner_config(tmp_path, tiny_model, measure_shift=True)
    cfg = replace(cfg, learner=replace(cfg.learner, engine=replace(cfg.learner.engine, lr=lr)))
    base = traj("solver", 0)
    batch = [replace(base, input_ids=tuple(t + (0 if r > 0 else 20) for t in base.input_ids), reward=r,
                     metadata={"group_id": "g", "task_id": "t", "id": str(i)})
             for i, r in enumerate((1.0, -1.0, -1.0, 1.0))]  # the solved and the failed sample other tokens
    update = PolicyLearner(cfg, str(tiny_model), tmp_path / "ckpt").update(batch)
    m = update.metrics
    assert update.trained and m["learner/steps"] == 1.0 and m["learner/approx_kl"] == pytest.approx(0, abs=1e-6)
    assert m["learner/shift_tokens_pos"] > 0 and m["learner/shift_tokens_neg"] > 0
    if lr == 0.0:
        assert m["learner/shift_kl"] == 0.0 and m["learner/shift_dlogp_pos"] == m["learner/shift_dlogp_neg"] == 0.0
    else:
        assert m["learner/shift_kl"] > 0
        assert m["learner/shift_dlogp_pos"] > m["learner/shift_dlogp_neg"]


def test_an_update_times_its_weight_sync_to_the_rollout_policy(tmp_path, tiny_model):
    """learner/sync_s is the push of the new weights into the in-process hf policy (which then samples the
    new version), and learner/sync_share relates it to the update's optimizer steps (learner/train_s); the
    scheduled checkpoint write is timed apart (learner/checkpoint_s)."""
    from agent_scaffold.policies.hf import HFPolicy
    from selfplay.orchestration.learning import PolicyLearner

    policy = HFPolicy(tiny_model)
    cfg = learner_config(tmp_path, tiny_model)
    cfg = replace(cfg, policy=replace(cfg.policy, backend="hf"))
    learner = PolicyLearner(cfg, str(tiny_model), tmp_path / "ckpt", policy=policy)
    update = learner.update(_variance_batch())
    assert update.trained and policy.version == update.version == 1
    assert update.metrics["learner/sync_s"] > 0
    assert 0 < update.metrics["learner/sync_share"] < float("inf")
    assert update.metrics["learner/train_s"] > 0 and update.metrics["learner/checkpoint_s"] > 0
    assert update.checkpoint is not None and update.checkpoint.is_dir()
