"""The sampling distribution (`process_logits`) on one row and on rows processed together, and the draw
from it (`inverse_cdf`): pure tensor logic, no model."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from agent_scaffold.policies.sampling import inverse_cdf, process_logits  # noqa: E402
from agent_scaffold.policy import SamplingParams  # noqa: E402


@pytest.mark.parametrize("params", [
    SamplingParams(), SamplingParams(temperature=0.7), SamplingParams(temperature=0),
    SamplingParams(top_k=5), SamplingParams(top_p=0.8), SamplingParams(min_p=0.05),
    SamplingParams(temperature=0.6, top_p=0.9, top_k=20, min_p=0.01)])
def test_rows_processed_together_equal_each_row_alone(params):
    logits = torch.randn(5, 300, generator=torch.Generator().manual_seed(0)) * 3
    together = process_logits(logits, params)
    for i in range(5):
        assert torch.allclose(together[i], process_logits(logits[i], params), atol=1e-6, equal_nan=False)
    assert torch.allclose(together.exp().sum(-1), torch.ones(5))


def test_truncation_keeps_the_tokens_it_should():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05], [0.05, 0.15, 0.3, 0.5]]))
    kept = process_logits(logits, SamplingParams(top_p=0.8)).isfinite()
    assert kept.tolist() == [[True, True, False, False], [False, False, True, True]]
    kept = process_logits(logits, SamplingParams(top_k=1)).isfinite()
    assert kept.tolist() == [[True, False, False, False], [False, False, False, True]]
    kept = process_logits(logits, SamplingParams(min_p=0.2)).isfinite()  # below 0.2 x 0.5 goes
    assert kept.tolist() == [[True, True, True, False], [False, True, True, True]]


def test_the_repetition_penalty_takes_one_row():
    logits, seen = torch.tensor([2.0, -1.0, 0.5]), torch.tensor([0, 1])
    penalised = process_logits(logits.clone(), SamplingParams(repetition_penalty=2.0), seen)
    assert torch.allclose(penalised, torch.log_softmax(torch.tensor([1.0, -2.0, 0.5]), -1))
    with pytest.raises(ValueError, match="one row"):
        process_logits(torch.zeros(2, 3), SamplingParams(repetition_penalty=2.0), seen)


def test_inverse_cdf_draws_from_the_distribution_and_never_a_masked_token():
    probs = torch.tensor([0.0, 0.1, 0.0, 0.6, 0.3, 0.0])
    logp = torch.log(probs)[None].expand(4, -1)
    gen = torch.Generator().manual_seed(1)
    counts = torch.zeros(6)
    for _ in range(2500):  # 4 rows x 2,500 draws
        for t in inverse_cdf(logp, torch.rand(4, generator=gen)).tolist():
            counts[t] += 1
    assert counts[[0, 2, 5]].sum() == 0
    n = counts.sum()
    for p, c in zip(probs.tolist(), counts.tolist()):
        if p:  # within 5 standard deviations of the binomial
            assert abs(c - n * p) < 5 * math.sqrt(n * p * (1 - p))
    # The ends of [0, 1): the first and the last token that has mass.
    assert inverse_cdf(logp[:2], torch.tensor([0.0, 1.0 - 2 ** -24])).tolist() == [1, 4]


def test_inverse_cdf_keeps_the_share_of_very_unlikely_tokens():
    """A token of probability 1e-9 behind 49k others: in float32 cumulative sums its step is lost."""
    logp = torch.full((1, 49152), math.log(1e-9))
    logp[0, 0] = 0.0
    logp = torch.log_softmax(logp, -1)
    cdf = logp.exp().double().cumsum(-1)
    assert float(cdf[0, 0].float() + 1e-9) == float(cdf[0, 0].float())  # float32 would lose the step
    target = float(cdf[0, 100]) - 0.5e-9  # inside token 100's own step
    assert inverse_cdf(logp, torch.tensor([target / float(cdf[0, -1])], dtype=torch.float64)).item() == 100
