"""The default warm start: demonstrations on the training repos, then RFT, cached by its inputs and
identified by its content.

Two keys name a build. The config key (a hash of `WarmStartConfig` and `FORMAT`, bumped when the expert
or the recipe changes) names its directory `<selfplay cache>/warm_start/<config key>/`, so a second call
returns at once. The content key (a hash of the SFT samples' token ids and loss masks, in training
order, and the optimizer step count) names the checkpoint inside it, `model-<content key>/`: seeding
depends on timing (a suite that times out under load drops a mutant), so the same config can keep other
demonstrations on another machine, and then its checkpoint has another name. `manifest.json` records both
keys, the kept demonstrations per role, the steps and the operators covered (`warm_start_info`).

The repo split is fixed here and in docs: demonstrations come from `TRAIN_REPOS`; `HELDOUT_REPOS`
contribute none (refused by `WarmStartConfig`) and are what `scripts/bench_learning.py` measures on.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from agent_scaffold.embedded import cache_root
from repos.cache import file_lock
from repos.listfile import get_repo
from selfplay.learner.rft import LOSS_TURNS, collect, sft_samples
from selfplay.learner.sft import batches, preset, train_sft
from selfplay.store import open_store

if TYPE_CHECKING:
    from selfplay.store.protocol import TaskStore

log = logging.getLogger(__name__)

TRAIN_REPOS = ("toolz", "boltons", "marshmallow")
"""Repos whose procedural tasks the warm start demonstrates. Chosen for fast per-file suites (seeding runs
the related test file about five times per mutant) and short specs: more-itertools was dropped (its
test_more.py alone made seeding take over 20 minutes under load), and so was cachetools (about 1 in 6 of
its valid mutants has a spec that fits the 2,048-token demonstration, so seeding 6 took over 10 minutes)."""
HELDOUT_REPOS = ("parse", "inflection", "humanize")
"""Repos kept out of the warm start, for measuring generalisation (tabulate cannot be seeded: no code file
has a same-named test file)."""
HELDOUT_SEED_OFFSET = 500
"""The held-out bench seeds its rounds `1000 * seed + HELDOUT_SEED_OFFSET + round`; the warm start's are
`1000 * seed + round` with round < `max_rounds` <= this, so the two never draw the same mutants."""
FORMAT = 5
"""Version of the expert and the recipe; part of the config key. 5: the content key, injector
demonstrations, operator coverage."""


@dataclass(frozen=True)
class WarmStartConfig:
    """What the warm start demonstrates and how it trains (the config key hashes all of it)."""

    repos: tuple[str, ...] = TRAIN_REPOS
    """Training repos; none of `heldout_repos` may be among them."""
    n_per_repo: int = 6
    """Procedural tasks demonstrated per repo."""
    per_task: int = 1
    """Solver demonstrations per task (each with other seeded choices of the expert)."""
    short_share: float = 0.5
    """Share of solver demonstrations that follow the 4-turn plan (grep, view, str_replace, submit; no test
    run) instead of the full one (reproduce, locate, view, repair, re-run, restore, submit: 6-9 turns): the
    default run allows its solver 4 turns of 96 tokens, where the full plan runs out of turns."""
    injector_per_repo: int = 2
    """Injector demonstrations (`direct` strategy) per repo, kept when their artifact validates; 0 is none."""
    seed: int = 0
    """Seeds bugs, the expert's choices and training."""
    max_rounds: int = 3
    """Seeding rounds per repo (each a new SeedConfig seed) before giving up on reaching `n_per_repo`."""
    preset: str = "cpu"
    """SFT preset (selfplay.learner.sft.PRESETS)."""
    epochs: int | None = None
    """Passes over the demonstrations; None is the preset's."""
    lr: float | None = None
    """Peak SFT learning rate; None is the preset's."""
    loss_turns: Literal["valid", "edit"] = "valid"
    """Which assistant turns carry loss: every valid action ("valid"), or only the `edit` actions (view,
    str_replace: the repair the expert's opening and closing turns drown out)."""
    max_context_tokens: int = 2048
    """Token budget of one solver demonstration."""
    injector_max_context_tokens: int = 2048
    """Token budget of one injector demonstration (the run's `rollout.injector_limits` must allow as much)."""
    model_dir: str | None = None
    """Base model; None is the embedded SmolLM2-135M-Instruct."""
    heldout_repos: tuple[str, ...] = field(default=HELDOUT_REPOS)
    """Repos that must feed no demonstration (the held-out bench's); `repos` may not name one."""

    def __post_init__(self) -> None:
        leaked = sorted(set(self.repos) & set(self.heldout_repos))
        if leaked:
            raise ValueError(f"warm_start.config.repos: {', '.join(leaked)} {'is' if len(leaked) == 1 else 'are'} held out (warm_start.config."
                             f"heldout_repos = {list(self.heldout_repos)}); held-out repos feed no "
                             "demonstration: drop them from repos")
        if not self.repos:
            raise ValueError("warm_start.config.repos: name at least one training repo")
        if not 0.0 <= self.short_share <= 1.0:
            raise ValueError(f"warm_start.config.short_share must be in [0, 1], got {self.short_share}")
        if self.n_per_repo < 1 or self.per_task < 1 or self.injector_per_repo < 0:
            raise ValueError("warm_start.config: n_per_repo and per_task must be >= 1, injector_per_repo >= 0")
        if not 1 <= self.max_rounds <= HELDOUT_SEED_OFFSET:
            raise ValueError(f"warm_start.config.max_rounds must be in 1..{HELDOUT_SEED_OFFSET} (above, its "
                             f"seeds would reach the held-out bench's), got {self.max_rounds}")

        if self.loss_turns not in LOSS_TURNS:
            raise ValueError(f"warm_start.config.loss_turns must be one of {LOSS_TURNS}, got {self.loss_turns!r}")

    def seeds(self) -> tuple[int, ...]:
        """SeedConfig seeds of its seeding rounds (`collect.make_demos` draws them in this order)."""
        return tuple(1000 * self.seed + r for r in range(self.max_rounds))


