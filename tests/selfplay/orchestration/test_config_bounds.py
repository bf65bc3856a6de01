"""Every numeric setting of the run config refuses a value out of its range when the config loads, naming
the key and the override (`selfplay.config.bounds`), instead of misbehaving where it is read."""

from __future__ import annotations

import dataclasses
import math

import pytest

from selfplay.config.bounds import check_bounds
from selfplay.config.loader import ConfigError, load_config

SIGNED = {"seed", "learner.engine.seed", "warm_start.config.seed", "learner.batch.overlong.negative_reward"}
"""Numeric keys where a negative value is meaningful: seeds, and a reward."""


def numeric_keys(config: object, prefix: str = "") -> list[str]:
    keys = []
    for f in dataclasses.fields(config):
        value, key = getattr(config, f.name), prefix + f.name
        if dataclasses.is_dataclass(value):
            keys += numeric_keys(value, key + ".")
        elif isinstance(value, (int, float)) and not isinstance(value, bool) or \
                value is None and any(t in str(f.type) for t in ("int", "float")):
            keys.append(key)
    return keys


def test_every_count_and_rate_refuses_minus_one_by_name():
    keys = numeric_keys(load_config("default"))
    assert len(keys) > 60 and SIGNED <= set(keys)  # the walk reaches the nested sections
    accepted = []
    for key in sorted(set(keys) - SIGNED):
        try:
            load_config("default", [f"{key}=-1"])
        except ConfigError as e:
            assert key.rsplit(".", 1)[-1] in str(e) and f"override '{key}=-1'" in str(e), str(e)
        else:
            accepted.append(key)
    assert not accepted, f"these keys take -1: {accepted}; give each a bound (selfplay.config.bounds)"


@pytest.mark.parametrize("override, expected", [
    ("rollout.solver_tasks=-2", "solver_tasks must be >= 0, got -2"),
    ("learner.checkpoint_every=0", "checkpoint_every must be >= 1, got 0"),
    ("curriculum.higher_order.min_failing_tests=0", "min_failing_tests must be >= 1, got 0"),
    ("learner.engine.loss.clip_ratio_c=1.0", "clip_ratio_c must be > 1, got 1.0"),
    ("learner.engine.loss.tis_cap=0", "tis_cap must be > 0, got 0"),
    ("warm_start.config.lr=-0.0002", "lr must be >= 0, got -0.0002"),
    ("warm_start.config.epochs=0", "epochs must be >= 1, got 0"),
    ("eval.runs=0", "runs must be >= 1, got 0"),
])
def test_a_value_out_of_range_names_its_bound(override, expected):
    with pytest.raises(ConfigError) as info:
        load_config("default", [override])
    assert expected in str(info.value) and f"override '{override}'" in str(info.value)


def test_edges_and_unset_values_pass():
    c = load_config("default", ["rollout.solver_tasks=0", "learner.engine.loss.tis_cap=null",
                                "learner.engine.loss.clip_ratio_c=3.0", "retention.retire_every=0"])
    assert c.rollout.solver_tasks == 0 and c.learner.engine.loss.tis_cap is None


def test_check_bounds_refuses_nan_and_lists_every_problem():
    @dataclasses.dataclass(frozen=True)
    class Knobs:
        count: int = 0
        rate: float = 0.5
        cap: float | None = None

    check_bounds(Knobs(), at_least={"count": 0, "cap": 1}, above={"rate": 0})  # None passes
    with pytest.raises(ValueError, match=r"rate must be > 0, got nan"):
        check_bounds(Knobs(rate=math.nan), above={"rate": 0})
    with pytest.raises(ValueError, match=r"count must be >= 0, got -1; cap must be >= 1, got 0.5"):
        check_bounds(Knobs(count=-1, cap=0.5), at_least={"count": 0, "cap": 1})
