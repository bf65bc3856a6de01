"""The default warm start: demonstrations on the training repos, then RFT, cached by its inputs and
identified by its content.

Two keys name a build. The config key (a hash of `WarmStartConfig` and `FORMAT`, bumped when the expert
or the recipe changes) names its directory `<selfplay cache>/warm_start/<config key>/`, so a second call
returns at once. The content key (a hash of the SFT samples' token ids and loss masks, in training
order, and the optimizer step count) names the checkpoint inside it, `model-<content key>/`: seeding
depends on timing (a suite that times out under load drops a mutant), so the same config can keep other
demonstrations on another machine, and then its checkpoint has another name. `manifest.json` records both
keys, the kept demonstrations per role, the steps, the operators covered and the code that built it
(`warm_start_info`; `selfplay.code_revision`: the expert changes between commits too).

The config, its sizes and the repo split live in `selfplay.demos.warm_start_config`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from collections import Counter
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_scaffold.embedded import cache_root, default_model_dir
from agent_scaffold.mutation_operators import OPERATORS
from repos.cache import file_lock
from repos.listfile import get_repo
from selfplay.code_revision import code_revision
from selfplay.config.component_presets import sft_preset
from selfplay.demos.collect import make_demos, recovery_demos
from selfplay.demos.warm_start_config import FORMAT, KIT_FORMAT, RECOVERY_FORMAT, WarmStartConfig
from selfplay.learner.rft import collect, sft_samples
from selfplay.learner.sft import batches, train_sft
from selfplay.store import open_store

if TYPE_CHECKING:
    from selfplay.store.protocol import TaskStore

log = logging.getLogger(__name__)


_KEYED_WHEN_SET = {"injector_operators": (), "injector_epochs": None, "batch_size": None, "locate": "any",
                   "localize_ranks": 3, "drills": 0, "localize_recover": 0, "injector_strategy": "direct"}
"""Fields added after FORMAT 11, each with the value that trains as before it existed (not its default):
they enter the key only at another value, so the configs that predate them keep their keys (and their
cached checkpoints)."""


def config_key(config: WarmStartConfig) -> str:
    fields = {k: v for k, v in asdict(config).items()
              if _KEYED_WHEN_SET.get(k, object()) != (tuple(v) if isinstance(v, list) else v)}
    versions = {"format": FORMAT, **({"recovery_format": RECOVERY_FORMAT} if config.localize_recover else {}),
                **({"kit_format": KIT_FORMAT} if config.injector_strategy == "kit" and config.injector_per_repo else {})}
    return hashlib.sha256(json.dumps({**fields, **versions}, sort_keys=True).encode()).hexdigest()[:16]


def cache_dir(config: WarmStartConfig) -> Path:
    return cache_root() / "warm_start" / config_key(config)


def content_key(samples: list[Any], steps: int) -> str:
    """Names what was trained: each sample's role, token ids and loss mask, in order, and the step count."""
    h = hashlib.sha256(f"format={FORMAT};steps={steps}".encode())
    for s in samples:
        h.update(f"|{s.role}:{list(s.input_ids)}:{list(s.loss_mask)}".encode())
    return h.hexdigest()[:16]


@dataclass(frozen=True)
class WarmStartManifest:
    """Exactly which warm start a checkpoint is (`<config dir>/manifest.json`)."""

    config_key: str
    content_key: str
    demonstrations: dict[str, int]
    """Kept demonstrations per role ("solver", "injector") that the SFT trained on."""
    samples: int
    """SFT sequences (a compacted trajectory gives several)."""
    steps: int
    """SFT optimizer steps."""
    operators: dict[str, int]
    """Procedural operator -> kept solver demonstrations of a task it made."""
    repos: tuple[str, ...]
    budgets: dict[str, dict[str, int]]
    """Role -> the most turns, tokens of one action and tokens of one demonstration among the kept ones:
    what the run's `rollout.*_limits` must allow for the policy to act as demonstrated."""
    model_dir: str
    """The checkpoint, `<config dir>/model-<content key>`."""
    code: str = ""
    """The code that built it (`selfplay.code_revision`): a rebuild of the same config at another commit may
    hold other demonstrations. "" in a manifest written before it was recorded."""

    def record(self) -> dict[str, Any]:
        """What a run records of its warm start."""
        return {"config_key": self.config_key, "content_key": self.content_key,
                "demonstrations": dict(self.demonstrations), "steps": self.steps, "model_dir": self.model_dir,
                "code": self.code}


