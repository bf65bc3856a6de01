"""Shared prefixes: the layout and the plan (pure), and that running a group's prompt once gives the plain
pack's logprobs, gradients and optimizer step (a real tiny model and a real engine)."""

import random

import pytest

torch = pytest.importorskip("torch")

from selfplay.learner.packing import IGNORE, pack  # noqa: E402
from selfplay.learner.shared_prefix import (  # noqa: E402
    MIN_PREFIX,
    clusters,
    pack_shared,
    plan_shared_microbatches,
    segment_cost,
    shared_hidden,
    sharing_gain,
)


def _group(rng: random.Random, prompt: int, rests: list[int], vocab: int = 2000, start: int = 100):
    """Sequences that open with one prompt of `prompt` tokens, each with its own rest (loss on the rest)."""
    head = [rng.randrange(start, vocab) for _ in range(prompt)]
    seqs, masks = [], []
    for n in rests:
        tail = [rng.randrange(start, vocab) for _ in range(n)]
        seqs.append(head + tail)
        masks.append([0] * prompt + [1] * n)
    return seqs, masks


def _batch(seed: int = 0):
    rng = random.Random(seed)
    a, am = _group(rng, 90, [20, 35, 12])
    b, bm = _group(rng, 80, [25, 9])
    lone = [rng.randrange(100, 2000) for _ in range(40)]
    seqs = [a[0], b[0], lone, a[1], b[1], a[2]]
    masks = [am[0], bm[0], [0] * 10 + [1] * 30, am[1], bm[1], am[2]]
    return seqs, masks


def test_clusters_share_only_a_long_loss_free_opening():
    seqs, masks = _batch()
    segs = clusters(seqs, masks)
    members = sorted(tuple(sorted(s.members)) for s in segs)
    assert members == [(0, 3, 5), (1, 4), (2,)]
    for seg in segs:
        if len(seg.members) > 1:
            # one short of the common opening, and before every member's first loss token
            first_loss = min(masks[i].index(1) for i in seg.members)
            assert len(seg.prefix) == first_loss - 1
            assert all(list(seqs[i][: len(seg.prefix)]) == list(seg.prefix) for i in seg.members)
        else:
            assert seg.prefix == ()
    # without masks the opening may run into the first differing token only
    rng = random.Random(1)
    same, _ = _group(rng, 100, [5, 5])
    same[1][100] = same[0][100]  # the rests' first tokens agree
    (seg,) = clusters(same)
    assert len(seg.prefix) == 100
    # an opening of MIN_PREFIX tokens or fewer (less its last) runs each sequence whole
    short, _ = _group(rng, MIN_PREFIX, [10, 10])
    assert [s.prefix for s in clusters(short)] == [(), ()]


def test_a_short_opening_ahead_of_long_remainders_runs_them_whole():
    """A remainder attends to its cache under an explicit mask, over the whole rectangle: a shared opening
    that is short next to its remainders (the chat template's, between a solver and an injector
    demonstration; a role's system prompt between two solver demonstrations) saves less than that costs,
    a group's whole prompt ahead of its attempts' remainders saves more (the default run's update)."""
    assert sharing_gain([1192, 2632], 92) < 0
    assert sharing_gain([1459, 1334], 438) < 0
    assert sharing_gain([1500] * 4, 900) > 0
    rng = random.Random(3)
    seqs, masks = _group(rng, 93, [1100, 2540])
    assert [s.prefix for s in clusters(seqs, masks)] == [(), ()]
    seqs, masks = _group(rng, 901, [600, 620, 580, 610])
    assert [len(s.prefix) for s in clusters(seqs, masks)] == [900]


def test_two_groups_under_one_system_prompt_share_their_own_prompts():
    """Attempts at two tasks share the system prompt; each task's attempts share their whole prompt. One
    segment over all four would share only the system prompt: the split saves more."""
    rng = random.Random(2)
    system = [rng.randrange(100, 2000) for _ in range(80)]
    seqs, masks = [], []
    for _ in range(2):
        group, gm = _group(rng, 100, [30, 40])
        seqs += [system + s for s in group]
        masks += [[0] * 80 + m for m in gm]
    segs = clusters(seqs, masks)
    assert sorted(tuple(sorted(s.members)) for s in segs) == [(0, 1), (2, 3)]
    assert [len(s.prefix) for s in segs] == [179, 179]


