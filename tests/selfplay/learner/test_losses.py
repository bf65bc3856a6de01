import pytest
import torch

from selfplay.learner.losses import AGGREGATIONS, agg_loss, batch_denominator, policy_loss

B, T = 3, 5


@pytest.fixture
def data():
    g = torch.Generator().manual_seed(0)
    old = -torch.rand(B, T, generator=g, dtype=torch.float64)
    new = old + torch.randn(B, T, generator=g, dtype=torch.float64) * 0.5
    adv = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)[:, None].expand(B, T).contiguous()
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [0, 1, 0, 0, 0]], dtype=torch.float64)
    return new, old, adv, mask


def reference_pg(new, old, adv, lo=0.2, hi=0.28):
    out = torch.empty_like(new)
    for i in range(B):
        for t in range(T):
            r = float(torch.exp(new[i, t] - old[i, t]))
            a = float(adv[i, t])
            out[i, t] = max(-a * r, -a * min(max(r, 1 - lo), 1 + hi))
    return out


@pytest.mark.parametrize("mode", sorted(AGGREGATIONS))
def test_aggregations(mode, data):
    new, old, adv, mask = data
    pg = reference_pg(new, old, adv)
    loss, _ = policy_loss(new, old, adv, mask, agg=mode, norm_len=T)
    if mode == "token-mean":
        want = sum(float(pg[i, t]) for i in range(B) for t in range(T) if mask[i, t]) / 9
    elif mode == "seq-mean-token-mean":
        want = sum(sum(float(pg[i, t]) for t in range(T) if mask[i, t]) / float(mask[i].sum()) for i in range(B)) / B
    else:
        want = sum(float(pg[i, t]) for i in range(B) for t in range(T) if mask[i, t]) / (B * T)
    assert float(loss) == pytest.approx(want, abs=1e-12)


@pytest.mark.parametrize("mode", sorted(AGGREGATIONS))
def test_microbatch_sum_equals_full_batch(mode, data):
    new, old, adv, mask = data
    full, _ = policy_loss(new, old, adv, mask, agg=mode, norm_len=T)
    parts = [slice(0, 2), slice(2, 3)]
    den = batch_denominator([mask[p] for p in parts], mode, norm_len=T)
    total = sum(policy_loss(new[p], old[p], adv[p], mask[p], agg=mode, norm_len=T, denominator=den)[0]
                for p in parts)
    assert float(total) == pytest.approx(float(full), abs=1e-12)


def test_seq_mean_skips_empty_rows():
    mat = torch.tensor([[1.0, 3.0], [5.0, 5.0]])
    mask = torch.tensor([[1.0, 1.0], [0.0, 0.0]])
    assert float(agg_loss(mat, mask, "seq-mean-token-mean")) == 2.0


def test_metrics_and_masked_tokens_carry_no_gradient(data):
    new, old, adv, mask = data
    new = new.clone().requires_grad_(True)
    loss, m = policy_loss(new, old, adv, mask)
    loss.backward()
    assert torch.all(new.grad[mask == 0] == 0)
    ratio = torch.exp(new.detach() - old)
    clipped = ((ratio < 0.8) & (adv < 0)) | ((ratio > 1.28) & (adv > 0))
    assert float(m["clipfrac"]) == pytest.approx(float(clipped[mask.bool()].double().mean()))
    assert float(m["approx_kl"]) >= 0
    assert torch.all(new.grad[clipped] == 0)  # clipped tokens give no gradient


def test_identical_policies_give_minus_mean_advantage(data):
    _, old, adv, mask = data
    loss, m = policy_loss(old.clone(), old, adv, mask)
    assert float(loss) == pytest.approx(-float((adv * mask).sum() / mask.sum()))
    assert float(m["clipfrac"]) == 0 and float(m["approx_kl"]) == pytest.approx(0)


def test_dual_clip_bounds_negative_advantage_loss():
    old = torch.zeros(1, 2, dtype=torch.float64)
    new = torch.log(torch.tensor([[10.0, 10.0]], dtype=torch.float64))  # ratio 10
    adv = torch.tensor([[-1.0, 1.0]], dtype=torch.float64)
    mask = torch.ones(1, 2, dtype=torch.float64)
    plain, _ = policy_loss(new, old, adv, mask, agg="seq-mean-token-sum-norm", norm_len=1)
    dual, m = policy_loss(new, old, adv, mask, agg="seq-mean-token-sum-norm", norm_len=1, clip_ratio_c=3.0)
    # token 0: max(10, 0.8) = 10 without dual clip, min(10, 3) = 3 with; token 1: -1.28 either way
    assert float(plain) == pytest.approx(10 - 1.28) and float(dual) == pytest.approx(3 - 1.28)
    assert float(m["dualclipfrac"]) == 0.5
    with pytest.raises(ValueError, match="clip_ratio_c"):
        policy_loss(new, old, adv, mask, clip_ratio_c=1.0)


def test_tis_weights_are_capped_and_detached(data):
    new, old, adv, mask = data
    rollout = old - torch.tensor([0.0, 2.0, -1.0], dtype=torch.float64)[:, None]  # weights 1, e^2, e^-1
    base, _ = policy_loss(new, old, adv, mask, agg="seq-mean-token-mean")
    w = torch.tensor([1.0, 2.0, float(torch.exp(torch.tensor(-1.0)))], dtype=torch.float64)
    loss, m = policy_loss(new, old, adv, mask, agg="seq-mean-token-mean", rollout_logprobs=rollout, tis_cap=2.0)
    pg = reference_pg(new, old, adv) * w[:, None]
    want = sum(float((pg[i] * mask[i]).sum() / mask[i].sum()) for i in range(B)) / B
    assert float(loss) == pytest.approx(want) and float(loss) != pytest.approx(float(base))
    with pytest.raises(ValueError, match="tis_cap"):
        policy_loss(new, old, adv, mask, rollout_logprobs=rollout)


def test_kl_penalty_off_by_default_and_added_when_on(data):
    new, old, adv, mask = data
    ref = old.clone()
    base, m0 = policy_loss(new, old, adv, mask, ref_logprobs=ref)  # kl_coef 0 -> ignored
    loss, m = policy_loss(new, old, adv, mask, ref_logprobs=ref, kl_coef=0.1)
    d = ref - new
    kl = ((torch.exp(d) - d - 1) * mask).sum() / mask.sum()
    assert "kl" not in m0 and float(m["kl"]) == pytest.approx(float(kl))
    assert float(loss) == pytest.approx(float(base) + 0.1 * float(kl))


def test_bad_inputs_are_named(data):
    new, old, adv, mask = data
    with pytest.raises(ValueError, match="shape mismatch"):
        policy_loss(new[:, :2], old, adv, mask)
    with pytest.raises(ValueError, match="token-mean"):
        policy_loss(new, old, adv, mask, agg="sum")
    with pytest.raises(ValueError, match="norm_len"):
        batch_denominator([mask], "seq-mean-token-sum-norm")