def warm_start_info(config: WarmStartConfig = WarmStartConfig()) -> WarmStartManifest:
    """The manifest of the built warm start of `config`; FileNotFoundError when it was not built."""
    path = cache_dir(config) / "manifest.json"
    if not path.is_file():
        raise FileNotFoundError(f"no warm start built for config key {config_key(config)} ({path} missing); "
                                "build it with `selfplay warm-start`")
    data = json.loads(path.read_text())
    return WarmStartManifest(**{**data, "repos": tuple(data["repos"])})


def warm_start_checkpoint(config: WarmStartConfig = WarmStartConfig(), *, force: bool = False) -> Path:
    """The cached warm-start checkpoint for `config`, built first when missing (or when `force`)."""
    root = cache_dir(config)
    # Concurrent callers (a run loop and a bench) wait for one build instead of racing on its files.
    with file_lock(root.parent / f"{root.name}.lock"):
        if not force:
            try:
                model = Path(warm_start_info(config).model_dir)
            except FileNotFoundError:
                pass
            else:
                if (model / "sft.json").is_file():
                    log.info("warm start: cached checkpoint %s", model)
                    return model
        return _build(config, root)


def sft_config(config: WarmStartConfig) -> Any:
    """The `SFTConfig` a build of `config` trains with: its preset, with the warm start's overrides."""
    return sft_preset(config.preset, model_dir=config.model_dir, seed=config.seed, epochs=config.epochs, lr=config.lr,
                      injector_epochs=config.injector_epochs, batch_size=config.batch_size)


def _demonstrate(config: WarmStartConfig, root: Path) -> tuple[Any, dict[str, int], dict[str, Any]]:
    """Demonstrations on every training repo into `root`/store.db: (RFT data, operator coverage, timings)."""
    from transformers import AutoTokenizer  # lazy: the train extra

    # The demonstrations' token ids are the trained model's: a larger model's warm start (model_dir) renders
    # the same actions with its own tokenizer and chat template, and its budgets count its tokens.
    tokenizer = AutoTokenizer.from_pretrained(config.model_dir or default_model_dir())
    timings: dict[str, Any] = {"load_avg_1m/start": os.getloadavg()[0]}
    # Drills and recovery demonstrations leave the direct demonstrations as they are: a build that differs
    # from a finished one only in those trains on that one's stored demonstrations instead of playing them
    # again (and plays its recoveries on that one's seeded tasks).
    base = cache_dir(replace(config, drills=0, localize_recover=0))
    reuse = (bool(config.drills or config.localize_recover) and (base / "manifest.json").is_file()
             and (base / "store.db").is_file())
    if reuse:
        shutil.copy2(base / "store.db", root / "store.db")
        timings["demos_from"] = base.name
        log.info("warm start: the demonstrations of %s, which differs only in drills and recoveries", base)
    with open_store(str(root / "store.db")) as store:
        for repo in config.repos if not reuse else ():
            t0 = time.monotonic()
            rep = make_demos(get_repo(repo), config.n_per_repo, store, root / "demos" / repo, seed=config.seed,
                             tokenizer=tokenizer,
                             per_task=config.per_task, max_context_tokens=config.max_context_tokens,
                             max_rounds=config.max_rounds, injector=config.injector_per_repo,
                             short_share=config.short_share, injector_operators=config.injector_operators,
                             visible_only=config.locate == "visible", localize=config.locate == "localize",
                             localize_ranks=config.localize_ranks,
                             injector_max_context_tokens=config.injector_max_context_tokens,
                             injector_strategy=config.injector_strategy)
            timings[f"seed/{repo}_s"] = rep.seed_time
            timings[f"seed/{repo}_cached_rounds"] = rep.seed_rounds_cached
            timings[f"demos/{repo}_s"] = time.monotonic() - t0 - rep.seed_time
            timings[f"demos/{repo}_kept"] = len(rep.kept)
            timings[f"demos/{repo}_injector_kept"] = len(rep.injector_kept)
            log.info("warm start: %s: %d solver and %d injector demonstrations kept, %d dropped", repo,
                     len(rep.kept), len(rep.injector_kept), len(rep.dropped))
        for repo in config.repos if config.localize_recover else ():
            rep = recovery_demos(get_repo(repo), config.localize_recover, store, root / "demos" / repo,
                                 seed=config.seed, tokenizer=tokenizer)
            timings[f"recovery/{repo}_s"] = rep.wall_time
            timings[f"recovery/{repo}_kept"] = len(rep.kept)
            log.info("warm start: %s: %d recovery demonstrations kept (%d tasks tried, %d not demonstrable)", repo,
                     len(rep.kept), len(rep.tasks), rep.skipped_hidden)
        data = collect(store, source="demo", max_per_task=config.per_task, injector=config.injector_per_repo > 0)
        operators = _operators(store, data.trajectories)
    missing = sorted({op.name for op in OPERATORS} - set(operators))
    if missing:
        log.warning("warm start: no kept demonstration covers the operators %s", ", ".join(missing))
    return data, operators, timings


