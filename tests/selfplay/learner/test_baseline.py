import pytest

from selfplay.learner.baseline import RunningMeanBaseline, injector_key


def test_running_mean_excludes_current_batch_and_updates_per_key():
    b = RunningMeanBaseline(momentum=0.5)
    keys = ["r1|removal", "r1|removal", "r2|history"]
    adv, m = b.advantages(keys, [1.0, 0.0, -1.0])
    # nothing seen yet: each sample against the mean of the batch's others (leave-one-out)
    assert adv == [pytest.approx(1.5), pytest.approx(0.0), pytest.approx(-1.5)]
    assert b.values["r1|removal"] == 0.5 and b.values["r2|history"] == -1.0
    assert b.values["*"] == pytest.approx(0.0)
    adv2, _ = b.advantages(["r1|removal", "r3|removal"], [1.0, 0.5])
    # r1 uses its own history; r3 is new and falls back to the role-wide mean ("*" = 0.0)
    assert adv2 == [pytest.approx(0.5), pytest.approx(0.5)]
    assert b.values["r1|removal"] == pytest.approx(0.5 * 0.5 + 0.5 * 1.0)
    assert m["injector_baseline_keys"] == 2.0


def test_state_round_trip_and_validation():
    b = RunningMeanBaseline()
    b.advantages(["a|b"], [0.3])
    again = RunningMeanBaseline.from_state_dict(b.state_dict())
    assert again.values == b.values and again.momentum == b.momentum
    with pytest.raises(ValueError, match="momentum"):
        RunningMeanBaseline(momentum=1.0)
    with pytest.raises(ValueError, match="keys"):
        b.advantages(["a"], [1.0, 2.0])


def test_injector_key():
    assert injector_key({"repo": "toolz", "strategy": "removal"}) == "toolz|removal"
    assert injector_key({}) == "?|?"


def test_first_batch_is_its_own_leave_one_out_baseline():
    """Seven invalid artifacts and one valid one: the valid one is pushed up, the invalid ones only a little
    down, where a fixed initial baseline of 0 would push all seven down by a full -1."""
    b = RunningMeanBaseline()
    adv, _ = b.advantages(["t|direct"] * 8, [-1.0] * 7 + [1.0])
    assert adv[-1] == pytest.approx(2.0) and adv[0] == pytest.approx(-1.0 - (-5.0 / 7))
    assert sum(adv) == pytest.approx(0.0, abs=1e-12)  # (n r_i - S) / (n - 1) sums to 0
    # all equal: no signal at all, so dynamic sampling's zero-advantage rule drops them
    assert RunningMeanBaseline().advantages(["t|direct"] * 3, [-1.0] * 3)[0] == [0.0, 0.0, 0.0]
    # a first batch of one has no others: `initial`
    assert RunningMeanBaseline().advantages(["t|direct"], [-1.0])[0] == [-1.0]
