"""Chunked == naive logprobs (values and gradients); packed == unpacked logprobs on the real model."""

import pytest

torch = pytest.importorskip("torch")

from selfplay.learner.logprobs import chunked_logprobs, naive_logprobs, packed_token_logprobs  # noqa: E402
from selfplay.learner.packing import IGNORE, pack, unpack  # noqa: E402


def test_chunked_equals_naive_values_and_grads(hf_model):
    head = hf_model.get_output_embeddings()
    g = torch.Generator().manual_seed(0)
    hidden = torch.randn(37, head.in_features, generator=g)
    targets = torch.randint(0, head.out_features, (37,), generator=g)
    targets[[5, 36]] = IGNORE
    results = []
    for fn in (lambda h: chunked_logprobs(head, h, targets, chunk=8), lambda h: naive_logprobs(head, h, targets)):
        h = hidden.clone().requires_grad_(True)
        head.weight.grad = None
        lp, ent = fn(h)
        (lp * torch.linspace(-1, 1, 37)).sum().backward()
        results.append((lp.detach(), ent, h.grad.clone(), head.weight.grad.clone()))
    (lp1, e1, gh1, gw1), (lp2, e2, gh2, gw2) = results
    head.weight.grad = None
    assert lp1[5] == 0 and lp1[36] == 0
    assert torch.allclose(lp1, lp2, atol=1e-5) and torch.allclose(e1, e2, atol=1e-5)
    assert torch.allclose(gh1, gh2, atol=1e-6) and torch.allclose(gw1, gw2, atol=1e-6)
    assert float(e1.min()) > 0


@pytest.mark.parametrize("block_mask", [True, False], ids=["sdpa-4d-mask", "position-id-detection"])
def test_packed_equals_unpacked(hf_model, block_mask):
    g = torch.Generator().manual_seed(1)
    seqs = [torch.randint(0, 49152, (n,), generator=g).tolist() for n in (9, 1, 14, 5)]
    with torch.no_grad():
        packed = pack(seqs, block_mask=block_mask)
        lp, _ = packed_token_logprobs(hf_model, packed, chunk=6)
        rows = unpack(lp, packed.seq_lens)
        for i, s in enumerate(seqs):
            logits = hf_model(input_ids=torch.tensor([s])).logits[0].float()
            ref = torch.log_softmax(logits, -1)[:-1].gather(-1, torch.tensor(s[1:])[:, None])[:, 0]
            ref = torch.cat([torch.zeros(1), ref])
            assert torch.allclose(rows[i, : len(s)], ref, atol=1e-4), i
            assert torch.all(rows[i, len(s):] == 0)


def test_pack_layout():
    p = pack([[5, 6, 7], [8, 9]])
    assert p.position_ids.tolist() == [[0, 1, 2, 0, 1]]
    assert p.targets.tolist() == [6, 7, IGNORE, 9, IGNORE]
    m = p.attention_mask[0, 0]
    assert m[4].tolist() == [False, False, False, True, True] and m[2].tolist() == [True, True, True, False, False]
    with pytest.raises(ValueError, match="empty"):
        pack([[1], []])
