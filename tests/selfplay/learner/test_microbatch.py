import pytest

from selfplay.learner.microbatch import plan_microbatches


@pytest.mark.parametrize("lengths,budget", [([5, 3, 8, 2, 7], 10), ([100], 10), ([1] * 7, 3), ([], 4)])
def test_plan_covers_each_index_once_within_budget(lengths, budget):
    plan = plan_microbatches(lengths, budget)
    assert sorted(i for mb in plan for i in mb) == list(range(len(lengths)))
    for mb in plan:
        assert len(mb) == 1 or sum(lengths[i] for i in mb) <= budget


def test_first_fit_decreasing_packs_tightly():
    # sorted 8, 7, 5, 3, 2: 3 joins 7, 2 joins 8
    assert plan_microbatches([5, 3, 8, 2, 7], 10) == [[2, 3], [4, 1], [0]]
    with pytest.raises(ValueError):
        plan_microbatches([1], 0)
