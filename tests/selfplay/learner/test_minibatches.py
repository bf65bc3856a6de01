"""The split of an update's samples into its steps' mini-batches (pure)."""

from __future__ import annotations

import random

import pytest

from selfplay.learner.minibatches import split_update


def _old_split(n: int, steps: int, seed: str) -> list[list[int]]:
    """PolicyLearner.train's split before the group split, written out."""
    steps = max(1, min(steps, n))
    order = list(range(n))
    if steps > 1:
        random.Random(seed).shuffle(order)
    return [order[k::steps] for k in range(steps)]


def test_the_sample_split_is_the_old_one():
    keys = ["a"] * 4 + ["b"] * 4 + ["c", "d"]
    lengths = [100 + i for i in range(10)]
    for steps in (1, 2, 3, 4, 20):
        for seed in ("0:1", "3:7"):
            assert split_update(keys, lengths, steps, seed, "sample") == _old_split(10, steps, seed)


def test_the_group_split_keeps_each_group_in_one_minibatch_and_balances_tokens():
    keys = ["s:a"] * 4 + ["s:b"] * 4 + ["s:c"] * 4 + ["s:d"] * 4 + ["i:x", "i:y"]
    lengths = [1500] * 16 + [2500, 2600]
    parts = split_update(keys, lengths, 2, "0:1")
    assert sorted(i for part in parts for i in part) == list(range(18))
    for key in set(keys):
        holders = [k for k, part in enumerate(parts) if any(keys[i] == key for i in part)]
        assert len(holders) == 1, f"group {key} spread over mini-batches {holders}"
    loads = [sum(lengths[i] for i in part) for part in parts]
    assert abs(loads[0] - loads[1]) <= 1500, loads  # largest first to the lighter one
    # the sample split puts two attempts of each group in each mini-batch, or near that
    spread = split_update(keys, lengths, 2, "0:1", "sample")
    assert any(len({k for k, part in enumerate(spread) if any(keys[i] == key for i in part)}) > 1
               for key in set(keys))


def test_the_group_split_is_seeded():
    keys = [f"g{i // 4}" for i in range(32)]
    lengths = [1000] * 32
    assert split_update(keys, lengths, 4, "0:1") == split_update(keys, lengths, 4, "0:1")
    assert len({str(split_update(keys, lengths, 4, f"0:{v}")) for v in range(6)}) > 1


def test_fewer_groups_than_steps_splits_samples_as_the_sample_split_does():
    keys = ["only"] * 6
    lengths = [10] * 6
    assert split_update(keys, lengths, 2, "1:2") == _old_split(6, 2, "1:2")
    assert split_update(["a", "a", "b"], [5, 5, 5], 3, "x") == _old_split(3, 3, "x")


def test_no_minibatch_is_empty_and_steps_are_capped_by_samples():
    assert split_update(["a", "b"], [0, 0], 2, "s") in ([[0], [1]], [[1], [0]])
    parts = split_update(["a", "b", "c"], [3, 2, 1], 5, "s")
    assert len(parts) == 3 and all(parts)
    assert split_update(["a"], [7], 1, "s") == [[0]]


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="2 keys and 1 lengths"):
        split_update(["a", "b"], [1], 1, "s")
    with pytest.raises(ValueError, match="unknown mini-batch split 'tokens'"):
        split_update(["a"], [1], 1, "s", "tokens")  # type: ignore[arg-type]
