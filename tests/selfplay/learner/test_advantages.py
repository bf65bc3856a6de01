import math

import pytest

from selfplay.learner.advantages import ESTIMATORS, group_advantages

REWARDS = [1.0, -1.0, -1.0, 1.0, 1.0]


def expected(name, rs):
    m = sum(rs) / len(rs)
    if name == "grpo":
        s = math.sqrt(sum((r - m) ** 2 for r in rs) / (len(rs) - 1))
        return [(r - m) / (s + 1e-6) for r in rs]
    if name == "dr_grpo":
        return [r - m for r in rs]
    return [r - (sum(rs) - r) / (len(rs) - 1) for r in rs]


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_estimators_match_their_formula(name):
    adv, metrics = group_advantages(REWARDS, name)
    assert adv == pytest.approx(expected(name, REWARDS), abs=1e-9)
    assert metrics["reward_mean"] == pytest.approx(0.2)
    assert metrics["all_equal"] == 0.0
    assert sum(adv) == pytest.approx(0.0, abs=1e-9)  # all three are zero-sum within a group


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_all_equal_group_has_zero_advantage(name):
    adv, metrics = group_advantages([0.5] * 4, name)
    assert adv == [0.0] * 4 and metrics["all_equal"] == 1.0


def test_rloo_is_scaled_mean_baseline():
    adv, _ = group_advantages(REWARDS, "rloo")
    drg, _ = group_advantages(REWARDS, "dr_grpo")
    g = len(REWARDS)
    assert adv == pytest.approx([a * g / (g - 1) for a in drg])


@pytest.mark.parametrize("bad,match", [([], "empty"), ([1.0, float("nan")], "non-finite")])
def test_bad_groups_raise(bad, match):
    with pytest.raises(ValueError, match=match):
        group_advantages(bad)


def test_rloo_needs_two_and_unknown_estimator_named():
    with pytest.raises(ValueError, match="at least 2"):
        group_advantages([1.0], "rloo")
    with pytest.raises(ValueError, match="grpo"):
        group_advantages([1.0, 0.0], "ppo")
