"""The default warm start: demonstrations on the training repos, then RFT, cached by its inputs.

The checkpoint lives in `<selfplay cache>/warm_start/<key>/model`, `key` a hash of the config, the base
model and `FORMAT` (bumped when the expert or the SFT recipe changes), so a second call returns at once.
The repo split is fixed here and in docs: demonstrations come from `TRAIN_REPOS`; `HELDOUT_REPOS`
contribute none and are what `scripts/bench_learning.py` measures on.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path

log = logging.getLogger(__name__)

TRAIN_REPOS = ("toolz", "boltons", "marshmallow")
"""Repos whose procedural tasks the warm start demonstrates. Chosen for fast per-file suites (seeding runs
the related test file about five times per mutant) and short specs: more-itertools was dropped (its
test_more.py alone made seeding take over 20 minutes under load), and so was cachetools (about 1 in 6 of
its valid mutants has a spec that fits the 2,048-token demonstration, so seeding 6 took over 10 minutes)."""
HELDOUT_REPOS = ("parse", "inflection", "humanize")
"""Repos kept out of the warm start, for measuring generalisation (tabulate cannot be seeded: no code file
has a same-named test file)."""
FORMAT = 4
"""Version of the expert and the recipe; part of the cache key."""


@dataclass(frozen=True)
class WarmStartConfig:
    repos: tuple[str, ...] = TRAIN_REPOS
    """Training repos."""
    n_per_repo: int = 6
    """Procedural tasks demonstrated per repo."""
    per_task: int = 1
    """Demonstrations per task."""
    seed: int = 0
    """Seeds bugs, the expert's choices and training."""
    preset: str = "cpu"
    """SFT preset (selfplay.learner.sft.PRESETS)."""
    max_context_tokens: int = 2048
    """Token budget of one demonstration."""
    model_dir: str | None = None
    """Base model; None is the embedded SmolLM2-135M-Instruct."""


def cache_dir(config: WarmStartConfig) -> Path:
    from agent_scaffold.embedded import cache_root

    key = hashlib.sha256(json.dumps({**asdict(config), "format": FORMAT}, sort_keys=True).encode()).hexdigest()[:16]
    return cache_root() / "warm_start" / key


def warm_start_checkpoint(config: WarmStartConfig = WarmStartConfig(), *, force: bool = False) -> Path:
    """The cached warm-start checkpoint for `config`, built first when missing (or when `force`)."""
    from repos.cache import file_lock

    root = cache_dir(config)
    # Concurrent callers (a run loop and a bench) wait for one build instead of racing on its files.
    with file_lock(root.parent / f"{root.name}.lock"):
        return _build(config, root, force)


def _build(config: WarmStartConfig, root: Path, force: bool) -> Path:
    from repos.listfile import get_repo
    from selfplay.demos.collect import make_demos
    from selfplay.learner.rft import collect, sft_samples
    from selfplay.learner.sft import preset, train_sft
    from selfplay.store import open_store

    model = root / "model"
    if (model / "sft.json").is_file() and not force:
        log.info("warm start: cached checkpoint %s", model)
        return model
    if (root / "store.db").exists():  # an interrupted build: its demonstrations would be stored twice
        (root / "store.db").unlink()
        shutil.rmtree(root / "demos", ignore_errors=True)
    start = time.monotonic()
    root.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {"load_avg_1m/start": os.getloadavg()[0]}
    with open_store(str(root / "store.db")) as store:
        for repo in config.repos:
            t0 = time.monotonic()
            rep = make_demos(get_repo(repo), config.n_per_repo, store, root / "demos" / repo, seed=config.seed,
                             per_task=config.per_task, max_context_tokens=config.max_context_tokens)
            timings[f"seed/{repo}_s"] = rep.seed_time
            timings[f"seed/{repo}_cached_rounds"] = rep.seed_rounds_cached
            timings[f"demos/{repo}_s"] = time.monotonic() - t0 - rep.seed_time
            timings[f"demos/{repo}_kept"] = len(rep.kept)
            log.info("warm start: %s: %d demonstrations kept, %d dropped", repo, len(rep.kept), len(rep.dropped))
        data = collect(store, source="demo", max_per_task=max(1, config.per_task))
    tmp = root / "model.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    t0 = time.monotonic()
    train_sft(sft_samples(data.trajectories), tmp, preset(config.preset, model_dir=config.model_dir, seed=config.seed),
              metadata={"warm_start": asdict(config), **data.stats, **timings})
    timings["sft_s"] = time.monotonic() - t0
    timings["load_avg_1m/end"] = os.getloadavg()[0]
    shutil.rmtree(model, ignore_errors=True)
    tmp.rename(model)
    total = time.monotonic() - start
    (root / "timings.json").write_text(json.dumps({**timings, "total_s": total}, indent=1) + "\n")
    log.info("warm start: built %s in %.0f s", model, total)
    return model
