"""The experiment's table (Markdown), charts (SVG, both arms on one chart) and page (HTML), drawn with the
report's own chart code (`selfplay.report.charts`), so no plotting package is needed."""

from __future__ import annotations

import re
from html import escape
from pathlib import Path
from typing import Any

from selfplay.experiment.stats import wilson
from selfplay.report import charts

TRAINING_CHARTS = (
    ("solve_rate/all", "Training solve rate per iteration", "solve rate"),
    ("injector/validity", "Injector valid-bug rate per iteration", "valid-bug rate"),
    ("reward/solver_mean", "Mean solver reward per iteration", "reward"),
    ("reward/injector_mean", "Mean injector reward per iteration", "reward"),
    ("batch/solver/samples_trained", "Solver samples trained per iteration", "samples"),
    ("batch/injector/samples_trained", "Injector samples trained per iteration", "samples"),
)


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.0f}%"


def _rate(s: dict[str, Any] | None) -> str:
    if not s:
        return "–"
    lo, hi = s["ci95"]
    return f"{_pct(s['rate'])} ({s['solved']}/{s['n']}) [{_pct(lo)}, {_pct(hi)}]"


def heldout_table(results: dict[str, Any], kind: str = "evals") -> str:
    """One row per evaluated checkpoint: of the held-out tasks (`kind` "evals") or of the training stratum
    ("train_evals")."""
    lines = ["| checkpoint | weights | greedy solve (95% CI) | pass@k at the training T (95% CI) | "
             "solve per sampled episode | "
             "format-valid turns | empty/unchanged diffs | submits | failures |",
             "|---|---|---|---|---|---|---|---|---|"]
    for label, e in results.get(kind, {}).items():
        s = e["summary"]
        k = s["pass_at_k"]["k"] if s.get("pass_at_k") else None
        fails = ", ".join(f"{n} {f}" for f, n in sorted(s["failures"].items(), key=lambda x: -x[1]))
        lines.append(f"| {label} | `{e['weights']}`{' (same as above)' if e['reused'] else ''} | "
                     f"{_rate(s.get('greedy'))} | {_rate(s.get('pass_at_k'))}{f' (k={k})' if k else ''} | {_rate(s.get('sample'))} | "
                     f"{_pct(s['format_valid_turn_rate'])} | {_pct(s['empty_or_unchanged_rate'])} | "
                     f"{_pct(s['submit_rate'])} | {fails} |")
    return "\n".join(lines)