def test_layout_predicts_every_token_of_every_sequence():
    seqs, masks = _batch()
    packed = pack_shared(seqs, masks)
    n = sum(len(s.prefix) for s in packed.segments) + sum(
        len(seqs[b]) - len(s.prefix) for s in packed.segments for b in s.members)
    assert packed.targets.numel() == n
    for b, seq in enumerate(seqs):
        assert packed.index[b, 0] == -1
        assert (packed.index[b, len(seq):] == -1).all()
        assert packed.targets[packed.index[b, 1: len(seq)]].tolist() == seq[1:]
    # each position predicts one token; the last of every run predicts none
    assert int((packed.targets == IGNORE).sum()) == len(seqs)
    # rows() and positions() invert each other on the tokens that carry loss
    mask_rows = torch.zeros(len(seqs), max(map(len, seqs)))
    for b, m in enumerate(masks):
        mask_rows[b, : len(m)] = torch.tensor(m, dtype=torch.float32)
    vals = torch.randn(mask_rows.shape) * mask_rows
    assert torch.equal(packed.rows(packed.positions(vals)) * mask_rows, vals)
    # a loss-bearing token is never predicted from a shared position
    shared = {int(i) for s, base in _prefix_positions(packed) for i in range(base, base + len(s.prefix))}
    for b, m in enumerate(masks):
        assert not shared & {int(packed.index[b, k]) for k, v in enumerate(m) if v}


def _prefix_positions(packed):
    base = 0
    for seg in packed.segments:
        yield seg, base
        base += len(seg.prefix) + sum(packed.seq_lens[b] - len(seg.prefix) for b in seg.members)


def test_plan_counts_a_shared_prefix_once_and_keeps_the_budget():
    seqs, masks = _batch()
    lens = [len(s) for s in seqs]
    plan = plan_shared_microbatches(seqs, 260, masks)
    assert sorted(i for mb in plan for i in mb) == list(range(len(seqs)))
    for mb in plan:
        cost = sum(segment_cost([lens[b] for b in seg.members], len(seg.prefix))
                   for seg in clusters([seqs[i] for i in mb], [masks[i] for i in mb]))
        assert cost <= 260 or len(mb) == 1
    # group a (90 + 20 + 35 + 12 shared: 156 tokens, 427 plain) fits one micro-batch of 260
    assert any(set(mb) >= {0, 3, 5} for mb in plan)
    with pytest.raises(ValueError, match="token_budget"):
        plan_shared_microbatches(seqs, 0, masks)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from transformers import AutoModelForCausalLM

    from selfplay.learner.tiny_model import save_tiny_model

    path = save_tiny_model(tmp_path_factory.mktemp("tiny") / "m", head_scale=8.0)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float64, attn_implementation="sdpa")
    return path, model.train()


def _plain_rows(model, seqs, temperature):
    from selfplay.learner.logprobs import chunked_logprobs, decoder_hidden

    packed = pack(seqs)
    hidden = decoder_hidden(model, packed, temperature)
    lp, ent = chunked_logprobs(model.get_output_embeddings(), hidden, packed.targets, 64)
    return packed.rows(lp), packed.rows(ent)


def test_logprobs_and_gradients_equal_the_plain_pack(tiny):
    from selfplay.learner.logprobs import chunked_logprobs

    _, model = tiny
    seqs, masks = _batch(3)
    w = torch.randn(len(seqs), max(map(len, seqs)), dtype=torch.float64)

    def grads(rows):
        model.zero_grad()
        (rows * w).sum().backward()
        return {n: p.grad.clone() for n, p in model.named_parameters()}

    lp_plain, ent_plain = _plain_rows(model, seqs, 0.7)
    g_plain = grads(lp_plain)
    packed = pack_shared(seqs, masks)
    assert sum(len(s.prefix) for s in packed.segments) > 0
    hidden = shared_hidden(model, packed, 0.7)
    lp, ent = chunked_logprobs(model.get_output_embeddings(), hidden, packed.targets, 64)
    lp_shared, ent_shared = packed.rows(lp), packed.rows(ent)
    g_shared = grads(lp_shared)
    assert torch.allclose(lp_shared, lp_plain, atol=1e-10)
    assert torch.allclose(ent_shared, ent_plain, atol=1e-10)
    # RMSNorm computes in float32 whatever the model's dtype: the prefix's gradient, summed over its
    # members before those float32 steps here and after them in the plain pack, agrees to float32 rounding
    for name, g in g_plain.items():
        assert float((g_shared[name] - g).abs().max()) <= 1e-5 * float(g.abs().max()), name