SIZES = {
    "default": WarmStartConfig(),
    # Up to 360 graded solver demonstrations (60 tasks x 2 variants on each of 3 repos; fewer where a repo runs
    # out of mutants whose spec fits) and 30 injector ones; one epoch (about 90 steps of 4). About 3 hours on
    # an idle 2-core machine (docs/warm_start.md): for the learning experiment, not the default run.
    "full": WarmStartConfig(n_per_repo=60, per_task=2, injector_per_repo=10, max_rounds=30),
    # 16 tasks per repo (about 45 solver and 12 injector demonstrations), three epochs (about 45 steps of 4):
    # the learning experiment's start when the full size does not fit the time (about 1 h idle).
    "medium": WarmStartConfig(n_per_repo=16, injector_per_repo=4, epochs=3),
}
"""Named warm starts (`selfplay warm-start --size`): `default` is what `selfplay run` starts from."""


def config_key(config: WarmStartConfig) -> str:
    return hashlib.sha256(json.dumps({**asdict(config), "format": FORMAT}, sort_keys=True).encode()).hexdigest()[:16]


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

    def record(self) -> dict[str, Any]:
        """What a run records of its warm start."""
        return {"config_key": self.config_key, "content_key": self.content_key,
                "demonstrations": dict(self.demonstrations), "steps": self.steps, "model_dir": self.model_dir}


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


def _sft_config(config: WarmStartConfig) -> Any:
    return preset(config.preset, model_dir=config.model_dir, seed=config.seed, epochs=config.epochs, lr=config.lr)


def _demonstrate(config: WarmStartConfig, root: Path) -> tuple[Any, dict[str, int], dict[str, Any]]:
    """Demonstrations on every training repo into `root`/store.db: (RFT data, operator coverage, timings)."""
    # lazy: run_config imports WarmStartConfig from here; the demo machinery would slow config loading
    from selfplay.demos.collect import make_demos
    from selfplay.procedural.operators import OPERATORS

    timings: dict[str, Any] = {"load_avg_1m/start": os.getloadavg()[0]}
    with open_store(str(root / "store.db")) as store:
        for repo in config.repos:
            t0 = time.monotonic()
            rep = make_demos(get_repo(repo), config.n_per_repo, store, root / "demos" / repo, seed=config.seed,
                             per_task=config.per_task, max_context_tokens=config.max_context_tokens,
                             max_rounds=config.max_rounds, injector=config.injector_per_repo,
                             short_share=config.short_share,
                             injector_max_context_tokens=config.injector_max_context_tokens)
            timings[f"seed/{repo}_s"] = rep.seed_time
            timings[f"seed/{repo}_cached_rounds"] = rep.seed_rounds_cached
            timings[f"demos/{repo}_s"] = time.monotonic() - t0 - rep.seed_time
            timings[f"demos/{repo}_kept"] = len(rep.kept)
            timings[f"demos/{repo}_injector_kept"] = len(rep.injector_kept)
            log.info("warm start: %s: %d solver and %d injector demonstrations kept, %d dropped", repo,
                     len(rep.kept), len(rep.injector_kept), len(rep.dropped))
        data = collect(store, source="demo", max_per_task=config.per_task, injector=config.injector_per_repo > 0)
        operators = _operators(store, data.trajectories)
    missing = sorted({op.name for op in OPERATORS} - set(operators))
    if missing:
        log.warning("warm start: no kept demonstration covers the operators %s", ", ".join(missing))
    return data, operators, timings


def _build(config: WarmStartConfig, root: Path) -> Path:
    if (root / "store.db").exists():  # an interrupted build or a rebuild: its demonstrations would be stored twice
        (root / "store.db").unlink()
        shutil.rmtree(root / "demos", ignore_errors=True)
    start = time.monotonic()
    root.mkdir(parents=True, exist_ok=True)
    data, operators, timings = _demonstrate(config, root)
    leaked = sorted({t.metadata.get("repo") for t in data.trajectories} - set(config.repos))
    if leaked:  # the store is this build's own, so this is a bug in collection, not a user error
        raise RuntimeError(f"warm start: demonstrations from repos outside warm_start.config.repos: {leaked}")
    samples = sft_samples(data.trajectories, turns=config.loss_turns)
    sft = _sft_config(config)
    steps = len(batches(samples, sft))
    content = content_key(samples, steps)
    model = root / f"model-{content}"
    tmp = root / "model.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    t0 = time.monotonic()
    roles = Counter(t.role for t in data.trajectories)
    manifest = WarmStartManifest(config_key(config), content, {"solver": roles["solver"],
                                                               "injector": roles["injector"]},
                                 len(samples), steps, operators, tuple(config.repos), _budgets(data.trajectories),
                                 str(model))
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


def sized(size: str, **overrides: Any) -> WarmStartConfig:
    """The named size (`SIZES`) with the non-None `overrides` applied."""
    if size not in SIZES:
        raise ValueError(f"unknown warm-start size {size!r}; choose one of {', '.join(SIZES)}")
    return replace(SIZES[size], **{k: v for k, v in overrides.items() if v is not None})
