"""A confirmatory evaluation of finished experiments: each one's final rl and control checkpoints played
again on the same tasks with a fresh `sample_seed` and as many samples per task as wanted, paired per
(task, sample), then pooled over experiments.

Why it exists: an experiment's own evaluations seed their sampled episodes by task and sample only, so
every replicate from the same warm start replays the same start (and control) episodes, and their paired
tests share those episodes: pooled, they are not independent samples. A recheck gives each experiment its
own `sample_seed` (`base_seed + index`), so its control episodes are drawn afresh and the pooled
discordant pairs are independent; with more samples per task it also has more of them. The analysis is
fixed before it runs: one-sided exact sign test over the discordant pairs (rl solved, control did not;
and the reverse), per experiment and pooled.
"""

from __future__ import annotations

import ast
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, fields, replace
from pathlib import Path
from typing import Any

from selfplay.experiment.arms import ARMS, saved_overrides
from selfplay.experiment.heldout import EpisodeRow, EvalSettings, evaluate, row_dict, summarize
from selfplay.experiment.stats import sign_test

log = logging.getLogger(__name__)

NAMES = tuple(name for name, _ in ARMS)


def final_checkpoints(results: Mapping[str, Any], kind: str = "train_evals") -> dict[str, str]:
    """Arm -> the checkpoint an experiment evaluated after its last iteration (`kind`: "train_evals" or
    "evals"; an experiment without a training stratum evaluated the same checkpoints in "evals" only). A
    control run without its learner evaluated the warm start itself there."""
    last = int(results["config"]["iterations"])
    evals = results.get(kind) or {}
    if not evals and kind == "train_evals":
        evals = results.get("evals") or {}
    missing = [a for a in NAMES if f"{a}@{last}" not in evals]
    if missing:
        raise ValueError(f"the experiment has no {kind} entry for {', '.join(f'{a}@{last}' for a in missing)}: "
                         "only a finished experiment (both arms, every iteration) can be rechecked; finish it or "
                         "merge the other arm's --work with `--arm report --merge`")
    return {a: evals[f"{a}@{last}"]["model"] for a in NAMES}


def demonstrated_store(results: Mapping[str, Any]) -> str | None:
    """The warm-start store.db whose demonstrated tasks an experiment run with `--demonstrated` trained on
    (its arms' `curriculum.demonstrated_store` override), or None: those tasks are its training stratum when
    it evaluated none of its own (`--train-eval 0`)."""
    values = dict(o.split("=", 1) for o in saved_overrides(results["config"]) if "=" in o)
    if values.get("curriculum.demonstrated_tasks", "").lower() != "true":
        return None
    return values.get("curriculum.demonstrated_store") or None


def experiment_repo_list(results: Mapping[str, Any]) -> str | None:
    """The repo list that named an experiment's training repos (its arms' `repo_list`, from its preset and
    overrides; None: the bundled one): its training-stratum tasks are read back against it."""
    from selfplay.config.loader import load_config  # lazy: the loader reads presets

    config = results["config"]
    return load_config(config.get("preset") or "default", saved_overrides(config)).repo_list


def recheck_settings(results: Mapping[str, Any], *, samples: int, sample_seed: int, workers: int) -> EvalSettings:
    """The experiment's own evaluation settings (turns, tokens, context, temperature, the `localize` tool),
    sampled episodes only (the greedy ones do not depend on the seed: they would replay), `samples` of them
    per task."""
    if sample_seed < 1:
        raise ValueError(f"sample_seed {sample_seed} would replay the experiments' own draws (0); give 1 or more")
    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    saved = results["config"]["eval"]
    if isinstance(saved, str):  # results.json keeps the config's values as their str(): a dict's repr
        saved = ast.literal_eval(saved)
    # every setting the checkpoints were evaluated with but the draws: a policy trained with a tool is
    # played with it
    # (the device is this machine's, not the one the experiment ran on)
    own = {f.name for f in fields(EvalSettings)} - {"samples", "greedy", "workers", "sample_seed", "device"}
    base = EvalSettings(**{k: saved[k] for k in sorted(own) if k in saved})
    return replace(base, samples=samples, greedy=False, workers=workers, sample_seed=sample_seed)


