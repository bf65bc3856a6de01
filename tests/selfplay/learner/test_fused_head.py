"""The fused lm_head loss equals chunked logprobs + `policy_loss` (values and gradients), for every
aggregation and loss option; and the engine's fused and checkpointed paths take the same step."""

import pytest

torch = pytest.importorskip("torch")

from selfplay.learner.fused_loss import packed_policy_loss  # noqa: E402
from selfplay.learner.logprobs import can_fuse, chunked_logprobs, fused_head_loss  # noqa: E402
from selfplay.learner.losses import AGGREGATIONS, agg_loss, policy_loss, token_weights  # noqa: E402
from selfplay.learner.packing import IGNORE, pack, shift_to_tokens, to_positions, unpack  # noqa: E402

OPTIONS = {
    "plain": {},
    "dual-clip": {"clip_ratio_c": 3.0},
    "tis": {"tis_cap": 2.0},
    "kl": {"kl_coef": 0.1},
}


@pytest.mark.parametrize("agg", sorted(AGGREGATIONS))
def test_token_weights_reproduce_every_aggregation(agg):
    g = torch.Generator().manual_seed(0)
    mat = torch.randn(4, 7, generator=g)
    mask = (torch.rand(4, 7, generator=g) > 0.4).float()
    mask[2] = 0  # a sequence with no assistant token
    for den in (None, 11.0):
        kw = {"norm_len": 9, "denominator": den}
        assert torch.allclose((mat * token_weights(mask, agg, **kw)).sum(), agg_loss(mat, mask, agg, **kw), atol=1e-6)


def test_to_positions_inverts_shift_and_unpack():
    lens = (3, 1, 4)
    rows = torch.tensor([[0.0, 1, 2, 0], [0, 0, 0, 0], [0, 5, 6, 7]])
    pos = to_positions(rows, lens)
    assert pos.tolist() == [1, 2, 0, 0, 5, 6, 7, 0]
    assert torch.equal(unpack(shift_to_tokens(pos, lens), lens), rows)


def _inputs(seed: int, lens=(6, 1, 9, 4), vocab: int = 40, hidden: int = 8):
    g = torch.Generator().manual_seed(seed)
    head = torch.nn.Linear(hidden, vocab, bias=False).double()
    with torch.no_grad():
        head.weight.copy_(torch.randn(vocab, hidden, generator=g, dtype=torch.float64))
    seqs = [torch.randint(0, vocab, (n,), generator=g).tolist() for n in lens]
    packed = pack(seqs)
    h = torch.randn(sum(lens), hidden, generator=g, dtype=torch.float64)
    t = max(lens)
    mask = torch.zeros(len(lens), t, dtype=torch.float64)
    for b, n in enumerate(lens):
        mask[b, 1:n] = (torch.rand(n - 1, generator=g) > 0.3).double()
    with torch.no_grad():  # behaviour logprobs near the current ones, so most ratios are inside the clip range
        lp = unpack(shift_to_tokens(chunked_logprobs(head, h, packed.targets)[0], packed.seq_lens), packed.seq_lens)
    old = (lp + 0.2 * torch.randn(lp.shape, generator=g, dtype=torch.float64)) * mask
    adv = torch.randn(len(lens), 1, generator=g, dtype=torch.float64) * mask
    return head, packed, h, old, adv, mask


