"""`selfplay repos list/build` and the interim `selfplay run`, through the real CLI app."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from selfplay.cli import app
from selfplay.cli.suites_cmd import pytest_counts

runner = CliRunner()


def test_pytest_counts_reads_the_summary_line():
    out = "PASSED a\nFAILED b\n==== 2 failed, 10 passed, 1 skipped, 3 errors in 0.52s ====\n"
    assert pytest_counts(out) == {"failed": 2, "passed": 10, "skipped": 1, "errors": 3}
    assert pytest_counts("187 passed, 1 skipped in 0.74s") == {"passed": 187, "skipped": 1}
    assert pytest_counts("ImportError: no module named x\n") == {}


def test_unknown_repo_name_exits_2_listing_valid_names():
    result = runner.invoke(app, ["repos", "build", "no-such-repo"])
    assert result.exit_code == 2
    assert "no-such-repo" in result.output and "toolz" in result.output


def test_malformed_list_file_is_reported(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[[repo]]\nname = "x"\nsource = "pypi"\n')
    result = runner.invoke(app, ["repos", "list", "--list", str(bad)])
    assert result.exit_code == 2 and "'version'" in result.output


@pytest.mark.docker
def test_repos_list_shows_every_default_repo(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    result = runner.invoke(app, ["repos", "list"])
    assert result.exit_code == 0, result.output
    for name in ("toolz", "boltons", "inflection"):
        assert name in result.output
    assert "toolz==1.2.0 (history 3)" in result.output