def training_table(results: dict[str, Any]) -> str:
    lines = ["| arm | iteration | solve rate | valid bugs | solver reward | injector reward | rounds | "
             "groups w/ variance | samples trained (solver/injector) | steps | loss | wall s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]

    def f(x: Any, p: bool = False) -> str:
        return "–" if x is None else (_pct(x) if p else charts.fmt(x))

    for arm, info in results["arms"].items():
        for r in info.get("curve", []):
            lines.append(f"| {arm} | {r['iteration']} | {f(r.get('solve_rate/all'), True)} | "
                         f"{f(r.get('injector/validity'), True)} | {f(r.get('reward/solver_mean'))} | "
                         f"{f(r.get('reward/injector_mean'))} | {f(r.get('rollout/solver_rounds'))} | "
                         f"{f(r.get('batch/solver/groups_with_variance'))} | "
                         f"{f(r.get('batch/solver/samples_trained'))}/{f(r.get('batch/injector/samples_trained'))} | "
                         f"{f(r.get('learner/steps'))} | {f(r.get('learner/loss'))} | {f(r.get('iteration/wall_s'))} |")
    return "\n".join(lines)


def injector_table(results: dict[str, Any]) -> str:
    """Each arm's injector episodes: valid bugs (Wilson 95%), per iteration, and how the others ended; then
    the rl arm after its first update against the control (Fisher's exact test)."""
    lines = ["| arm | injector episodes | valid bugs (95% CI) | distinct valid bugs | valid per iteration | outcomes |",
             "|---|---|---|---|---|---|"]
    for arm, info in results["arms"].items():
        inj = info.get("injectors")
        if not inj:
            continue
        per_it = ", ".join(f"{v}/{n}" for _, (v, n) in sorted(inj["by_iteration"].items(), key=lambda x: int(x[0])
                                                               if x[0].isdigit() else -1))
        outcomes = ", ".join(f"{n} {k}" for k, n in sorted(inj["outcomes"].items(), key=lambda x: -x[1]))
        k, n = inj["valid"], inj["episodes"]
        rate = {"solved": k, "n": n, "rate": k / n if n else None, "ci95": wilson(k, n)}
        lines.append(f"| {arm} | {n} | {_rate(rate)} | {inj.get('distinct_valid', '–')} | {per_it} | {outcomes} |")
    c = results.get("injector_comparison")
    tail = ("Valid bugs, rl from iteration {from_iteration} (after its first update) against the control: "
            "{rl_valid}/{rl_episodes} vs {control_valid}/{control_episodes}, Fisher's exact test one-sided "
            "p = {p_greater:.3g} (rl higher), two-sided p = {p_value:.3g}. Distinct valid bugs, whole arms: "
            "{rl_distinct}/{rl_all_episodes} vs {control_distinct}/{control_episodes}, one-sided p = "
            "{distinct_p_greater:.3g}.".format(**c) if c
            else "Valid bugs, rl against control: not compared (both arms must have injector episodes).")
    return "\n".join(lines) + "\n\n" + tail


KINDS = ("run_tests", "bash", "view", "str_replace", "str_replace_refused", "str_replace_noop", "create", "insert",
         "undo", "submit", "format_error")


def turns_table(results: dict[str, Any]) -> str:
    """Turn by turn: how many episodes took each kind of action, for each arm's training episodes and
    each held-out evaluation that recorded actions."""
    sources = [(f"{arm} ({role} training)", info[key]["turns"]) for arm, info in results["arms"].items()
               for role, key in (("solver", "solver_turns"), ("injector", "injectors")) if (info.get(key) or {}).get("turns")]
    sources += [(f"{name} {label}", e["summary"]["turns"])
                for kind, name in (("evals", "held-out"), ("train_evals", "stratum"))
                for label, e in results.get(kind, {}).items() if e["summary"].get("turns") and not e.get("reused")]
    if not sources:
        return "Turn by turn: no transcripts recorded."
    # the usual kinds always, in their order; any other kind taken (localize, missing_file) gets a column too
    seen = {k for _, table in sources for counts in table.values() for k in counts}
    kinds = KINDS + tuple(sorted(seen - set(KINDS)))
    lines = ["| episodes | turn | " + " | ".join(kinds) + " |", "|---|---|" + "---|" * len(kinds)]
    for name, table in sources:
        for turn, counts in table.items():
            lines.append(f"| {name} | {turn} | " + " | ".join(str(counts.get(k, 0)) for k in kinds) + " |")
    return "\n".join(lines)


PAIRED_NAMES = {
    "greedy": "held-out greedy, per task", "pass_at_k": "held-out pass@k, per task",
    "train_greedy": "training stratum greedy, per task", "train_pass_at_k": "training stratum pass@k, per task",
    "train_episodes": "training stratum sampled episodes, paired by task and seed",
}


def paired_line(results: dict[str, Any]) -> str:
    p = results.get("paired") or {}
    if not p:
        return "Paired test: not run (both arms must finish)."
    parts = [f"{PAIRED_NAMES.get(mode, mode)}: {int(v['only_a'])} solved only by rl, {int(v['only_b'])} only by "
             f"control, exact McNemar p = {v['p_value']:.3g}" for mode, v in p.items()]
    return "Paired tests, rl vs control at the last checkpoint: " + "; ".join(parts) + "."


def _series(results: dict[str, Any], key: str) -> dict[str, list[tuple[float, float]]]:
    return {arm: [(float(r["iteration"]), float(r[key])) for r in info.get("curve", []) if key in r]
            for arm, info in results["arms"].items()}


def heldout_series(results: dict[str, Any], metric: str,
                   kind: str = "evals") -> dict[str, list[tuple[float, float]]]:
    """Held-out (or, `kind` "train_evals", training-stratum) `metric` (greedy, pass_at_k or sample) of each
    arm by iterations trained, the start at 0."""
    evals = results.get(kind, {})
    start = evals.get("start")
    out: dict[str, list[tuple[float, float]]] = {}
    for arm in results["arms"]:
        pts = [(0.0, start["summary"][metric]["rate"])] if start and metric in start["summary"] else []
        for label, e in evals.items():
            if label.startswith(f"{arm}@") and metric in e["summary"]:
                pts.append((float(label.split("@")[1]), e["summary"][metric]["rate"]))
        out[arm] = pts
    return out


def figures(results: dict[str, Any]) -> list[str]:
    figs = [charts.line_chart(f"heldout-{m}", f"Held-out solve rate ({name}) by iterations trained",
                              heldout_series(results, m), y_label="solve rate", x_label="iterations trained",
                              y_range=(0.0, 1.0))
            for m, name in (("greedy", "greedy"), ("pass_at_k", "pass@k at the training temperature"))]
    figs += [charts.line_chart(f"train-{i}", title, _series(results, key), y_label=y)
             for i, (key, title, y) in enumerate(TRAINING_CHARTS)]
    if results.get("train_evals"):
        figs.append(charts.line_chart("stratum-sample", "Training-stratum solve rate per sampled episode, by "
                                      "iterations trained", heldout_series(results, "sample", "train_evals"),
                                      y_label="solve rate", x_label="iterations trained", y_range=(0.0, 1.0)))
    return figs


def svg_of(figure: str) -> str:
    """The standalone SVG file of a chart figure (for docs/)."""
    m = re.search(r"<svg\b.*?</svg>", figure, re.S)
    if m is None:  # `charts.empty`: a chart with no data (e.g. pass@k of a greedy-only evaluation)
        title = re.search(r"<figcaption>(.*?)</figcaption>", figure, re.S)
        label = title.group(1) if title else "chart"
        return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{charts.WIDTH}" height="40"><text x="8" y="24">'
                f"{label}: no data</text></svg>")
    svg = m.group(0)
    if "xmlns=" not in svg:
        svg = svg.replace("<svg", '<svg xmlns="http://www.w3.org/2000/svg"', 1)
    style = "<style>text{font:11px sans-serif} .tick{fill:#555} line.axis{stroke:#333} line.grid{stroke:#ddd}</style>"
    return svg.replace(">", ">" + style, 1)


