"""Replay one stored iteration's learner update at several learning rates and measure what it did.

For each learning rate, from the same weights (the policy that sampled the iteration), the run's own
config (batch rules, loss, steps per update) builds the batch of the iteration's stored trajectories as
the run did (`PolicyLearner.batch`) and takes the update with `learner.measure_shift` on:
- on the trained tokens: the KL between the policy before and after, and the mean logprob change of the
  tokens with positive and with negative advantage (`selfplay.learner.update_shift`);
- on probe episodes it did not train on (injector episodes of other run or arm directories, sampled by
  the same starting policy): the same changes for the valid and the invalid ones. An update that teaches
  the plan raises the valid probe episodes against the invalid ones.
`negate` flips every advantage: the same step in the wrong direction, the control for "the update is
mostly noise".

The injector's running baseline starts empty, as in a run's first update (grouped advantages,
`learner.batch.injector_baseline=group`, do not depend on it). No rollout and no sandbox: what the policy
does afterwards is not measured here. Needs the `train` extra (torch, DeepSpeed).
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from selfplay.config.loader import load_config
from selfplay.experiment.failures import injector_outcome
from selfplay.experiment.stats import separation_interval
from selfplay.learner.update_shift import episode_shifts, update_shift
from selfplay.orchestration.rundir import RunDir, read_trajectories

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Probe:
    """An injector episode the replayed update did not train on."""

    input_ids: tuple[int, ...]
    loss_mask: tuple[int, ...]
    valid: bool
    source: str = ""
    """The directory it was read from."""


def injector_probes(dirs: Sequence[Path], iterations: Sequence[int]) -> list[Probe]:
    """Every trainable injector episode of those iterations in those run (or arm) directories."""
    out = []
    for d in dirs:
        for it in iterations:
            for t in read_trajectories(RunDir(Path(d)).trajectory_file(it, "injector")):
                if t.metadata.get("infra_failure") or not any(t.loss_mask):
                    continue
                label = injector_outcome(t.termination, t.metadata.get("validation"))
                out.append(Probe(t.input_ids, t.loss_mask, label == "valid", str(d)))
    return out


def replay_update(run_dir: Path | Sequence[Path], iterations: Sequence[int], model: Path, lrs: Sequence[float], *,
                  probes: Sequence[Probe] = (), negate: bool = False,
                  overrides: Sequence[str] = ()) -> list[dict[str, Any]]:
    """One row of figures per learning rate (see the module docstring). Several `iterations` make one
    batch (their groups stay apart): a larger update than the run took, of episodes of one policy only
    where the run's weights did not change between them (an LR-0 control arm). Several run directories
    (runs of that one policy with other seeds) add their iterations' episodes to the batch, their groups
    kept apart too; the first directory's config builds the batch and the update."""
    from selfplay.orchestration.learning import PolicyLearner

    dirs = [Path(run_dir)] if isinstance(run_dir, (str, Path)) else [Path(d) for d in run_dir]
    run, named = RunDir(dirs[0]), ", ".join(map(str, dirs))
    trajectories = [_apart(t, k) for k, d in enumerate(dirs) for it in iterations
                    for role in ("injector", "solver") for t in read_trajectories(RunDir(d).trajectory_file(it, role))]
    if not trajectories:
        raise ValueError(f"{named}: no trajectories of iterations {list(iterations)} under "
                         "trajectories/ (pass a run or arm directory that `selfplay run` or the experiment wrote)")
    version = max(t.policy_version for t in trajectories)  # the learner is at least as new as each
    probe_before = None
    rows = []
    for lr in lrs:
        config = load_config(run.config, [
            f"learner.engine.lr={lr}", "learner.measure_shift=true", "learner.checkpoint_every=1000000",
            "eval.every=0", *overrides])
        # closed at the end of each rate: a dropped learner keeps its optimizer state (LearnerEngine.close)
        with tempfile.TemporaryDirectory() as tmp, \
                PolicyLearner(config, str(model), Path(tmp) / "ckpt", initial_version=version) as learner:
            if probes and probe_before is None:  # every rate starts from the same weights
                probe_before = learner.engine.logprobs([p.input_ids for p in probes])
            samples, batch_metrics = learner.batch(trajectories)
            if not samples:
                raise ValueError(f"{named}: the batch of iterations {list(iterations)} is empty (no group with "
                                 "reward variance): there is no update to replay")
            if negate:
                samples = [replace(s, advantage=-s.advantage) for s in samples]
            t0 = time.perf_counter()
            metrics = learner.train(samples)
            row: dict[str, Any] = {
                "lr": lr, "negate": negate, "train_s": time.perf_counter() - t0, "samples": len(samples),
                "trained_tokens": sum(sum(s.loss_mask) for s in samples),
                **{k: v for k, v in batch_metrics.items() if k.startswith("batch/")},
                **{k: v for k, v in metrics.items() if k.startswith("learner/")}}
            if probes:
                after = learner.engine.logprobs([p.input_ids for p in probes])
                row.update(_probe_figures(probes, probe_before, after))
            log.info("replayed iterations %s at lr %g: shift KL %.3g", list(iterations), lr, row["learner/shift_kl"])
            rows.append(row)
    return rows


