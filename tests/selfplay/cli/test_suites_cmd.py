"""`selfplay repos test`: the per-repo suite check (each repo's tests in its image)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from selfplay.cli import app

runner = CliRunner()


def test_unknown_repo_exits_2_listing_valid_names():
    result = runner.invoke(app, ["repos", "test", "--repo", "no-such-repo"])
    assert result.exit_code == 2
    assert "no-such-repo" in result.output and "toolz" in result.output


@pytest.mark.docker
@pytest.mark.slow
def test_repos_test_builds_and_runs_the_toolz_suite(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    result = runner.invoke(app, ["repos", "test", "--repo", "toolz"])
    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if line.startswith("│ toolz"))
    assert "187" in row and "ok" in row and "selfplay-repo-toolz:" in row
    assert "1/1 repo suites passed" in result.output
