"""`check_references`: every name and path a `RunConfig` refers to exists, checked before anything starts.

The loader (loader.py) checks keys and types; a config can still name a repo that is not in the
repo list, a repo list or model folder that does not exist, a store URL whose scheme or driver we do not
have, an SFT preset that is not one, or a runs_dir nobody can write. Found only once the run is under way,
each of these would leave a run directory behind (and load a model) before failing, with advice to resume
that cannot work. So `selfplay run` (and `--print-config`) call this first; nothing is created here.
"""

from __future__ import annotations

import importlib.util
import json
import os
import tempfile
from pathlib import Path

from repos.errors import RepoError
from repos.listfile import load_repo_list
from selfplay.config.component_presets import preset_names
from selfplay.config.loader import ConfigError
from selfplay.config.run_config import RunConfig
from selfplay.store.errors import StoreError


def check_references(config: RunConfig) -> None:
    """Raise ConfigError naming the first key whose reference does not resolve, and what is allowed."""
    _check_repos(config)
    _check_store(config.store_url)
    check_model_dir("policy.model_dir", config.policy.model_dir, config.policy.backend)
    check_model_dir("warm_start.config.model_dir", config.warm_start.config.model_dir, "hf")
    if config.learner.engine.model_dir:  # a run's learner trains the policy's model, whatever this says
        raise ConfigError(f"learner.engine.model_dir: a run trains the policy's model, so "
                          f"{config.learner.engine.model_dir} would be ignored; set policy.model_dir instead "
                          "(and leave this null)", "learner.engine.model_dir")
    _check_sft_preset(config.warm_start.config.preset)
    for key, path, used in (
            ("policy.scripted_actions", config.policy.scripted_actions, config.policy.backend == "scripted"),
            ("curriculum.demonstrated_store", config.curriculum.demonstrated_store,
             config.curriculum.demonstrated_tasks)):
        if used and path and not Path(path).expanduser().is_file():
            raise ConfigError(f"{key}: file {path} does not exist", key)
    _check_writable_dir("runs_dir", config.runs_dir)
    if config.eval.dataset and config.eval.dataset.lower().endswith((".json", ".jsonl", ".parquet")) \
            and not Path(config.eval.dataset).expanduser().is_file():
        raise ConfigError(f"eval.dataset: file {config.eval.dataset} does not exist; name a SWE-bench .jsonl "
                          "file (e.g. from `selfplay tasks export`) or null for SWE-bench Verified", "eval.dataset")


def _check_repos(config: RunConfig) -> None:
    try:
        specs = load_repo_list(config.repo_list)
    except RepoError as exc:
        raise ConfigError(f"repo_list: {exc}", "repo_list") from None
    names = [s.name for s in specs]
    where = config.repo_list or "the bundled repos/default.toml"
    for key, wanted in (("repos", config.repos), ("warm_start.config.repos", config.warm_start.config.repos)):
        unknown = [r for r in wanted if r not in names]
        if unknown:
            raise ConfigError(f"{key}: {', '.join(repr(r) for r in unknown)} not in {where}; valid names: "
                              f"{', '.join(names)} (`selfplay repos list`)", key)


def _check_store(url: str | None) -> None:
    if not url:
        return
    from selfplay.store.engine import resolve_url  # lazy: SQLAlchemy, only when a store URL is set

    try:
        resolved = resolve_url(url, create=False)
    except StoreError as exc:
        raise ConfigError(f"store_url: {exc}", "store_url") from None
    if resolved.startswith("postgresql") and importlib.util.find_spec("psycopg") is None:
        raise ConfigError("store_url: PostgreSQL stores need the psycopg 3 driver, which is not installed: "
                          "pip install 'selfplay-swe[postgres]'", "store_url")


def check_model_dir(key: str, value: str | None, backend: str, *, default: str = "null", hub: bool = True) -> None:
    """A local checkpoint folder transformers cannot build a model from is refused (ConfigError naming `key`
    and what is wrong). With `hub`, a name with one slash and no such path is a Hub name, left to the loader;
    without it every value is a folder. `default`: how the user asks for the default model."""
    if not value or backend not in ("hf", "vllm"):
        return  # openai's model is a served name, scripted has none
    problem = None if hub and hub_id(value) else checkpoint_problem(value)
    if problem:
        raise ConfigError(f"{key}: {problem}; name a checkpoint folder (config.json, weights and tokenizer), "
                          f"or {default} for the default", key)


def hub_id(value: str) -> bool:
    """Whether `value` reads as a Hub repo id (org/name) rather than a local path: one slash, no leading
    `.`, `/` or `~`, and nothing at that path."""
    return (value.count("/") == 1 and not value.startswith((".", "/", "~"))
            and not Path(value).expanduser().exists())


def checkpoint_problem(value: str) -> str | None:
    """What keeps folder `value` from being a checkpoint transformers can build a model from, or None.
    Checked before a model loads because transformers takes a missing folder for a Hub repo id and blames its
    spelling, and a folder without a usable config.json fails only after minutes of other work."""
    path = Path(value).expanduser()
    if not path.is_dir():
        return f"{value} {'is not a folder' if path.exists() else 'does not exist'}"
    config = path / "config.json"
    if not config.is_file():
        inside = sorted(c.parent for c in (*path.glob("*/config.json"), *path.glob("checkpoints/*/config.json")))
        # a run directory or its checkpoints/ folder: the checkpoints (v000001, ...) sort by version
        return f"{value} has no config.json" + (f"; it holds checkpoints, the newest {inside[-1]}" if inside else "")
    try:
        data = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return f"{config} is not valid JSON ({exc}); restore it from the checkpoint it came from"
    if not isinstance(data, dict) or "model_type" not in data:
        return f"{config} names no model_type, so transformers cannot build the model"
    return None


def _check_sft_preset(name: str) -> None:
    names = preset_names("sft")
    if name not in names:
        raise ConfigError(f"warm_start.config.preset: unknown SFT preset {name!r}; use one of "
                          f"{', '.join(names)}", "warm_start.config.preset")


def _check_writable_dir(key: str, value: str) -> None:
    """The nearest existing ancestor of `value` must be a writable folder (a run makes the rest)."""
    path = Path(value).expanduser().absolute()
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    problem = None if probe.is_dir() else "is not a folder"
    if problem is None:
        try:  # os.access says yes to root everywhere, /proc included: try it (the probe is removed at once)
            os.rmdir(tempfile.mkdtemp(prefix=".selfplay-probe-", dir=probe))
        except OSError as exc:
            problem = f"cannot be written: {exc.strerror or exc}"
    if problem:
        raise ConfigError(f"{key}: cannot create {path} ({probe} {problem}); set {key}=DIR to a folder you can "
                          "write", key)