def solved_by_draw(rows: Sequence[Mapping[str, Any]], mode: str) -> dict[tuple[str, int], bool]:
    """(task, sample) -> solved, for the episodes of `mode` not lost to infrastructure."""
    return {(r["task"], r["sample"]): r["reward"] > 0 for r in rows if r["mode"] == mode and r["failure"] != "infra"}


def pair_episodes(rl: Sequence[Mapping[str, Any]], control: Sequence[Mapping[str, Any]],
                  mode: str = "sample") -> dict[str, Any]:
    """Episodes of `mode` (sample, or greedy: one a task) of two checkpoints paired by (task, sample), which
    share their seed; an episode lost to infrastructure on either side drops its pair."""
    a, b = solved_by_draw(rl, mode), solved_by_draw(control, mode)
    keys = sorted(set(a) & set(b))
    only_rl = sum(a[k] and not b[k] for k in keys)
    only_control = sum(b[k] and not a[k] for k in keys)
    return {"pairs": len(keys), "rl_solved": sum(a[k] for k in keys), "control_solved": sum(b[k] for k in keys),
            "only_rl": only_rl, "only_control": only_control, **sign_test(only_rl, only_control)}


def pair_tasks(rl: Sequence[Mapping[str, Any]], control: Sequence[Mapping[str, Any]],
               mode: str = "sample") -> dict[str, Any]:
    """The clustered reading of `pair_episodes`: episodes of one task are not independent, so each task
    counts once, as ahead (rl solved more of the task's pairs), behind, or tied, with the exact sign test
    of ahead against behind. Pairs as `pair_episodes` does (an infrastructure loss drops its pair)."""
    a, b = solved_by_draw(rl, mode), solved_by_draw(control, mode)
    margin: dict[str, int] = {}
    for key in set(a) & set(b):
        margin[key[0]] = margin.get(key[0], 0) + int(a[key]) - int(b[key])
    ahead, behind = sum(m > 0 for m in margin.values()), sum(m < 0 for m in margin.values())
    return {"tasks": len(margin), "ahead": ahead, "behind": behind, "tied": len(margin) - ahead - behind,
            **sign_test(ahead, behind)}