@pytest.mark.parametrize("option", sorted(OPTIONS))
@pytest.mark.parametrize("agg", sorted(AGGREGATIONS))
@pytest.mark.parametrize("chunk", [1, 5, 64])
def test_fused_equals_chunked_then_policy_loss(agg, option, chunk):
    head, packed, hidden, old, adv, mask = _inputs(seed=hash((agg, option)) % 1000)
    terms = dict(OPTIONS[option])
    g = torch.Generator().manual_seed(7)
    if "tis_cap" in terms:
        terms["rollout_logprobs"] = old - torch.rand(old.shape, generator=g, dtype=torch.float64) * mask
    if "kl_coef" in terms:
        terms["ref_logprobs"] = old + torch.randn(old.shape, generator=g, dtype=torch.float64) * mask
    kw = dict(agg=agg, norm_len=12, denominator=None if agg != "seq-mean-token-sum-norm" else 30.0)
    results = []
    for fused in (True, False):
        h = hidden.clone().requires_grad_(True)
        head.weight.grad = None
        if fused:
            loss, metrics = packed_policy_loss(head, h, packed, old, adv, mask, chunk=chunk, **kw, **terms)
        else:
            lp_pos, ent_pos = chunked_logprobs(head, h, packed.targets, chunk)
            lp = unpack(shift_to_tokens(lp_pos, packed.seq_lens), packed.seq_lens)
            ent = unpack(shift_to_tokens(ent_pos, packed.seq_lens), packed.seq_lens)
            loss, metrics = policy_loss(lp, old, adv, mask, **kw, **terms)
            metrics["entropy"] = (ent * mask).sum() / mask.sum()
        loss.backward()
        results.append((loss.detach(), h.grad, head.weight.grad, metrics))
    for a, b in zip(results[0][:3], results[1][:3]):
        assert torch.allclose(a, b, atol=1e-10, rtol=1e-9), (a, b)
    fused_metrics, reference = results[0][3], results[1][3]
    assert fused_metrics.keys() == reference.keys()  # one policy_loss's worth of metrics, entropy included
    for key in reference:
        assert torch.allclose(fused_metrics[key], reference[key], atol=1e-10, rtol=1e-9), key
    assert float(results[0][1].abs().sum()) > 0  # the check can fail: gradients are not trivially zero


def test_fused_head_bf16_weight_keeps_dtype_and_matches():
    head, packed, hidden, old, adv, mask = _inputs(seed=3, vocab=64, hidden=16)
    head32 = torch.nn.Linear(16, 64, bias=False)
    with torch.no_grad():
        head32.weight.copy_(head.weight.float())
    head16 = torch.nn.Linear(16, 64, bias=False).to(torch.bfloat16)
    with torch.no_grad():
        head16.weight.copy_(head.weight.to(torch.bfloat16))
    h = hidden.to(torch.bfloat16).requires_grad_(True)
    loss, _ = packed_policy_loss(head16, h, packed, old.float(), adv.float(), mask.float(), chunk=4)
    loss.backward()
    assert h.grad.dtype == torch.bfloat16 and head16.weight.grad.dtype == torch.bfloat16
    ref, _ = packed_policy_loss(head32, hidden.float(), packed, old.float(), adv.float(), mask.float())
    assert abs(float(loss.detach()) - float(ref.detach())) < 0.05 * max(1.0, abs(float(ref.detach())))


def test_fused_head_refuses_other_heads():
    assert not can_fuse(torch.nn.Linear(4, 8, bias=True)) and can_fuse(torch.nn.Linear(4, 8, bias=False))
    with pytest.raises(ValueError, match="bias-free nn.Linear"):
        fused_head_loss(torch.nn.Linear(4, 8), torch.zeros(3, 4), torch.tensor([1, 2, IGNORE]),
                        lambda lp, s, e: lp.sum())


