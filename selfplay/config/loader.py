"""Loading a `RunConfig`: a YAML preset or file, then dotted `key=value` overrides, checked against the
dataclass annotations before anything starts (docs/config.md).

A small loader of our own rather than OmegaConf: the tree nests the components' own frozen dataclasses,
and OmegaConf 2.4 cannot even build it (`TamperConfig`'s `init=False` field holds compiled regexes);
it also turns the string '5' into an int where we allow int -> float only. Values are read as YAML 1.2
core scalars (yaml_io.py), the rules `dump_config` writes with, so a dumped config loads back equal.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import types
import typing
from collections.abc import Mapping, Sequence
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from selfplay.config.run_config import RunConfig
from selfplay.config.yaml_io import read_yaml, write_yaml
from selfplay.errors import SelfPlayError

PRESETS = ("default", "smoke", "gpu-1node", "multi-node")
"""Run presets shipped in selfplay/config/presets/: a whole `RunConfig` each. Named settings of one
component's config (SFT presets, warm-start sizes) are YAML files in presets/<component>/, read through
the same checks (`selfplay.config.component_presets`)."""
PLACEHOLDER = "CHANGE_ME"
"""A preset value containing this must be overridden (multi-node's store_url)."""
_KEY = re.compile(r"^[A-Za-z_][\w-]*(\.[\w-]+)*$")


class ConfigError(SelfPlayError, ValueError):
    """A config file or override is wrong; the message names the dotted key, the value and what is allowed."""

    def __init__(self, message: str, key: str = "") -> None:
        super().__init__(message)
        self.key = key


def parse_yaml(text: str, where: str, name: str = "<string>") -> Any:
    try:
        return read_yaml(text, name)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{where} is not valid YAML: {exc}") from None


# -- reading the source ----------------------------------------------------------------------------

def _read_source(config: str | Path | None) -> tuple[dict[str, Any], str]:
    """The raw mapping of a preset or YAML file, and how to name it in errors."""
    name = str(config) if config is not None else "default"
    looks_like_file = isinstance(config, Path) or name.endswith((".yaml", ".yml")) or "/" in name
    if not looks_like_file:
        if name not in PRESETS:
            close = difflib.get_close_matches(name, PRESETS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"--config {name!r} is neither a preset nor a YAML file{hint}; presets: "
                              f"{', '.join(PRESETS)}, or pass a path ending in .yaml")
        text, where = resources.files("selfplay.config").joinpath("presets", f"{name}.yaml").read_text(), \
            f"preset {name!r}"
    else:
        path = Path(name)
        if not path.is_file():
            raise ConfigError(f"config file {path} does not exist (presets: {', '.join(PRESETS)})")
        where = f"config file {path}"
        try:
            text = path.read_bytes().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{where} is not UTF-8 text (byte {exc.start}); save it as UTF-8 YAML") from None
        except OSError as exc:
            raise ConfigError(f"{where} cannot be read ({exc.strerror or exc})") from None
    data = parse_yaml(text, where, where)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{where} must hold a mapping of RunConfig sections, got {type(data).__name__}")
    return data, where


def parse_override(override: str) -> tuple[str, Any]:
    """`a.b.c=value` -> ("a.b.c", value read as YAML); ConfigError names the malformed override."""
    key, sep, text = override.partition("=")
    key = key.strip()
    if key.startswith("-"):  # `--repos toolz`, as other CLIs take settings; ours are overrides
        name = key.lstrip("-").replace("-", "_")
        if name == "set":  # the scripts' spelling (`bench_learning.py --set KEY=VALUE`)
            hint = "leave `--set` out and pass each override as an argument of its own, learner.engine.lr=3e-6"
        else:
            hint = f"write it as {name}=VALUE" if _KEY.match(name) else "config keys are set as KEY=VALUE"
        raise ConfigError(f"{key!r} is not an option of this command; settings are dotted KEY=VALUE overrides "
                          f"without dashes: {hint}, e.g. 'repos=[toolz, parse]' seed=3 "
                          "(`--print-config` shows every key)", name)
    if not sep or not _KEY.match(key):
        raise ConfigError(f"override {override!r} is not KEY=VALUE with a dotted key, e.g. "
                          "learner.engine.lr=3e-6 or 'repos=[toolz, parse]'", key)
    return key, parse_yaml(text, f"the value of override {key}")


def _apply(data: dict[str, Any], key: str, value: Any) -> None:
    node = data
    parts = key.split(".")
    for i, part in enumerate(parts[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        elif not isinstance(child, dict):
            prefix = ".".join(parts[: i + 1])
            raise ConfigError(f"{key}: {prefix} is a value ({child!r}), not a section with keys", key)
        node = child
    node[parts[-1]] = value


# -- type checking ----------------------------------------------------------------------------------

@cache
def type_hints(cls: type) -> dict[str, Any]:
    """The resolved annotations of a dataclass (cached: the tree is walked for every key)."""
    return typing.get_type_hints(cls)


def init_fields(cls: type) -> list[dataclasses.Field]:
    """The fields a config file may set (init=False fields are derived, never configured)."""
    return [f for f in dataclasses.fields(cls) if f.init]


@cache
def valid_keys(cls: type = RunConfig, prefix: str = "") -> tuple[str, ...]:
    """Every dotted key of the tree below `cls` (sections and leaves)."""
    out: list[str] = []
    for f in init_fields(cls):
        key = f"{prefix}{f.name}"
        out.append(key)
        tp = type_hints(cls)[f.name]
        if dataclasses.is_dataclass(tp):
            out.extend(valid_keys(tp, key + "."))
    return tuple(out)


def _closest(key: str) -> str | None:
    keys = valid_keys()
    leaf = key.rsplit(".", 1)[-1]
    same_leaf = [k for k in keys if k.rsplit(".", 1)[-1] == leaf]
    if len(same_leaf) >= 1:
        return difflib.get_close_matches(key, same_leaf, n=1, cutoff=0.0)[0]
    close = difflib.get_close_matches(key, keys, n=1, cutoff=0.6)
    return close[0] if close else None


def describe(tp: Any) -> str:
    """A type annotation the way an error message shows it."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " or ".join("null" if a is type(None) else describe(a) for a in args)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return f"a list of {describe(args[0])}"
        return f"a list of exactly {len(args)} ({', '.join(describe(a) for a in args)})"
    if origin in (dict, Mapping):
        return f"a mapping of {describe(args[0])} to {describe(args[1])}" if args else "a mapping"
    if dataclasses.is_dataclass(tp):
        return f"a section ({tp.__name__})"
    if tp is Any:
        return "any value"
    return getattr(tp, "__name__", str(tp))


class _Mismatch(Exception):
    """Internal: the value does not fit the annotation."""


def _coerce(value: Any, tp: Any, key: str) -> Any:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return value
    if dataclasses.is_dataclass(tp):
        if dataclasses.is_dataclass(value) and isinstance(value, tp):
            return value
        return build_section(tp, value, key)
    if origin is typing.Literal:
        if any(type(value) is type(a) and value == a for a in args):
            return value
        raise _Mismatch
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        arms = [a for a in args if a is not type(None)]
        for arm in arms:
            try:
                return _coerce(value, arm, key)
            except _Mismatch:
                continue
        raise _Mismatch
    if tp is type(None):
        if value is None:
            return None
        raise _Mismatch
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise _Mismatch
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise _Mismatch
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise _Mismatch
    if tp is str:
        if isinstance(value, str):
            return value
        raise _Mismatch
    if origin in (tuple, list):
        if not isinstance(value, (list, tuple)):
            raise _Mismatch
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            if len(value) != len(args):
                raise _Mismatch
            items = [_checked(v, a, f"{key}[{i}]") for i, (v, a) in enumerate(zip(value, args, strict=True))]
        else:
            items = [_checked(v, args[0], f"{key}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin in (dict, Mapping):
        if not isinstance(value, dict):
            raise _Mismatch
        kt, vt = args or (Any, Any)
        return {_checked(k, kt, f"{key} (a key)"): _checked(v, vt, f"{key}.{k}") for k, v in value.items()}
    raise ConfigError(f"{key}: the annotation {tp!r} is not supported by the config loader", key)


def _checked(value: Any, tp: Any, key: str) -> Any:
    try:
        return _coerce(value, tp, key)
    except _Mismatch:
        shown = f"{value!r} ({type(value).__name__})"
        hint = ""
        wants_list = typing.get_origin(tp) in (tuple, list)
        if wants_list and not isinstance(value, (list, tuple)):
            hint = f"; write a list: {key}=[{value}]"
        elif (tp is str or str in typing.get_args(tp)) and not isinstance(value, (str, dict, list)):
            hint = f"; quote it to keep it a string: {key}='{value}'"
        raise ConfigError(f"{key}: expected {describe(tp)}, got {shown}{hint}", key) from None


def build_section(cls: type, data: Any, prefix: str) -> Any:
    """A checked `cls` from the mapping `data`: unknown keys, wrong types and failed checks raise ConfigError
    naming the dotted key under `prefix`."""
    section = prefix or "the config"
    if not isinstance(data, dict):
        raise ConfigError(f"{section}: expected a mapping of {cls.__name__} fields "
                          f"({', '.join(f.name for f in init_fields(cls))}), got {data!r}", prefix)
    names = {f.name for f in init_fields(cls)}
    for name in data:
        if name not in names:
            key = f"{prefix}.{name}" if prefix else str(name)
            closest = _closest(key)
            hint = f"; did you mean {closest}?" if closest else ""
            raise ConfigError(f"{key}: unknown key (valid keys of {section}: {', '.join(sorted(names))}){hint}", key)
    required = [f.name for f in init_fields(cls) if f.name not in data
                and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    if required:
        raise ConfigError(f"{section}: missing required key(s) {', '.join(required)} of {cls.__name__}", prefix)
    hints = type_hints(cls)
    kwargs = {name: _checked(value, hints[name], f"{prefix}.{name}" if prefix else name)
              for name, value in data.items()}
    try:
        return cls(**kwargs)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{section}: {exc}", prefix) from None


# -- public API -------------------------------------------------------------------------------------

def to_data(config: Any) -> Any:
    """A config as plain YAML data (tuples as lists; init=False fields left out)."""
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        return {f.name: to_data(getattr(config, f.name)) for f in init_fields(type(config))}
    if isinstance(config, (list, tuple)):
        return [to_data(v) for v in config]
    if isinstance(config, dict):
        return {k: to_data(v) for k, v in config.items()}
    return config


def _placeholders(data: Any, prefix: str = "") -> list[str]:
    if isinstance(data, dict):
        return [k for name, v in data.items() for k in _placeholders(v, f"{prefix}.{name}" if prefix else name)]
    if isinstance(data, list):
        return [k for i, v in enumerate(data) for k in _placeholders(v, f"{prefix}[{i}]")]
    return [prefix] if isinstance(data, str) and PLACEHOLDER in data else []


_EXAMPLES = {"store_url": "postgresql+psycopg://USER:PASS@HOST:5432/selfplay"}


def _blame(key: str, origin: Mapping[str, str], where: str) -> str:
    """Which overrides (or else the file) a failing key or section comes from."""
    hits = [o for k, o in origin.items()
            if key in ("", k) or k.startswith(key + ".") or key.startswith((k + ".", k + "["))]
    if not hits:
        return where
    shown = ", ".join(repr(h) for h in hits)
    return f"{where} with override {shown}" if key == "" else f"override {shown}"


def build_config(data: Mapping[str, Any]) -> RunConfig:
    """A checked `RunConfig` from plain nested data (missing keys keep their defaults)."""
    return build_section(RunConfig, dict(data), "")


def load_config(config: str | Path | None = None, overrides: Sequence[str] = ()) -> RunConfig:
    """The run config of a preset name (default, smoke, gpu-1node, multi-node) or YAML file (None is
    `default`), with dotted `key=value` overrides applied in order. Raises ConfigError before anything
    starts: unknown keys (with the closest valid key), values of the wrong type (with what is allowed),
    failed cross-field checks (naming the section) and unreplaced CHANGE_ME placeholders."""
    data, where = _read_source(config)
    origin: dict[str, str] = {}
    for override in overrides:
        key, value = parse_override(override)
        _apply(data, key, value)
        origin[key] = override
    try:
        built = build_config(data)
    except ConfigError as exc:
        raise ConfigError(f"{exc} [{_blame(exc.key, origin, where)}]", exc.key) from None
    unset = _placeholders(to_data(built))
    if unset:
        example = _EXAMPLES.get(unset[0], "...")
        raise ConfigError(f"{unset[0]}: still the {PLACEHOLDER} placeholder of {where}; override it on the "
                          f"command line, e.g. {unset[0]}={example} (see docs/config.md)", unset[0])
    return built


def dump_config(config: RunConfig) -> str:
    """The whole resolved tree as YAML; `load_config(file)` of it gives back an equal config."""
    return write_yaml(to_data(config))


RESUME_SAFE_KEYS = ("iterations", "max_hours", "rollout.workers", "rollout.episode_retries", "eval.every",
                    "retention.", "metrics.")
"""Keys `--resume` may change (a trailing dot: the whole section). Everything else fixes what the run's
stored tasks, trajectories and checkpoints mean, so changing it needs a new run."""


def load_resume_config(run_dir: str | Path, overrides: Sequence[str] = ()) -> RunConfig:
    """The saved config of `run_dir` (runs/<run_id>/config.yaml) with safe overrides only (RESUME_SAFE_KEYS)."""
    path = Path(run_dir) / "config.yaml"
    if not path.is_file():
        raise ConfigError(f"--resume {run_dir}: not a run directory (no config.yaml); pass the directory "
                          "`selfplay run` printed, runs/<run_id>")
    for override in overrides:
        key, _ = parse_override(override)
        if not any(key == safe or (safe.endswith(".") and key.startswith(safe)) for safe in RESUME_SAFE_KEYS):
            raise ConfigError(f"{key}: cannot change when resuming (it would change what the stored tasks, "
                              f"trajectories and checkpoints mean); on --resume only {', '.join(RESUME_SAFE_KEYS)} "
                              "may be overridden. Start a new run for other changes.", key)
    return load_config(path, overrides)
