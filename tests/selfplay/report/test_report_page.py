"""`build_report` over a run directory written to the contract (`report_run.py`): the plots are there with
the run's numbers, model text cannot execute, the page is bounded, and damaged input is reported, not fatal."""

from __future__ import annotations

import gzip
import html
import json
import re
from pathlib import Path

import pytest
import report_run
from report_run import HOSTILE, HOSTILE_ID, RUN_ID

from selfplay.report import EpisodeLimits, ReportError, build_report
from selfplay.report.page import embed_json

CHARTS = ("chart-solve-rate", "chart-solve-rate-repo", "chart-validity", "chart-failed-checks", "chart-rewards",
          "chart-difficulty", "chart-task-status", "chart-turns", "chart-tokens", "chart-terminations", "chart-learner", "chart-time-share")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return report_run.write_run(tmp_path_factory.mktemp("runs"))


@pytest.fixture(scope="module")
def page(run_dir) -> str:
    return build_report(run_dir).read_text(encoding="utf-8")


def figure_rows(page: str, chart_id: str) -> list[list[str]]:
    """The rows of the number table of one chart, cells unescaped."""
    m = re.search(rf'<figure class="chart" id="{chart_id}">(.*?)</figure>', page, re.S)
    assert m, f"no chart {chart_id}"
    return [[html.unescape(c) for c in re.findall(r"<t[dh]>(.*?)</t[dh]>", row)]
            for row in re.findall(r"<tr>(.*?)</tr>", m.group(1))]