def _engine(make, path, share: bool, **kw):
    from selfplay.learner.config import EngineConfig

    return make(EngineConfig(model_dir=str(path), dtype="fp32", lr=1e-3, warmup_steps=1, token_budget=200,
                             gradient_checkpointing=False, share_prefix=share, **kw))


def _samples(seed: int = 5):
    from selfplay.learner.batch import Sample

    seqs, masks = _batch(seed)
    rng = random.Random(seed)
    return [Sample(tuple(s), tuple(m), tuple(-2.0 + 0.1 * rng.random() if v else 0.0 for v in m),
                   1.0 if i % 2 else -1.0) for i, (s, m) in enumerate(zip(seqs, masks))]


@pytest.mark.parametrize(("tis", "fused"), [(None, True), (2.0, True), (2.0, False)])
def test_engine_step_with_shared_prefixes_equals_the_plain_step(tiny, tis, fused, learner_engine):
    pytest.importorskip("deepspeed")
    from selfplay.learner.config import LossConfig

    path, _ = tiny
    samples = _samples()
    shared, plain = (_engine(learner_engine, path, share, loss=LossConfig(tis_cap=tis), fused_head=fused)
                     for share in (True, False))
    assert shared.share_prefix and not plain.share_prefix and shared.fused is fused
    old = plain.logprobs([s.input_ids for s in samples])
    for a, b in zip(shared.logprobs([s.input_ids for s in samples]), old):
        assert a == pytest.approx(b, abs=1e-5)
    _assert_same_step(shared, plain, shared.train_step(samples), plain.train_step(samples), "learner",
                      ("loss", "grad_norm", "entropy"))


def _assert_same_step(shared, plain, ms, mp, prefix: str, keys) -> None:
    """The two engines' step metrics and weights agree, and the shared one planned fewer micro-batches."""
    for key in keys:
        assert ms[f"{prefix}/{key}"] == pytest.approx(mp[f"{prefix}/{key}"], rel=1e-4, abs=1e-6), key
    assert ms[f"{prefix}/microbatches"] < mp[f"{prefix}/microbatches"]
    # Adam's step is lr * m / (sqrt(v) + eps): for a weight whose gradient is near 0 (summed with cancellation),
    # the rounding of another summation order moves it by a visible share of lr (1.7e-6 at lr 1e-3 on one
    # weight of 2048, torch 2.13 on an AVX-512 box). A wrong prefix moves most weights by about lr.
    lr = shared.config.lr
    for (name, a), (_, b) in zip(shared.module.named_parameters(), plain.module.named_parameters()):
        assert torch.allclose(a, b, atol=1e-2 * lr), name


@pytest.mark.parametrize("fused", [True, False])
def test_sft_step_with_shared_prefixes_equals_the_plain_step(tiny, fused, learner_engine):
    pytest.importorskip("deepspeed")
    path, _ = tiny
    samples = _samples()
    shared, plain = (_engine(learner_engine, path, share, fused_head=fused) for share in (True, False))
    _assert_same_step(shared, plain, shared.sft_step(samples), plain.sft_step(samples), "sft",
                      ("loss", "grad_norm", "loss_tokens"))


def test_checkpointing_turns_sharing_off(tiny):
    pytest.importorskip("deepspeed")
    from selfplay.learner.config import EngineConfig
    from selfplay.learner.engine import LearnerEngine

    path, _ = tiny
    engine = LearnerEngine(EngineConfig(model_dir=str(path), dtype="fp32", gradient_checkpointing=True))
    assert not engine.share_prefix