def pooled(rechecks: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The experiments' paired counts summed, and the sign test of the sums (the experiments' episodes are
    independent when each had its own `sample_seed`)."""
    keys = ("pairs", "rl_solved", "control_solved", "only_rl", "only_control")
    total = {k: sum(int(r["paired"][k]) for r in rechecks) for k in keys}
    return {**total, **sign_test(total["only_rl"], total["only_control"])}


def draw_settings(settings: EvalSettings) -> dict[str, Any]:
    """The settings an episode's draw depends on: all but `workers` (how many play at once) and `device`
    (where: it moves numerics, as batching does, not seeds); `max_repeats` only when set, so that the draws
    of evaluations made before it existed (which never ended an episode for repeating) still match."""
    return {k: v for k, v in asdict(settings).items()
            if k not in ("workers", "device") and not (k == "max_repeats" and v is None)}


def reusable_arm(earlier: Sequence[Mapping[str, Any]], model: str, tasks: Sequence[str], settings: EvalSettings,
                 kind: str) -> Mapping[str, Any] | None:
    """An arm of an earlier recheck (`earlier`: its experiments' entries, each with its `settings`) that
    played the checkpoint `model` on the same tasks under the same draw settings, or None. Its episodes have
    the seeds this recheck's would have (task, sample, `sample_seed`), so they are the same draws; a replay
    would differ from them only by batching numerics, as any two plays of one checkpoint do. An LR-0 control
    shared by experiments from one start is the case this is for: it is played once."""
    want, path = draw_settings(settings), Path(model).expanduser().resolve()
    for entry in earlier:
        if entry.get("kind") != kind or entry.get("settings") != want or sorted(entry.get("tasks", ())) != sorted(tasks):
            continue
        for arm in entry.get("arms", {}).values():
            if Path(arm["model"]).expanduser().resolve() == path:
                return arm
    return None


def recheck_experiment(results: Mapping[str, Any], tasks: Sequence[tuple[Any, Any]], settings: EvalSettings,
                       kind: str = "train_evals",
                       play: Callable[[str, Sequence[tuple[Any, Any]], EvalSettings], list[EpisodeRow]] | None = None,
                       reuse: Sequence[Mapping[str, Any]] = (),
                       played: Callable[[Mapping[str, Any]], None] = lambda partial: None,
                       ) -> dict[str, Any]:
    """Both final checkpoints of one experiment on `tasks` under `settings`, and their pairing. A checkpoint
    that `reuse` (earlier rechecks' entries) already played on the same draws is read back from it, with
    `reused_from` naming where, not played again. `played` is called with the entry so far (no `paired`
    yet) after each checkpoint is played, so a caller can save it: a recheck stopped in its second
    checkpoint keeps its first, and reads it back when run again with that file in `reuse`."""
    out: dict[str, Any] = {"sample_seed": settings.sample_seed, "samples": settings.samples, "kind": kind,
                           "tasks": [t.task_id for _, t in tasks], "settings": draw_settings(settings), "arms": {}}
    for arm, model in final_checkpoints(results, kind).items():
        old = reusable_arm(reuse, model, out["tasks"], settings, kind)
        if old is not None:
            out["arms"][arm] = {**old, "reused_from": old.get("reused_from") or old.get("source", "an earlier recheck")}
            out["arms"][arm].pop("source", None)
            log.info("recheck %s (%s): read back from %s", arm, model, out["arms"][arm]["reused_from"])
            continue
        t0 = time.monotonic()
        rows = (play or evaluate)(model, tasks, settings)  # looked up now, so a test can stand in for it
        out["arms"][arm] = {"model": model, "wall_s": round(time.monotonic() - t0, 1),
                            "summary": summarize(rows), "rows": [row_dict(r) for r in rows]}
        log.info("recheck %s (%s): %s", arm, model, out["arms"][arm]["summary"].get("sample"))
        played(out)
    out["paired"] = pair_episodes(out["arms"]["rl"]["rows"], out["arms"]["control"]["rows"])
    out["paired_by_task"] = pair_tasks(out["arms"]["rl"]["rows"], out["arms"]["control"]["rows"])
    return out


def recheck_table(rechecks: Sequence[Mapping[str, Any]], total: Mapping[str, Any]) -> str:
    """Markdown: per experiment and pooled, each arm's solved sampled episodes and the paired sign test."""
    lines = ["| experiment | sample_seed | pairs | rl solved | control solved | only rl | only control | "
             "p (one-sided) | p (two-sided) | tasks ahead / behind / tied | p by task (one-sided) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]

    def row(name: str, seed: Any, p: Mapping[str, Any], t: Mapping[str, Any] | None) -> str:
        by_task = f"{t['ahead']} / {t['behind']} / {t['tied']} | {t['p_greater']:.3g}" if t else "- | -"
        return (f"| {name} | {seed} | {p['pairs']} | {p['rl_solved']} | {p['control_solved']} | {p['only_rl']} | "
                f"{p['only_control']} | {p['p_greater']:.3g} | {p['p_value']:.3g} | {by_task} |")

    lines += [row(r.get("work", str(i)), r["sample_seed"], r["paired"], r.get("paired_by_task"))
              for i, r in enumerate(rechecks)]
    lines.append(row("**pooled**", "-", total, None))  # tasks differ between experiments: no pooled task count
    return "\n".join(lines)
