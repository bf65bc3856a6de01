"""`replay_update` on a real run directory: a tiny-Llama run of the loop with the documented worker double
(loop_double.TableRunner; the real worker runs in test_loop_docker.py) stores its trajectories, and the
replay rebuilds iteration 0's batch from them and takes the update again at LR 0 and LR > 0."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("deepspeed")

from selfplay.experiment.update_replay import injector_probes, replay_update
from selfplay.orchestration.loop import run_selfplay
from selfplay.orchestration.rundir import RunDir
from tests.selfplay.orchestration.loop_double import TableRunner
from tests.selfplay.orchestration.test_loop import G
from tests.selfplay.orchestration.test_loop_learner import learner_config


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from selfplay.learner.tiny_model import save_tiny_model

    return save_tiny_model(tmp_path_factory.mktemp("tiny-llama"), max_position_embeddings=2048)


def test_replay_rebuilds_the_runs_batch_and_measures_each_rate(tmp_path, tiny_model):
    run_dir = run_selfplay(learner_config(tmp_path, tiny_model), runner=TableRunner(group_size=G))
    first = json.loads(RunDir(run_dir).metrics.read_text().splitlines()[0])
    probes = injector_probes([run_dir], [1])
    assert sorted(p.valid for p in probes) == [False, True]  # TableRunner: injector 1 of an iteration is invalid

    rows = replay_update(run_dir, [0], tiny_model, [0.0, 1e-3], probes=probes)
    zero, moved = rows
    for row in rows:  # the batch the run trained on in its first update
        assert row["samples"] == first["batch/solver/samples_trained"] + first["batch/injector/samples_trained"]
        assert row["probe/episodes_valid"] == 1 and row["probe/episodes_invalid"] == 1
        per_episode = row["probe/episodes"]  # the aggregate is the token-weighted mean of each probe's own change
        (v,) = [e for e in per_episode if e["valid"]]
        (i,) = [e for e in per_episode if not e["valid"]]
        assert row["probe/dlogp_valid"] == pytest.approx(v["dlogp_sum"] / v["tokens"])
        assert row["probe/separation"] == pytest.approx(row["probe/dlogp_valid"] - row["probe/dlogp_invalid"])
        assert row["probe/separation_lo"] <= row["probe/separation"] <= row["probe/separation_hi"]
    assert zero["lr"] == 0.0 and zero["learner/shift_kl"] == 0.0 and zero["probe/kl"] == 0.0
    assert zero["learner/shift_dlogp_pos"] == zero["learner/shift_dlogp_neg"] == 0.0
    assert moved["learner/shift_kl"] > 0 and moved["probe/kl"] > 0

    # Probes of two directories: each directory's separation as well (here one directory under two names).
    alias = tmp_path / "alias"
    alias.symlink_to(run_dir)
    (two,) = replay_update(run_dir, [0], tiny_model, [1e-3], probes=injector_probes([run_dir, alias], [1]))
    by_source = two["probe/by_source"]
    assert set(by_source) == {str(run_dir), str(alias)}
    assert all(s["valid"] == 1 and s["invalid"] == 1 for s in by_source.values())
    assert by_source[str(alias)]["separation"] == pytest.approx(by_source[str(run_dir)]["separation"], abs=1e-5)

    # Two runs' episodes make one batch, each run's groups apart (here the same run twice: every group twice).
    (both,) = replay_update([run_dir, run_dir], [0], tiny_model, [0.0])
    assert both["samples"] == 2 * zero["samples"]
    assert both["batch/solver/groups_trained"] == 2 * zero["batch/solver/groups_trained"] > 0


def test_a_directory_without_trajectories_is_refused(tmp_path, tiny_model):
    with pytest.raises(ValueError, match=r"no trajectories of iterations \[0\]"):
        replay_update(tmp_path, [0], tiny_model, [0.0])
