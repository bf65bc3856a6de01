"""The metrics.jsonl record of one iteration (flat, namespaced keys; see docs and the team contract).

Time shares: the learner and the loop's own bookkeeping (`orchestration`: drawing tasks, store writes,
trajectory files, metrics) are timed directly; the rollout phase's wall time is split between sandbox,
model, validation and grading in proportion to what the workers measured for each (episodes run in
parallel, so their summed times exceed the wall time). The loop's bookkeeping overlaps the episodes in
flight, so its share is an upper bound.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from selfplay.config.run_config import RunConfig
from selfplay.learner.dynamic_sampling import signal_groups

if TYPE_CHECKING:
    from selfplay.orchestration.outcome import IterationOutcome
    from selfplay.store.protocol import TaskStore

PHASES = ("sandbox", "model", "validation", "grading", "learner", "orchestration")


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def time_shares(phase_s: Mapping[str, float], worker_s: Mapping[str, float]) -> dict[str, float]:
    """`time_share/<phase>` summing to 1 over PHASES."""
    learner = phase_s.get("learner", 0.0)
    seeding = phase_s.get("validation", 0.0)
    rollout = max(0.0, phase_s.get("rollout_wall", 0.0) - phase_s.get("orchestration", 0.0) - seeding)
    orchestration = phase_s.get("orchestration", 0.0) + phase_s.get("bookkeeping", 0.0)
    measured = {k: worker_s.get(k, 0.0) for k in ("sandbox", "model", "validation", "grading")}
    total_measured = sum(measured.values())
    seconds = {k: (rollout * v / total_measured if total_measured else 0.0) for k, v in measured.items()}
    if not total_measured:
        orchestration += rollout
    seconds["validation"] += seeding
    seconds.update(learner=learner, orchestration=orchestration)
    total = sum(seconds.values()) or 1.0
    out = {f"time_share/{k}": seconds[k] / total for k in PHASES}
    out.update({f"time_s/{k}": seconds[k] for k in PHASES})
    return out


def batch_size_metrics(trajectories: list[Any]) -> dict[str, float]:
    """`rollout/batch_size_mean` and `rollout/batch_size_p90` over the iteration's sampled tokens: the
    decode batch size each token was sampled in (episodes' `batch_sizes` metadata; absent when the
    backend does not report it). Token-weighted, so it is the batch size the sampling time was spent at."""
    hist: Counter[int] = Counter()
    for t in trajectories:
        for size, n in (t.metadata.get("batch_sizes") or {}).items():
            hist[int(size)] += int(n)
    total = sum(hist.values())
    if not total:
        return {}
    p90, seen = 0, 0
    for size in sorted(hist):
        seen += hist[size]
        if seen >= 0.9 * total:
            p90 = size
            break
    return {"rollout/batch_size_mean": sum(s * n for s, n in hist.items()) / total,
            "rollout/batch_size_p90": float(p90), "rollout/batched_tokens": float(total)}


def engine_metrics(trajectories: list[Any]) -> dict[str, float]:
    """Where the sampling engine's time went over the iteration (episodes' `engine` metadata; absent when
    the backend does not report it): `rollout/prefill_s` and `rollout/decode_s` (engine seconds: a shared
    forward's time is split between its rows, so the sums are the engine's busy time), their tokens,
    `rollout/prefill_share` of that time, and the rates `rollout/prefill_tok_per_s` (prompt positions
    computed) and `rollout/decode_tok_per_s` (tokens sampled, over the decode time); with prompt-lookup
    decoding, `rollout/lookup_drafted`, `rollout/lookup_kept` and their ratio `rollout/lookup_keep_rate`;
    `rollout/batch_fill_mean`, the token-weighted mean share of a decode batch's attended KV columns that
    were its rows' own (1.0: rows as long as each other)."""
    total: Counter[str] = Counter()
    sampled = batched = 0
    for t in trajectories:
        engine = t.metadata.get("engine")
        if engine:
            total.update({k: float(v) for k, v in engine.items()})
            sampled += sum(t.loss_mask)
            batched += sum((t.metadata.get("batch_sizes") or {}).values())
    busy = total["prefill_s"] + total["decode_s"]
    if not busy:
        return {}
    out = {"rollout/prefill_s": total["prefill_s"], "rollout/decode_s": total["decode_s"],
           "rollout/prefill_tokens": total["prefill_tokens"], "rollout/sampled_tokens": float(sampled),
           "rollout/prefill_share": total["prefill_s"] / busy}
    if total["prefill_s"]:
        out["rollout/prefill_tok_per_s"] = total["prefill_tokens"] / total["prefill_s"]
    if total["decode_s"]:
        out["rollout/decode_tok_per_s"] = sampled / total["decode_s"]
    if total["batch_fill"] and batched:
        out["rollout/batch_fill_mean"] = total["batch_fill"] / batched
    if total["drafted"]:  # prompt-lookup decoding (policy.lookup_tokens)
        out["rollout/lookup_drafted"] = total["drafted"]
        out["rollout/lookup_kept"] = total["drafts_kept"]
        out["rollout/lookup_keep_rate"] = total["drafts_kept"] / total["drafted"]
    return out


