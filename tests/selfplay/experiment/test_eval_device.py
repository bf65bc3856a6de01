"""Where a held-out evaluation samples: the checkpoint goes to `EvalSettings.device`, and auto finds the GPU
as the training rollouts' `policy.device` does (a GPU experiment must not evaluate a large model on CPU)."""

import pytest

pytest.importorskip("torch", reason="the `train` extra is not installed")


def _first_device(model_dir, settings):
    from agent_scaffold.policy import SamplingParams
    from selfplay.experiment.heldout import eval_policy

    policy = eval_policy(str(model_dir), settings)
    try:
        out = policy.generate([[1, 2, 3, 4]], SamplingParams(max_new_tokens=3, seed=1))[0]
        assert 1 <= len(out.token_ids) <= 3
        return next(policy.policy.model.parameters()).device.type
    finally:
        policy.close()


def test_eval_policy_samples_on_the_device_it_is_given(tmp_path):
    from selfplay.experiment.heldout import EvalSettings
    from selfplay.learner.tiny_model import save_tiny_model
    from selfplay.rollout.policy_factory import resolve_device

    model = save_tiny_model(tmp_path / "tiny")
    assert _first_device(model, EvalSettings(device="cpu", workers=2)) == "cpu"
    assert _first_device(model, EvalSettings(workers=2)) == resolve_device("auto")


@pytest.mark.gpu
def test_eval_policy_finds_the_gpu(tmp_path):
    from selfplay.experiment.heldout import EvalSettings
    from selfplay.learner.tiny_model import save_tiny_model

    assert _first_device(save_tiny_model(tmp_path / "tiny"), EvalSettings()) == "cuda"
