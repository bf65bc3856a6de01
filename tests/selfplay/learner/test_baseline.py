import pytest

from selfplay.learner.baseline import RunningMeanBaseline, injector_key


def test_running_mean_excludes_current_batch_and_updates_per_key():
    b = RunningMeanBaseline(momentum=0.5)
    keys = ["r1|removal", "r1|removal", "r2|history"]
    adv, m = b.advantages(keys, [1.0, 0.0, -1.0])
    assert adv == [1.0, 0.0, -1.0]  # nothing seen yet: baseline = initial 0.0
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
