"""Reference check: our token-mean loss and its gradient equal TRL 1.16's DAPO loss (loss_type="dapo").

Reference used: `trl.trainer.grpo_trainer.GRPOTrainer._compute_loss` from the installed trl==1.16.0
(the [dev] extra). TRL computes the DAPO per-token clipped loss only inside that trainer method, so we
call that exact code path on a bare trainer object carrying just the attributes the method reads, with
the model's per-token logprobs supplied by `_get_per_token_logps_and_entropies` (the one model call).
"""

from __future__ import annotations

import types

import pytest
import torch

from selfplay.learner.losses import policy_loss

trl_grpo = pytest.importorskip("trl.trainer.grpo_trainer")


def trl_dapo_loss(logprobs, old_logprobs, advantages, mask, eps_low, eps_high):
    t = trl_grpo.GRPOTrainer.__new__(trl_grpo.GRPOTrainer)
    t.loss_type = "dapo"
    t.epsilon_low, t.epsilon_high = eps_low, eps_high
    t.beta = 0.0
    t.importance_sampling_level = "token"
    t.top_entropy_quantile = 1.0
    t.off_policy_mask_threshold = None
    t.use_vllm = False
    t.aux_loss_enabled = False
    t._entropy_bonus_enabled = False
    t.current_gradient_accumulation_steps = 1
    t.args = types.SimpleNamespace(delta=None, steps_per_generation=1, use_bias_correction_kl=False)
    t.model = types.SimpleNamespace(training=True)
    t.accelerator = types.SimpleNamespace(
        num_processes=1, gather=lambda x: x, reduce=lambda x, reduction="sum": x)
    t._metrics = {"train": __import__("collections").defaultdict(list)}
    t._get_per_token_logps_and_entropies = lambda *a, **k: (logprobs, torch.zeros_like(logprobs), None)
    b, n = logprobs.shape
    inputs = {
        "prompt_ids": torch.zeros(b, 1, dtype=torch.long), "prompt_mask": torch.ones(b, 1, dtype=torch.long),
        "completion_ids": torch.zeros(b, n, dtype=torch.long), "completion_mask": mask.long(),
        "advantages": advantages, "old_per_token_logps": old_logprobs,
        "num_items_in_batch": mask.sum(),
    }
    return t._compute_loss(None, inputs), t._metrics["train"]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_token_mean_loss_and_grad_match_trl_dapo(seed):
    g = torch.Generator().manual_seed(seed)
    b, n = 6, 17
    old = -torch.rand(b, n, generator=g, dtype=torch.float64) * 3
    new0 = old + torch.randn(b, n, generator=g, dtype=torch.float64) * 0.4  # plenty of clipped tokens
    adv_seq = torch.randn(b, generator=g, dtype=torch.float64)
    mask = (torch.rand(b, n, generator=g) > 0.3).double()
    mask[0] = 0  # a sequence with no assistant tokens

    ours_lp = new0.clone().requires_grad_(True)
    ours, metrics = policy_loss(ours_lp, old, adv_seq[:, None].expand(b, n).contiguous(), mask,
                                clip_low=0.2, clip_high=0.28, agg="token-mean")
    ours.backward()

    ref_lp = new0.clone().requires_grad_(True)
    ref, ref_metrics = trl_dapo_loss(ref_lp, old, adv_seq, mask, 0.2, 0.28)
    ref.backward()

    assert metrics["clipfrac"] > 0.05  # the clip branches are really exercised
    assert abs(ours.detach().item() - ref.detach().item()) < 1e-6
    assert torch.allclose(ours_lp.grad, ref_lp.grad, atol=1e-6, rtol=0)
    assert abs(float(metrics["clipfrac"]) - ref_metrics["clip_ratio/region_mean"][0]) < 1e-6
