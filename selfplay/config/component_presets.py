"""Named settings of one component's config: SFT presets (`SFTConfig`, picked by `selfplay rft --preset`
and `warm_start.config.preset`) and warm-start sizes (`WarmStartConfig`, `selfplay warm-start --size`).

Each is a YAML file in presets/<component>/<name>.yaml beside the run presets, holding only the fields that
differ from the dataclass's defaults, and is read through the run loader's checks (`build_section`): an
unknown key or a value of the wrong type is refused with the key named, as in a run config.
"""

from __future__ import annotations

import difflib
from dataclasses import replace
from importlib import resources
from typing import Any

from selfplay.config.loader import ConfigError, build_section, parse_yaml
from selfplay.demos.warm_start_config import WarmStartConfig
from selfplay.learner.sft import SFTConfig

COMPONENTS: dict[str, type] = {"sft": SFTConfig, "warm_start": WarmStartConfig}
"""Component name (its folder under presets/) -> the config dataclass its presets hold."""


def _folder(component: str) -> Any:
    return resources.files("selfplay.config").joinpath("presets", component)


def preset_names(component: str) -> tuple[str, ...]:
    """The presets shipped for `component`, sorted."""
    return tuple(sorted(p.name.removesuffix(".yaml") for p in _folder(component).iterdir()
                        if p.name.endswith(".yaml")))


def component_preset(component: str, name: str, **overrides: Any) -> Any:
    """The `component` preset `name` with the non-None `overrides` applied (ConfigError, a ValueError,
    naming the preset and what is allowed otherwise)."""
    if component not in COMPONENTS:
        raise ValueError(f"unknown component {component!r}; presets exist for {', '.join(COMPONENTS)}")
    names = preset_names(component)
    if name not in names:
        close = difflib.get_close_matches(name, names, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(f"unknown {component} preset {name!r}{hint}; choose one of {', '.join(names)}")
    where = f"{component} preset {name!r}"
    text = _folder(component).joinpath(f"{name}.yaml").read_text()
    config = build_section(COMPONENTS[component], parse_yaml(text, where, where) or {}, component)
    try:
        return replace(config, **{k: v for k, v in overrides.items() if v is not None})
    except (TypeError, ValueError) as exc:  # an override that is not a field, or fails the config's checks
        raise ConfigError(f"{where}: {exc}") from None


def sft_preset(name: str, **overrides: Any) -> SFTConfig:
    """The SFT preset `name` (presets/sft/: cpu or nebius) with the non-None `overrides` applied."""
    return component_preset("sft", name, **overrides)


def warm_start_size(size: str, **overrides: Any) -> WarmStartConfig:
    """The warm-start size `size` (presets/warm_start/: default, medium, visible or full) with the non-None
    `overrides` applied."""
    return component_preset("warm_start", size, **overrides)
