"""`update_shift`: the KL and the signed logprob changes of one update, on hand-made logprobs."""

from __future__ import annotations

import math

import pytest

from selfplay.learner.update_shift import update_shift


def test_an_unmoved_policy_has_no_shift():
    rows = [[0.0, -1.0, -2.0], [0.0, -0.5, -0.25]]
    m = update_shift(rows, rows, [[0, 1, 1], [0, 1, 1]], [1.0, -1.0])
    assert m["shift_kl"] == 0.0 and m["shift_dlogp_pos"] == 0.0 and m["shift_dlogp_neg"] == 0.0
    assert m["shift_tokens_pos"] == 2 and m["shift_tokens_neg"] == 2


def test_signed_changes_follow_the_advantage_and_only_masked_tokens_count():
    before = [[0.0, -1.0, -1.0, -9.0], [0.0, -2.0, -2.0, -9.0], [0.0, -3.0, -3.0, -3.0]]
    after = [[0.0, -0.5, -0.7, 5.0], [0.0, -2.4, -2.2, 5.0], [0.0, -1.0, -1.0, -1.0]]
    masks = [[0, 1, 1, 0], [0, 1, 1, 0], [0, 1, 1, 1]]  # the last column of rows 0-1 is a prompt token
    m = update_shift(before, after, masks, [0.5, -0.5, 0.0])  # row 2 (advantage 0) counts in the KL only
    assert m["shift_dlogp_pos"] == pytest.approx((0.5 + 0.3) / 2)
    assert m["shift_dlogp_neg"] == pytest.approx((-0.4 - 0.2) / 2)
    log_ratios = [0.5, 0.3, -0.4, -0.2, 2.0, 2.0, 2.0]
    assert m["shift_kl"] == pytest.approx(sum(math.expm1(x) - x for x in log_ratios) / 7)
    assert m["shift_kl"] > 0 and m["shift_tokens_pos"] == 2 and m["shift_tokens_neg"] == 2


def test_a_missing_sign_is_nan_not_zero():
    m = update_shift([[0.0, -1.0]], [[0.0, -0.9]], [[0, 1]], [1.0])
    assert math.isnan(m["shift_dlogp_neg"]) and m["shift_tokens_neg"] == 0
    assert math.isnan(update_shift([], [], [], [])["shift_kl"])


def test_rows_that_do_not_line_up_are_refused():
    with pytest.raises(ValueError, match="one row each"):
        update_shift([[0.0]], [], [[1]], [1.0])
    with pytest.raises(ValueError, match="differ in length"):
        update_shift([[0.0, -1.0]], [[0.0]], [[0, 1]], [1.0])
    with pytest.raises(ValueError, match="one advantage a row"):
        update_shift([[0.0]], [[0.0]], [[1]], [])


def test_episode_shifts_sum_each_samples_masked_changes():
    from selfplay.learner.update_shift import episode_shifts

    before = [[0.0, -1.0, -1.0, -9.0], [0.0, -3.0, -3.0, -3.0]]
    after = [[0.0, -0.5, -0.7, 5.0], [0.0, -1.0, -1.0, -1.0]]
    shifts = episode_shifts(before, after, [[0, 1, 1, 0], [0, 1, 1, 1]])
    assert shifts[0] == (pytest.approx(0.8), 2) and shifts[1] == (pytest.approx(6.0), 3)
    with pytest.raises(ValueError, match="one row each"):
        episode_shifts(before, after[:1], [[1, 1, 1, 1]] * 2)
