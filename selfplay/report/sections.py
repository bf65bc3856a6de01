"""The report's plot sections: which numbers of a run each chart draws (metric keys per the run directory
contract, task statistics from the store, episode summaries from the trajectory files)."""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

from selfplay.report import charts
from selfplay.report.episodes import EpisodeSummary
from selfplay.report.run_data import RunData
from selfplay.store.records import TaskStats

ROLES = ("injector", "solver")
DIFFICULTY_BINS = 10


def metric_series(metrics: Sequence[dict[str, Any]], key: str) -> list[tuple[float, float]]:
    """(iteration, value) of every metrics line that has a finite number under `key`."""
    out = []
    for row in metrics:
        x, y = row.get("iteration"), row.get(key)
        if _number(x) and _number(y):
            out.append((float(x), float(y)))
    return out


def prefixed_keys(metrics: Sequence[dict[str, Any]], prefix: str) -> list[str]:
    """Metric keys starting with `prefix`, in first-seen order."""
    return list(dict.fromkeys(k for row in metrics for k in row if k.startswith(prefix)))


def totals(metrics: Sequence[dict[str, Any]], prefix: str) -> list[tuple[str, float]]:
    """Per-iteration counts under `prefix` summed over the run, largest first."""
    sums: Counter[str] = Counter()
    for row in metrics:
        for key, value in row.items():
            if key.startswith(prefix) and _number(value):
                sums[key[len(prefix):]] += value
    return sorted(sums.items(), key=lambda kv: (-kv[1], kv[0]))


def solve_rates(run: RunData) -> str:
    m = run.metrics
    series = {"solver: all": metric_series(m, "solve_rate/all")}
    for key in sorted(prefixed_keys(m, "solve_rate/order_")):
        series[f"solver: order {key.removeprefix('solve_rate/order_')}"] = metric_series(m, key)
    series["injector: valid artifacts"] = metric_series(m, "injector/validity")
    by_repo = {key.removeprefix("solve_rate/repo/"): metric_series(m, key)
               for key in sorted(prefixed_keys(m, "solve_rate/repo/"))}
    return (charts.line_chart("chart-solve-rate", "Success rate per iteration: solver solve rate by task order, "
                              "injector validity", series, y_label="rate", y_range=(0, 1))
            + charts.line_chart("chart-solve-rate-repo", "Solver solve rate by repo", by_repo, y_label="rate",
                                y_range=(0, 1)))


def injector(run: RunData) -> str:
    m = run.metrics
    prefix = "injector/failed_check/"
    per_iteration = {key.removeprefix(prefix): metric_series(m, key) for key in prefixed_keys(m, prefix)}
    return (charts.line_chart("chart-validity", "Injector validity (share of injected bugs that pass every "
                              "check)", {"validity": metric_series(m, "injector/validity")}, y_label="valid share",
                              y_range=(0, 1))
            + charts.bar_chart("chart-failed-checks", "Invalid artifacts by the first check they failed (whole run)",
                               totals(m, prefix), x_label="artifacts")
            + charts.line_chart("chart-failed-checks-time", "Failed checks per iteration", per_iteration,
                                y_label="artifacts"))


def rewards(run: RunData) -> str:
    m = run.metrics
    series = {"injector mean": metric_series(m, "reward/injector_mean"),
              "solver mean": metric_series(m, "reward/solver_mean")}
    return charts.line_chart("chart-rewards", "Mean reward per iteration", series, y_label="reward")


def difficulty(run: RunData) -> str:
    """Histogram of per-task solve rates: where the curriculum sits between trivial and unsolved."""
    if run.tasks is None:
        return charts.empty("chart-difficulty", f"Curriculum difficulty: {run.store}")
    labels, counts = difficulty_bins(run.tasks)
    unattempted = sum(1 for t in run.tasks if not t.attempts)
    by_status = sorted(Counter(t.status for t in run.tasks).items())
    by_order = sorted(Counter(f"order {t.order} ({t.origin})" for t in run.tasks).items())
    return (charts.histogram("chart-difficulty", f"Curriculum difficulty: solve rate of each attempted task "
                             f"({sum(sum(c) for c in counts.values())} attempted, {unattempted} not yet attempted, "
                             f"{len(run.tasks)} in the store)", labels, counts, x_label="task solve rate",
                             y_label="tasks")
            + charts.bar_chart("chart-task-status", "Tasks in the store by status", by_status, x_label="tasks")
            + charts.bar_chart("chart-task-order", "Tasks in the store by order and origin", by_order,
                               x_label="tasks"))


