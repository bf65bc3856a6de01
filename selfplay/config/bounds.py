"""`check_bounds`: the numeric fields of a config dataclass within their ranges.

A count or rate out of range rarely fails where it is read: a negative task count slices a list from its
end, a negative SFT learning rate climbs the loss, a `checkpoint_every` of 0 divides by zero an hour into
a run. Each config refuses them when it is built, so the loader names the key and the override.
"""

from __future__ import annotations

from collections.abc import Mapping


def check_bounds(config: object, at_least: Mapping[str, float] | None = None,
                 above: Mapping[str, float] | None = None) -> None:
    """Raise ValueError naming every field of `config` out of range: `at_least` maps a field to the least
    value it may hold, `above` to a value it must exceed. None (an optional setting left unset) passes;
    NaN does not."""
    problems = [f"{name} must be >= {bound}, got {value}" for name, bound in (at_least or {}).items()
                if (value := getattr(config, name)) is not None and not value >= bound]
    problems += [f"{name} must be > {bound}, got {value}" for name, bound in (above or {}).items()
                 if (value := getattr(config, name)) is not None and not value > bound]
    if problems:
        raise ValueError("; ".join(problems))