def embedded(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="episode-data">(.*?)</script>', page, re.S)
    return json.loads(m.group(1))


def test_every_plot_is_an_inline_svg(page):
    for chart in CHARTS:
        assert re.search(rf'<figure class="chart" id="{chart}"><figcaption>[^<]+</figcaption><svg ', page), chart
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in page and "<link" not in page and " src=" not in page.split("<script type")[0]


def test_solve_rates_by_order_and_injector_validity(page):
    rows = figure_rows(page, "chart-solve-rate")
    assert rows[0] == ["iteration", "solver: all", "solver: order 1", "solver: order 2", "injector: valid artifacts"]
    assert rows[1] == ["1", "0.5", "0.5", "–", "0.5"]
    assert rows[2] == ["2", "0.25", "0.5", "0", "0"]
    assert figure_rows(page, "chart-solve-rate-repo")[1:] == [["1", "0.5"], ["2", "0.25"]]


def test_failed_checks_are_summed_over_the_run(page):
    assert figure_rows(page, "chart-failed-checks")[1:] == [["bug_validity", "3"], ["weakening", "1"]]
    assert figure_rows(page, "chart-failed-checks-time")[1:] == [["1", "1", "–"], ["2", "2", "1"]]


def test_reward_curves(page):
    assert figure_rows(page, "chart-rewards") == [["iteration", "injector mean", "solver mean"],
                                                   ["1", "0.2", "0"], ["2", "-0.5", "-0.5"]]


def test_difficulty_histogram_comes_from_the_store(page):
    # task A solved 1 of 4 (0.25), task B 2 of 2 (1.0: the last bin), the higher-order task never attempted
    rows = {r[0]: r[1:] for r in figure_rows(page, "chart-difficulty")[1:]}
    assert rows["0.2–0.3"] == ["1"] and rows["0.9–1.0"] == ["1"]
    assert sum(int(v[0]) for v in rows.values()) == 2
    assert "2 attempted, 1 not yet attempted, 3 in the store" in page
    assert figure_rows(page, "chart-task-status")[1:] == [["active", "3"]]
    assert ["order 2 (higher_order)", "1"] in figure_rows(page, "chart-task-order")


def test_episode_lengths_count_every_episode(page):
    turns = {r[0]: r[1:] for r in figure_rows(page, "chart-turns")}
    assert turns["turns"] == ["injector", "solver"]
    # injector turns: 3 and 1; solver turns: 2, 2, 3, 2, 0
    assert turns["0"] == ["0", "1"] and turns["1"] == ["1", "0"] and turns["2"] == ["0", "3"]
    assert turns["3"] == ["1", "1"]
    assert "(7 episodes)" in page
    ends = dict((r[0], r[1]) for r in figure_rows(page, "chart-terminations")[1:])
    assert ends == {"injector: submitted": "2", "solver: submitted": "4", "solver: sandbox_error": "1"}


def test_learner_and_time_shares(page):
    assert figure_rows(page, "chart-learner")[1:] == [["1", "0.75"], ["2", "0.5"]]  # no KL logged: no empty line
    assert figure_rows(page, "chart-time-share")[1:] == [["model", "0.5"], ["sandbox", "0.4"],
                                                          ["orchestration", "0.1"]]


def test_summary_and_metrics_tables(page):
    assert "<td>solved</td><td>2</td>" in page and "<td>learner_updates</td><td>1</td>" in page
    assert "<td>started_at</td><td>2023-11-14 22:13:20 UTC</td>" in page  # unix seconds, shown as a date
    assert '<b id="run-status">finished</b>' in page
    assert "<td>learner/loss</td><td>0.5</td><td>2</td>" in page


def test_model_text_is_data_never_markup(page):
    # exactly the page's own two script blocks; the payload's tags appear nowhere as markup
    assert page.count("<script") == 2 and page.count("</script") == 2
    assert "<img" not in page and "<!--" not in page and "<b>bold" not in page
    data = embedded(page)
    hostile = next(e for e in data["episodes"] if e["id"] == HOSTILE_ID)
    # ... and the viewer receives exactly what the model wrote
    assert hostile["messages"][3]["content"] == f"output {HOSTILE}"
    assert HOSTILE in hostile["messages"][2]["command"]
    assert hostile["grade"]["error"] == HOSTILE and hostile["submission"].endswith(f"+{HOSTILE}\n")


def test_embed_json_cannot_close_its_block():
    text = embed_json({"k": "</script><!-- \u2028 & <b>"})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == {"k": "</script><!-- \u2028 & <b>"}


def test_page_is_bounded_and_says_so(run_dir, tmp_path):
    out = build_report(run_dir, EpisodeLimits(max_episodes=3, max_text_chars=500))
    page = out.read_text(encoding="utf-8")
    data = embedded(page)
    # newest first: iteration 2's three solver episodes, the last one written first
    assert [e["id"] for e in data["episodes"]] == [f"{RUN_ID}-it2-solver-2", HOSTILE_ID, f"{RUN_ID}-it2-solver-0"]
    assert data["total"] == 7
    long_obs = data["episodes"][2]["messages"][3]["content"]
    assert long_obs.startswith("x" * 500) and "8500 more characters not shown" in long_obs
    assert "3 of 7 episodes are embedded (the newest; the plots count all of them)" in page
    assert "(7 episodes)" in page  # the plots still count every episode
    build_report(run_dir)  # leave the module's page as the other tests expect


def test_episode_budget_replaces_the_rest_with_a_marker(run_dir):
    page = build_report(run_dir, EpisodeLimits(max_episode_chars=6_000)).read_text(encoding="utf-8")
    episode = next(e for e in embedded(page)["episodes"] if e["id"] == f"{RUN_ID}-it2-solver-0")
    assert episode["messages"][-1]["role"] == "note" and "more messages not shown" in episode["messages"][-1]["content"]
    assert sum(len(m["content"]) for m in episode["messages"]) < 6_000 + 500
    build_report(run_dir)


def test_not_a_run_directory(tmp_path):
    with pytest.raises(ReportError, match="not a directory"):
        build_report(tmp_path / "nope")
    with pytest.raises(ReportError, match="summary.json, metrics.jsonl, config.yaml, trajectories"):
        build_report(tmp_path)


def test_damaged_run_still_reports_what_it_can(tmp_path):
    run = report_run.write_run(tmp_path)
    with (run / "metrics.jsonl").open("a") as fh:
        fh.write('{"iteration": 3, "solve_rate/al')  # a write cut by kill -9
    gz = run / "trajectories" / "it00002-solver.jsonl.gz"
    gz.write_bytes(gz.read_bytes()[:-40])  # the trailing gzip member cut short
    with gzip.open(run / "trajectories" / "it00003-solver.jsonl.gz", "wt") as fh:
        fh.write("not json\n")
    (run / "store.db").unlink()
    summary = json.loads((run / "summary.json").read_text())
    (run / "summary.json").write_text(json.dumps({**summary, "status": "failed", "error": f"boom {HOSTILE}"}))
    page = build_report(run).read_text(encoding="utf-8")
    problems = re.search(r'<div class="problems" id="problems">(.*?)</div>', page, re.S).group(1)
    assert "metrics.jsonl: 1 line(s) skipped" in problems
    assert "it00002-solver.jsonl.gz cut short" in problems
    assert "it00003-solver.jsonl.gz line 1 skipped" in problems
    assert "no store" in problems
    assert "Curriculum difficulty: no store" in page
    assert f'<p class="fail" id="run-error">error: boom {html.escape(HOSTILE)}</p>' in page
    assert page.count("<script") == 2 and "<img" not in page
    ids = [e["id"] for e in embedded(page)["episodes"]]
    assert f"{RUN_ID}-it2-solver-0" in ids and f"{RUN_ID}-it1-injector-0" in ids  # the rest survived


def test_store_named_by_store_url(tmp_path):
    run = report_run.write_run(tmp_path / "runs")
    elsewhere = tmp_path / "shared" / "curriculum.db"
    elsewhere.parent.mkdir()
    (run / "store.db").rename(elsewhere)
    (run / "config.yaml").write_text(f"name: fixture\nstore_url: sqlite:///{elsewhere}\n")
    page = build_report(run).read_text(encoding="utf-8")
    assert f"store: <code>sqlite:///{elsewhere}</code>" in page
    assert "3 in the store" in page


def test_unreadable_config_is_reported(tmp_path):
    run = report_run.write_run(tmp_path)
    (run / "config.yaml").write_text("name: [unclosed\n")
    page = build_report(run).read_text(encoding="utf-8")
    assert "config.yaml is unreadable" in page
    assert "3 in the store" in page  # store.db inside the run directory is still found