def difficulty_bins(tasks: Sequence[TaskStats]) -> tuple[list[str], dict[str, list[int]]]:
    """Ten solve-rate bins [0, 0.1), ..., [0.9, 1.0] per task status (a rate of exactly 1 falls in the last)."""
    labels = [f"{i / DIFFICULTY_BINS:.1f}–{(i + 1) / DIFFICULTY_BINS:.1f}" for i in range(DIFFICULTY_BINS)]
    counts: dict[str, list[int]] = {}
    for t in tasks:
        if t.solve_rate is None:
            continue
        b = min(int(t.solve_rate * DIFFICULTY_BINS), DIFFICULTY_BINS - 1)
        counts.setdefault(t.status, [0] * DIFFICULTY_BINS)[b] += 1
    return labels, dict(sorted(counts.items()))


def lengths(run: RunData) -> str:
    eps = run.episodes.summaries
    m = run.metrics
    turns_mean = {role: metric_series(m, f"episode/{role}/turns_mean") for role in ROLES}
    tokens_mean = {role: metric_series(m, f"episode/{role}/tokens_mean") for role in ROLES}
    terminations = sorted(Counter(f"{e.role}: {e.termination}" for e in eps).items())
    return (_length_histogram("chart-turns", "Turns per episode", eps, "turns")
            + _length_histogram("chart-tokens", "Tokens per episode (prompt, turns and observations)", eps, "tokens")
            + charts.line_chart("chart-turns-mean", "Mean turns per iteration", turns_mean, y_label="turns")
            + charts.line_chart("chart-tokens-mean", "Mean tokens per iteration", tokens_mean, y_label="tokens")
            + charts.bar_chart("chart-terminations", "Why episodes ended", terminations, x_label="episodes"))


def _length_histogram(chart_id: str, title: str, eps: Sequence[EpisodeSummary], attr: str) -> str:
    values = {role: [getattr(e, attr) for e in eps if e.role == role] for role in sorted({e.role for e in eps})}
    top = max((v for vs in values.values() for v in vs), default=0)
    width = 1 if top < 30 else charts.nice_ticks(0, top / 20, 2)[1]  # about 20 bins
    n_bins = int(top // width) + 1
    labels = [fmt_bin(i * width, width) for i in range(n_bins)]
    counts = {}
    for role, vs in values.items():
        c = [0] * n_bins
        for v in vs:
            c[min(int(v // width), n_bins - 1)] += 1
        counts[role] = c
    return charts.histogram(chart_id, f"{title} ({len(eps)} episodes)", labels, counts, x_label=attr,
                            y_label="episodes", ticks=[charts.fmt(i * width) for i in range(n_bins)])


def fmt_bin(lo: float, width: float) -> str:
    return charts.fmt(lo) if width == 1 else f"{charts.fmt(lo)}–{charts.fmt(lo + width)}"


def learner(run: RunData) -> str:
    """The learner's metrics per update (x is the iteration the update ran in), and where the run's wall
    time went (mean share per phase)."""
    m = run.metrics
    def lines(*names: str) -> dict[str, list[tuple[float, float]]]:
        return {name: metric_series(m, f"learner/{name}") for name in names}

    shares = [(key.removeprefix("time_share/"), _mean([y for _, y in metric_series(m, key)]))
              for key in prefixed_keys(m, "time_share/")]
    return (charts.line_chart("chart-learner", "Learner loss and KL per update", lines("loss", "kl"),
                              y_label="value")
            + charts.line_chart("chart-learner-clip", "Clip fraction and entropy per update",
                                lines("clipfrac", "entropy"), y_label="value")
            + charts.bar_chart("chart-time-share", "Share of wall time by phase (mean over iterations)",
                               sorted(shares, key=lambda kv: -kv[1]), x_label="share"))


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def latest_metrics(run: RunData) -> str:
    """Every metric key's last value (learner, staleness, throughput, time shares, eval ...)."""
    last: dict[str, Any] = {}
    for row in run.metrics:
        for key, value in row.items():
            if _number(value):
                last[key] = (row.get("iteration"), value)
    if not last:
        return '<p class="none">No metrics in this run yet.</p>'
    rows = [[key, charts.fmt(value), charts.fmt(it) if _number(it) else "–"]
            for key, (it, value) in sorted(last.items())]
    return ('<details><summary>Last value of every metric ({n} keys)</summary>{t}</details>'
            .format(n=len(rows), t=charts.data_table(["metric", "value", "iteration"], rows)))


def summary_table(run: RunData) -> str:
    if not run.summary:
        return '<p class="none">summary.json is missing: the run has not finished an iteration.</p>'
    rows = [[str(k), _when(v) if k.endswith("_at") else _plain(v)] for k, v in run.summary.items()]
    return charts.data_table(["", "value"], rows).replace('class="data"', 'class="data summary"', 1)


def _when(value: Any) -> str:
    if _number(value) and value > 1e9:  # unix seconds
        return dt.datetime.fromtimestamp(value, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return _plain(value)


def _plain(value: Any) -> str:
    if _number(value):
        return charts.fmt(value)
    return "–" if value is None else str(value)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)