@pytest.mark.slow
def test_engine_fused_and_checkpointed_paths_take_the_same_step(learner_engine):
    """Same samples, same seed: the fused and checkpointed engines report the same loss and grad norm
    and end with the same weights (the tied embedding included), with the default loss (TIS on). One pair
    of SmolLM2 engines only: each holds weights, gradients and Adam state, and this part of the suite must
    fit a 24 GiB CI machine."""
    pytest.importorskip("deepspeed")
    from selfplay.learner.config import EngineConfig

    from .conftest import make_samples

    out = []
    for fused in (True, False):
        # packed as the bounds below were measured (test_shared_prefix.py compares the shared layout)
        engine = learner_engine(EngineConfig(lr=1e-3, warmup_steps=1, gradient_checkpointing=False, token_budget=20,
                                             logprob_chunk=5, fused_head=fused, share_prefix=False))
        assert engine.fused is fused
        m = engine.train_step(make_samples(engine.tokenizer))
        w = engine.module.get_output_embeddings().weight.detach().clone()
        out.append((m, w))
        engine.close()  # before the next engine: each holds its optimizer state
    (m1, w1), (m2, w2) = out
    for key in ("learner/loss", "learner/grad_norm", "learner/entropy", "learner/clipfrac", "learner/approx_kl"):
        assert m1[key] == pytest.approx(m2[key], rel=1e-4, abs=1e-7), key
    assert m1["learner/microbatches"] > 1
    # Adam's first step is ~lr * sign(grad): where a gradient is near 0, float rounding of the two paths
    # can move a weight by up to ~lr. Without TIS, 3 of 28M weights differed by more than 1e-6 (none by 1e-5);
    # TIS weights shrink more gradients towards 0: 3 of 28M differed by more than 1e-5 (at most 0.3 lr) and
    # 1.4e-5 of them by more than 1e-6. With transformers 5.24 (torch 2.13, which `transformers>=4.56`
    # installed on a fresh machine on 2026-11-29) the paths round differently: 33 of 28M (1.2e-6) differed
    # by more than 1e-5 (at most 0.44 lr) and 4.1e-5 by more than 1e-6. The bounds leave room for both.
    diff = (w1 - w2).abs()
    assert float(diff.max()) <= 1e-3  # never more than one Adam step of lr
    assert float(diff.gt(1e-5).float().mean()) < 5e-6
    assert float(diff.gt(1e-6).float().mean()) < 1e-4


def test_a_frozen_head_gets_no_weight_gradient_and_the_same_hidden_gradient():
    """LoRA freezes the head: the fused loss then skips the head's weight gradient, and the hidden states'
    gradient is the one a trainable head gives."""
    head, packed, h, _, _, _ = _inputs(3)

    def token_loss(lp, s, e):
        return -lp.sum()

    grads = []
    for trainable in (True, False):
        head.weight.requires_grad_(trainable)
        head.weight.grad = None
        hidden = h.clone().requires_grad_()
        loss, _, _ = fused_head_loss(head, hidden, packed.targets, token_loss, chunk=5)
        loss.backward()
        grads.append(hidden.grad)
        assert (head.weight.grad is not None) is trainable
    assert torch.allclose(grads[0], grads[1], atol=1e-12)


def test_kept_positions_give_the_loss_gradients_and_logprobs_of_the_whole_row():
    """`keep`: logits for the loss-bearing positions only. Where every other position's loss weight is 0,
    the loss and both gradients equal the whole row's; kept positions' logprobs and entropies are the
    same and the rest come back 0. A keep that drops a weighted position changes the loss (the check can
    fail)."""
    head, packed, h, _, _, mask = _inputs(5)
    row_w = to_positions(mask, packed.seq_lens)
    keep = row_w != 0
    assert 0 < int(keep.sum()) < keep.numel()

    def run(keep_arg, weights):
        head.weight.grad = None
        hidden = h.clone().requires_grad_()
        loss, lp, ent = fused_head_loss(head, hidden, packed.targets, lambda x, s, e: -(x * weights[s:e]).sum(),
                                        chunk=3, keep=keep_arg)
        loss.backward()
        return loss.detach(), hidden.grad, head.weight.grad.clone(), lp, ent

    whole = run(None, row_w)
    kept = run(keep, row_w[keep])
    for a, b in zip(whole[:3], kept[:3]):
        assert torch.allclose(a, b, atol=1e-12, rtol=1e-10)
    for a, b in zip(whole[3:], kept[3:]):
        assert torch.allclose(a[keep], b[keep], atol=1e-12) and not b[~keep].any()
    assert float(whole[1].abs().sum()) > 0
    fewer = keep.clone()
    fewer[keep.nonzero()[0, 0]] = False
    assert not torch.allclose(run(fewer, row_w[fewer])[0], whole[0])
    nothing = run(torch.zeros_like(keep), row_w[:0])
    assert float(nothing[0]) == 0 and not nothing[1].any() and not nothing[3].any()
