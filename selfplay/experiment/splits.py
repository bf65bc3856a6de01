"""One checkpoint's held-out figures over several splits, each episode counted once (pure).

Splits seeded with other `--seed` values share tasks: seeding draws from few candidate bugs per repo (the
three splits of `--seed 0`, 1 and 2 hold 27 distinct tasks, not 36). A shared task's episodes are the same
draws in every split (`heldout.episode_seed` is fixed by task, sample and sample seed), so a sum over the
splits' figures counts them once per split. `pool_splits` keeps each (task, mode, sample) once, from the
first split that played it, and summarises those rows as one evaluation (`heldout.summarize`); it also
says how many repeated episodes ended otherwise than their first (a suite that timed out under load, say).
`pool_pairs` does the same for both checkpoints of `--arm compare` files and pairs them over distinct
draws, so a shared draw enters the sign test once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from selfplay.experiment.compare import PHASES, compare_rows
from selfplay.experiment.heldout import EpisodeRow, row_from_dict, summarize

SETTINGS_IGNORED = frozenset({"workers", "device"})
"""Evaluation settings that do not change an episode's draws, so splits may differ in them."""


def pool_splits(results: Sequence[Mapping[str, Any]], phase: str = "after",
                names: Sequence[str] | None = None) -> dict[str, Any]:
    """`results`: the JSON of `bench_learning.py --arm compare` (or any file with `models`, `settings` and
    `rows` keyed by phase) of one checkpoint on several splits; `names` label them in messages. ValueError
    when a file lacks the phase, or the files name another checkpoint or other draws."""
    return _pool(results, phase, names)[0]


def pool_pairs(results: Sequence[Mapping[str, Any]], names: Sequence[str] | None = None) -> dict[str, Any]:
    """Both checkpoints of `--arm compare` files pooled over their splits (`pool_splits` of each phase) and
    paired over distinct draws (`compare.compare_rows`): a shared task's draws enter the sign test once,
    not once per split. ValueError as `pool_splits`, for either phase."""
    pools = {phase: _pool(results, phase, names) for phase in PHASES}
    return {**{phase: pool for phase, (pool, _) in pools.items()},
            "paired": compare_rows(pools["after"][1], pools["before"][1])}


def _pool(results: Sequence[Mapping[str, Any]], phase: str,
          names: Sequence[str] | None) -> tuple[dict[str, Any], list[Mapping[str, Any]]]:
    """`pool_splits`'s figures, and the distinct rows they summarise."""
    names = list(names) if names is not None else [f"split file {i + 1}" for i in range(len(results))]
    if not results:
        raise ValueError("no split files to pool: give at least one")
    first_model, first_settings = None, None
    for name, res in zip(names, results, strict=True):
        if not isinstance(res, Mapping):
            raise ValueError(f"{name} is no result file (a JSON object with `rows`): give the --out of "
                             "bench_learning.py --arm compare")
        rows = (res.get("rows") or {}).get(phase)
        if not rows:
            raise ValueError(f"{name} has no {phase!r} episodes; pick the phase with --phase "
                             f"(it has: {', '.join(sorted(res.get('rows') or {})) or 'none'})")
        model = (res.get("models") or {}).get(phase)
        settings = {k: v for k, v in (res.get("settings") or {}).items() if k not in SETTINGS_IGNORED}
        if first_model is None:
            first_model, first_settings = model, settings
        elif model != first_model:
            raise ValueError(f"{name} played {model}, not {first_model}: pool one checkpoint's splits")
        elif settings != first_settings:
            other = sorted(k for k in settings.keys() | first_settings.keys() if settings.get(k) != first_settings.get(k))
            raise ValueError(f"{name} played other draws than {names[0]} (settings {', '.join(other)} differ): "
                             "its episodes of a shared task are not the same episodes")
    # every row read as an episode first: a row that is none is named, not a KeyError further on
    per_split = [summarize([_episode(r, name) for r in res["rows"][phase]]).get("sample")
                 for name, res in zip(names, results, strict=True)]
    kept, repeated, differing = _distinct_rows(results, phase)
    split_tasks = [{r["task"] for r in res["rows"][phase]} for res in results]
    tasks = set().union(*split_tasks)
    shared = {t for t in tasks if sum(t in s for s in split_tasks) > 1}
    pool = {"model": first_model, "phase": phase, "splits": len(results), "tasks": len(tasks),
            "shared_tasks": sorted(shared), "episodes": len(kept), "repeated_episodes": repeated,
            "repeats_ending_otherwise": differing, "per_split_sample": per_split,
            "pooled": summarize([_episode(r, "") for r in kept.values()])}
    return pool, list(kept.values())


def _distinct_rows(results: Sequence[Mapping[str, Any]],
                   phase: str) -> tuple[dict[tuple[str, str, int], Mapping[str, Any]], int, int]:
    """Each (task, mode, sample) of the files' `phase` rows once, from the first file that played it; how
    many rows repeated one, and how many of those ended otherwise than it."""
    kept: dict[tuple[str, str, int], Mapping[str, Any]] = {}
    repeated = differing = 0
    for res in results:
        for r in res["rows"][phase]:
            key = (r["task"], r["mode"], int(r["sample"]))
            if key in kept:
                repeated += 1
                differing += kept[key]["failure"] != r["failure"]
            else:
                kept[key] = r
    return kept, repeated, differing


def _episode(row: Mapping[str, Any], name: str) -> EpisodeRow:
    try:
        return row_from_dict(row)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None


def pool_table(pool: Mapping[str, Any], names: Sequence[str]) -> str:
    """Markdown: each split's sampled solves, then the pool over distinct episodes."""
    def cell(s: Mapping[str, Any] | None) -> str:
        if not s:
            return "-"
        lo, hi = s["ci95"]
        return f"{s['solved']}/{s['n']}, {s['rate']:.1%} [{lo:.1%}, {hi:.1%}]"

    def count(s: Mapping[str, Any] | None) -> str:
        return f"{s['solved']}/{s['n']}" if s else "-"

    p = pool["pooled"]
    lines = ["| split | sampled (95% CI) |", "|---|---|"]
    lines += [f"| {name} | {cell(s)} |" for name, s in zip(names, pool["per_split_sample"], strict=True)]
    lines.append(f"| **distinct episodes** ({pool['tasks']} tasks; greedy {count(p.get('greedy'))}, pass@k "
                 f"{count(p.get('pass_at_k'))}) | {cell(p.get('sample'))} |")
    shared = pool["shared_tasks"]
    lines.append("")
    lines.append(f"{len(shared)} task(s) in more than one split, {pool['repeated_episodes']} repeated episode(s) "
                 f"counted once ({pool['repeats_ending_otherwise']} of them ended otherwise than their first)"
                 + (f": {', '.join(shared)}" if shared else "") + ".")
    return "\n".join(lines) + "\n"