def _probe_figures(probes: Sequence[Probe], before: Any, after: Any) -> dict[str, Any]:
    """The shift on the probes, their valid - invalid separation with its bootstrap interval over probe
    episodes, and each probe's own change (so the interval can be checked from the JSON)."""
    masks = [p.loss_mask for p in probes]
    shift = update_shift(before, after, masks, [1.0 if p.valid else -1.0 for p in probes])
    per_episode = episode_shifts(before, after, masks)
    figures: dict[str, Any] = {
        "probe/kl": shift["shift_kl"], "probe/dlogp_valid": shift["shift_dlogp_pos"],
        "probe/dlogp_invalid": shift["shift_dlogp_neg"],
        "probe/episodes_valid": sum(p.valid for p in probes),
        "probe/episodes_invalid": sum(not p.valid for p in probes),
        "probe/episodes": [{"valid": p.valid, "dlogp_sum": d, "tokens": n, "source": p.source}
                           for p, (d, n) in zip(probes, per_episode)]}
    sep = _separation(probes, per_episode)
    if sep:
        figures.update({"probe/separation": sep["separation"], "probe/separation_lo": sep["lo"],
                        "probe/separation_hi": sep["hi"]})
    sources = sorted({p.source for p in probes})
    if len(sources) > 1:  # probes of several directories (other seeds): each one's own separation too
        figures["probe/by_source"] = {
            src: _separation([p for p in probes if p.source == src],
                             [e for p, e in zip(probes, per_episode) if p.source == src]) for src in sources}
    return figures


def _separation(probes: Sequence[Probe], per_episode: Sequence[tuple[float, int]]) -> dict[str, float]:
    """`separation_interval` of these probes, with their counts; empty without both classes."""
    valid = [e for p, e in zip(probes, per_episode) if p.valid]
    invalid = [e for p, e in zip(probes, per_episode) if not p.valid]
    if not (valid and invalid):
        return {}
    return {**separation_interval(valid, invalid), "valid": len(valid), "invalid": len(invalid)}


def _apart(t: Any, run_index: int) -> Any:
    """`t` with its group made its run's own: the same iteration (an injector group's key) or task group id
    in two runs of other seeds are other groups, whose rewards must not share a baseline."""
    if run_index == 0:
        return t
    meta = dict(t.metadata)
    meta["iteration"] = f"r{run_index}.{meta.get('iteration', '?')}"
    for key in ("group_id", "task_id"):
        if key in meta:
            meta[key] = f"r{run_index}.{meta[key]}"
    return replace(t, metadata=meta)
