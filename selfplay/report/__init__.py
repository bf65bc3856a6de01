"""`selfplay report RUN_DIR`: one self-contained HTML page about a self-play run.

    from selfplay.report import build_report
    page = build_report("runs/selfplay-20260101-000000")   # runs/.../report/index.html

The page has no network access and runs no model text: plots are inline SVG drawn here, episode data is
JSON in a non-executed script block (every `<`, `>` and `&` escaped), the viewer script renders it with
`textContent` only, and a Content-Security-Policy allows exactly the page's own script and style.
"""

from selfplay.report.episodes import EpisodeLimits
from selfplay.report.errors import ReportError
from selfplay.report.page import build_report, render_page
from selfplay.report.run_data import RunData, load_run

__all__ = ["EpisodeLimits", "ReportError", "RunData", "build_report", "load_run", "render_page"]
