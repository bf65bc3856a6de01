"""SSR Eq. 1 and the solver reward, as a table."""

from __future__ import annotations

import pytest

from selfplay.judge.rewards import RewardConfig, injector_reward, solve_rate, solver_reward


@pytest.mark.parametrize("valid, k, expected", [
    (False, None, -1.0),
    (True, 0, -0.8),
    (True, 8, -0.8),
    (True, 1, 1 - 1.8 / 8),       # 0.775
    (True, 2, 1 - 1.8 * 2 / 8),   # 0.55
    (True, 4, 1 - 1.8 * 4 / 8),   # 0.1
    (True, 7, 1 - 1.8 * 7 / 8),   # -0.575
])
def test_injector_reward_table_g8(valid, k, expected):
    s = None if k is None else solve_rate([True] * k + [False] * (8 - k))
    assert injector_reward(valid, s) == pytest.approx(expected)


def test_paper_examples():
    assert injector_reward(True, 1 / 8) == pytest.approx(0.775)
    assert injector_reward(True, 7 / 8) == pytest.approx(-0.575)


def test_reward_for_0_lt_s_lt_1_lies_between_minus_alpha_and_one():
    for k in range(1, 8):
        assert -0.8 < injector_reward(True, k / 8) < 1


def test_alpha_is_configurable():
    assert injector_reward(True, 0.0, RewardConfig(alpha=0.5)) == -0.5
    assert injector_reward(True, 0.5, RewardConfig(alpha=0.5)) == pytest.approx(0.25)


def test_consistency_only_ablation_is_binary():
    cfg = RewardConfig(injector_mode="consistency")
    assert injector_reward(True, None, cfg) == 1.0
    assert injector_reward(True, 0.0, cfg) == 1.0
    assert injector_reward(False, None, cfg) == -1.0


def test_solver_reward():
    assert solver_reward(True) == 1 and solver_reward(False) == -1


@pytest.mark.parametrize("kwargs, field", [({"alpha": 1.0}, "alpha"), ({"alpha": 0}, "alpha"),
                                           ({"group_size": 0}, "group_size"), ({"injector_mode": "x"}, "injector_mode")])
def test_bad_config_names_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        RewardConfig(**kwargs)


def test_bad_inputs():
    with pytest.raises(ValueError):
        solve_rate([])
    with pytest.raises(ValueError, match="solve rate"):
        injector_reward(True, None)
    with pytest.raises(ValueError):
        injector_reward(True, 1.5)