def iteration_record(outcome: IterationOutcome, learner: Mapping[str, float], store: TaskStore,
                     summary: Mapping[str, Any], config: RunConfig) -> dict[str, Any]:
    rec: dict[str, Any] = {"iteration": outcome.iteration, "policy_version": summary.get("policy_version")}
    trajs = outcome.trajectories
    if outcome.attempts:
        rec["solve_rate/all"] = sum(a.grade.resolved for a in outcome.attempts) / len(outcome.attempts)
        for name, key in (("order_{}", lambda a: a.order), ("repo/{}", lambda a: a.repo)):
            groups: dict[str, list[bool]] = {}
            for a in outcome.attempts:
                groups.setdefault(str(key(a)), []).append(a.grade.resolved)
            for value, ss in groups.items():
                rec["solve_rate/" + name.format(value)] = sum(ss) / len(ss)
    rec["rollout/solver_rounds"] = float(outcome.solver_rounds)
    rec["rollout/signal_groups"] = float(signal_groups(trajs))
    verdicts = [v for v in outcome.verdicts if not v.infra_failure]
    if verdicts:
        rec["injector/validity"] = sum(v.valid for v in verdicts) / len(verdicts)
    failed = Counter(v.failed_check for v in verdicts if v.failed_check)
    rec.update({f"injector/failed_check/{k}": float(n) for k, n in failed.items()})
    for role, key in (("injector", "reward/injector_mean"), ("solver", "reward/solver_mean")):
        m = _mean([float(t.reward) for t in trajs if t.role == role and t.reward is not None])
        if m is not None:
            rec[key] = m
        ts = [t for t in trajs if t.role == role]
        if ts:
            rec[f"episode/{role}/turns_mean"] = _mean([float(len(t.turn_spans)) for t in ts])
            rec[f"episode/{role}/tokens_mean"] = _mean([float(len(t.input_ids)) for t in ts])
    rec.update(batch_size_metrics(list(trajs)))
    rec.update(engine_metrics(list(trajs)))
    results = outcome.results
    rec.update({f"episode/termination/{k}": float(n) for k, n in Counter(r.termination for r in results).items()})
    rec["sandbox/errors"] = float(sum(r.termination == "sandbox_error" for r in results))
    rec["infra/failures"] = float(sum(bool(r.infra_failure) for r in results))
    statuses = Counter(s.status for s in store.task_stats())
    rec.update({f"tasks/{k}": float(n) for k, n in statuses.items()})
    rec.update({k: v for k, v in learner.items()})
    rec["staleness/dropped"] = float(learner.get("batch/dropped_stale", 0.0))
    rec["staleness/mean"] = float(learner.get("batch/staleness_mean", 0.0))
    worker_s: dict[str, float] = {}
    for r in results:
        for k, v in r.timings.items():
            worker_s[k] = worker_s.get(k, 0.0) + float(v)
    rec.update(time_shares(outcome.phase_s, worker_s))
    wall_h = max(summary.get("wall_s") or 0.0, 1e-9) / 3600
    rec["throughput/episodes_per_hour"] = (summary.get("injector_episodes", 0) + summary.get("solver_attempts", 0)) / wall_h
    rec["throughput/tasks_per_hour"] = summary.get("valid_artifacts", 0) / wall_h
    rec["iteration/wall_s"] = sum(outcome.phase_s.get(k, 0.0) for k in ("rollout_wall", "learner", "bookkeeping"))
    return rec