def write_page(results: dict[str, Any], path: Path) -> Path:
    figs = figures(results)
    body = "\n".join(figs)
    stratum = (f"<h2>Training stratum</h2><pre>{escape(heldout_table(results, 'train_evals'))}</pre>"
               if results.get("train_evals") else "")
    tables = (f"<h2>Held-out</h2><pre>{escape(heldout_table(results))}</pre>{stratum}"
              f"<p>{escape(paired_line(results))}</p>"
              f"<h2>Training</h2><pre>{escape(training_table(results))}</pre>"
              f"<h2>Injector</h2><pre>{escape(injector_table(results))}</pre>"
              f"<h2>Turn by turn</h2><pre>{escape(turns_table(results))}</pre>")
    css_path = Path(charts.__file__).with_name("style.css")
    css = css_path.read_text() if css_path.is_file() else ""
    path.write_text("<!doctype html><html><head><meta charset='utf-8'><title>Learning experiment</title>"
                    "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; style-src 'unsafe-inline'\">"
                    f"<style>{css}</style></head><body><h1>Learning experiment: rl vs control (LR 0)</h1>"
                    f"{tables}{body}</body></html>\n")
    return path


def write_svgs(results: dict[str, Any], directory: Path, prefix: str = "learning") -> list[Path]:
    """The held-out and training-solve-rate charts as SVG files (both arms on each)."""
    directory.mkdir(parents=True, exist_ok=True)
    figs = figures(results)
    out = []
    named = [("heldout_greedy", figs[0]), ("heldout_pass_at_k", figs[1]), ("train_solve_rate", figs[2]),
             ("train_valid_bugs", figs[3])]
    if results.get("train_evals"):
        named.append(("stratum_sample", figs[-1]))
    for name, fig in named:
        p = directory / f"{prefix}_{name}.svg"
        p.write_text(svg_of(fig) + "\n")
        out.append(p)
    return out


def write_outputs(results: dict[str, Any], work: Path, svg_dir: Path | None = None) -> list[Path]:
    """table.md and index.html under `work`, the SVG charts under `svg_dir` (default `work`)."""
    work.mkdir(parents=True, exist_ok=True)
    table = work / "table.md"
    parts = [heldout_table(results)]
    if results.get("train_evals"):
        parts.append("Training stratum:\n\n" + heldout_table(results, "train_evals"))
    table.write_text("\n\n".join([*parts, paired_line(results), training_table(results),
                                  injector_table(results), turns_table(results)]) + "\n")
    return [table, write_page(results, work / "index.html"), *write_svgs(results, svg_dir or work)]