def _drills(config: WarmStartConfig) -> list[Any]:
    """`config.drills` repair drills, spread over the training repos, tokenized like the demonstrations."""
    from transformers import AutoTokenizer  # lazy: the train extra

    from selfplay.demos.drills import repo_drills

    tokenizer = AutoTokenizer.from_pretrained(config.model_dir or default_model_dir())
    share, extra = divmod(config.drills, len(config.repos))
    out: list[Any] = []
    for i, repo in enumerate(config.repos):
        out += repo_drills(get_repo(repo), share + (i < extra), config.seed, tokenizer, config.heldout_repos)
    log.info("warm start: %d repair drills", len(out))
    return out


def training_content(config: WarmStartConfig, root: Path) -> tuple[Any, dict[str, int], dict[str, Any], list[Any], int]:
    """What a build of `config` trains on, its demonstrations collected into `root`: (RFT data, operator
    coverage, timings, SFT samples, optimizer steps); `content_key(samples, steps)` names it."""
    data, operators, timings = _demonstrate(config, root)
    leaked = sorted({t.metadata.get("repo") for t in data.trajectories} - set(config.repos))
    if leaked:  # the store is this build's own, so this is a bug in collection, not a user error
        raise RuntimeError(f"warm start: demonstrations from repos outside warm_start.config.repos: {leaked}")
    samples = sft_samples(data.trajectories, turns=config.loss_turns)
    if config.drills:
        samples += _drills(config)
        timings["drills"] = config.drills
    return data, operators, timings, samples, len(batches(samples, sft_config(config)))


def _build(config: WarmStartConfig, root: Path) -> Path:
    if (root / "store.db").exists():  # an interrupted build or a rebuild: its demonstrations would be stored twice
        (root / "store.db").unlink()
        shutil.rmtree(root / "demos", ignore_errors=True)
    start = time.monotonic()
    root.mkdir(parents=True, exist_ok=True)
    data, operators, timings, samples, steps = training_content(config, root)
    sft = sft_config(config)
    content = content_key(samples, steps)
    model = root / f"model-{content}"
    tmp = root / "model.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    t0 = time.monotonic()
    roles = Counter(t.role for t in data.trajectories)
    manifest = WarmStartManifest(config_key(config), content, {"solver": roles["solver"],
                                                               "injector": roles["injector"]},
                                 len(samples), steps, operators, tuple(config.repos), _budgets(data.trajectories),
                                 str(model), code_revision())
    train_sft(samples, tmp, sft, metadata={"warm_start": asdict(config), **asdict(manifest), **data.stats,
                                           **timings})
    timings["sft_s"] = time.monotonic() - t0
    timings["load_avg_1m/end"] = os.getloadavg()[0]
    for old in root.glob("model-*"):  # an earlier build of this config, with other content
        shutil.rmtree(old)
    tmp.rename(model)
    total = time.monotonic() - start
    plans = dict(Counter(t.metadata.get("plan", "full") for t in data.trajectories if t.role == "solver"))
    (root / "timings.json").write_text(json.dumps({**timings, "total_s": total, "operators": operators,
                                                   "solver_plans": plans, "content_key": content}, indent=1) + "\n")
    (root / "manifest.json").write_text(json.dumps(asdict(manifest), indent=1) + "\n")
    log.info("warm start: built %s (%s) in %.0f s", model, manifest.demonstrations, total)
    return model


def _budgets(trajectories: tuple[Any, ...]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for t in trajectories:
        seen = out.setdefault(t.role, {"turns": 0, "action_tokens": 0, "tokens": 0})
        seen["turns"] = max(seen["turns"], len(t.turn_spans))
        seen["action_tokens"] = max([seen["action_tokens"]] + [e - s for s, e in t.turn_spans])
        seen["tokens"] = max(seen["tokens"], len(t.input_ids))
    return out


def _operators(store: TaskStore, trajectories: tuple[Any, ...]) -> dict[str, int]:
    """Procedural operator -> kept solver demonstrations on its tasks (the task's stored strategy)."""
    ids = [t.metadata["task_id"] for t in trajectories if t.role == "solver"]
    by_id = {t.task_id: t.metadata.get("strategy") or "unknown" for t in store.get_tasks(sorted(set(ids)))}
    return dict(sorted(Counter(by_id.get(i, "unknown") for i in ids).items()))
