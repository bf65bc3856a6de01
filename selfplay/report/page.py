"""The report page: `build_report(run_dir)` writes `run_dir/report/index.html`.

Model text is hostile, so the page treats it as data only: episodes travel as JSON inside a
`<script type="application/json">` block (never executed) with `<`, `>`, `&` and the JavaScript line
separators escaped as `\\uXXXX`, so no text can close the block; `viewer.js` renders every value with
`textContent`, never as markup; and a Content-Security-Policy admits exactly the page's own script and style
by hash, so even markup that slipped through could not run a script or load anything.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import logging
import os
from html import escape
from importlib import resources
from pathlib import Path
from typing import Any

from selfplay.report import sections
from selfplay.report.episodes import EpisodeLimits
from selfplay.report.run_data import RunData, load_run

log = logging.getLogger(__name__)
JSON_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def build_report(run_dir: str | Path, limits: EpisodeLimits | None = None) -> Path:
    """Read the run in `run_dir` and write its report; returns the path of `report/index.html`."""
    run = load_run(run_dir, limits)
    out = run.run_dir / "report" / "index.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".html.tmp")
    tmp.write_text(render_page(run, limits or EpisodeLimits()), encoding="utf-8")
    os.replace(tmp, out)  # a reader never sees half a page
    log.debug("report of %s written to %s", run.run_id, out)
    return out


def embed_json(data: Any) -> str:
    """`data` as JSON that is inert inside an HTML `<script>` block (no `</script>`, no `<!--`)."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return "".join(JSON_ESCAPES.get(ch, ch) for ch in text)


def render_page(run: RunData, limits: EpisodeLimits) -> str:
    css = _asset("style.css")
    js = _asset("viewer.js")
    eps = run.episodes
    data = {"run_id": run.run_id, "episodes": list(eps.records), "total": len(eps.summaries),
            "limits": {"max_episodes": limits.max_episodes, "max_text_chars": limits.max_text_chars,
                       "max_episode_chars": limits.max_episode_chars}}
    csp = (f"default-src 'none'; script-src '{_sha256(js)}'; style-src '{_sha256(css)}'; "
           "base-uri 'none'; form-action 'none'")
    title = escape(run.run_id)
    body = "".join([
        _header(run),
        _section("summary", "Summary", sections.summary_table(run) + sections.latest_metrics(run)
                 + _problems(run)),
        _section("solve-rate", "Solve rate", sections.solve_rates(run)),
        _section("injector", "Injector validity", sections.injector(run)),
        _section("rewards", "Rewards", sections.rewards(run)),
        _section("curriculum", "Curriculum", sections.difficulty(run)),
        _section("lengths", "Episode lengths", sections.lengths(run)),
        _section("learner", "Learner and time", sections.learner(run)),
        _section("viewer", "Trajectories", _viewer(run, limits)),
    ])
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>selfplay report: {title}</title><style>{css}</style></head>\n<body>{body}\n"
            f'<script type="application/json" id="episode-data">{embed_json(data)}</script>\n'
            f"<script>{js}</script>\n</body></html>\n")


def _header(run: RunData) -> str:
    generated = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    status = escape(str(run.summary.get("status", "unknown")))
    error = run.summary.get("error")
    return (f'<header><h1>Self-play run <span id="run-id">{escape(run.run_id)}</span></h1>'
            f'<p>status <b id="run-status">{status}</b> · report generated {generated} from '
            f'<code>{escape(str(run.run_dir))}</code> · store: <code>{escape(run.store)}</code></p>'
            + (f'<p class="fail" id="run-error">error: {escape(str(error))}</p>' if error else "")
            + '<nav><a href="#summary">summary</a> <a href="#solve-rate">solve rate</a> '
            '<a href="#injector">injector</a> <a href="#rewards">rewards</a> <a href="#curriculum">curriculum</a> '
            '<a href="#lengths">episode lengths</a> <a href="#learner">learner</a> <a href="#viewer">trajectories</a></nav></header>')


def _viewer(run: RunData, limits: EpisodeLimits) -> str:
    eps = run.episodes
    shown, total = len(eps.records), len(eps.summaries)
    note = (f"{shown} of {total} episodes are embedded" + (" (the newest; the plots count all of them)"
                                                            if shown < total else "")
            + f". Each text is cut after {limits.max_text_chars:,} characters and each episode after "
            f"{limits.max_episode_chars:,} characters of messages, with a marker saying how much was left out"
            + (f" ({eps.cut_texts} texts were cut)." if eps.cut_texts else " (none was cut)."))
    return (f'<p class="note" id="viewer-limits">{escape(note)}</p>'
            '<p id="viewer-status">The trajectory viewer needs JavaScript.</p>'
            '<div id="filters" class="filters">'
            '<label>role <select id="filter-role"><option value="">all</option></select></label>'
            '<label>repo <select id="filter-repo"><option value="">all</option></select></label>'
            '<label>reward <select id="filter-reward"><option value="">any</option>'
            '<option value="positive">&gt; 0</option><option value="nonpositive">&le; 0</option>'
            '<option value="none">none (infra failure)</option></select></label>'
            '<label>search <input id="filter-text" type="search" placeholder="id, task, termination"></label>'
            '</div><div class="viewer"><div class="list"><table id="episode-list" class="data"><thead><tr>'
            "<th>episode</th><th>iter</th><th>role</th><th>repo</th><th>reward</th><th>end</th><th>turns</th><th>tokens</th>"
            '</tr></thead><tbody></tbody></table></div>'
            '<article id="episode-view" hidden></article></div>')


def _problems(run: RunData) -> str:
    if not run.problems:
        return ""
    items = "".join(f"<li>{escape(p)}</li>" for p in run.problems)
    return f'<div class="problems" id="problems"><h3>Not everything could be read</h3><ul>{items}</ul></div>'


def _section(anchor: str, title: str, content: str) -> str:
    return f'<section id="{anchor}"><h2>{escape(title)}</h2>{content}</section>\n'


def _asset(name: str) -> str:
    return resources.files("selfplay.report").joinpath(name).read_text(encoding="utf-8")


def _sha256(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")
