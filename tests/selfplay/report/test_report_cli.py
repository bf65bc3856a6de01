"""`selfplay report RUN_DIR` from the command line."""

from __future__ import annotations

import report_run
from typer.testing import CliRunner

from selfplay.cli import app


def test_report_command_writes_the_page(tmp_path):
    run = report_run.write_run(tmp_path)
    result = CliRunner().invoke(app, ["report", str(run), "--max-episodes", "2"])
    assert result.exit_code == 0, result.output
    page = run / "report" / "index.html"
    assert page.is_file() and "report written to" in result.output
    assert "2 of 7 episodes are embedded" in page.read_text(encoding="utf-8")


def test_report_command_names_a_bad_directory(tmp_path):
    result = CliRunner().invoke(app, ["report", str(tmp_path)])
    assert result.exit_code == 2
    assert "not a run directory" in " ".join(result.output.split())  # rich wraps lines
