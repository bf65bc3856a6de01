"""`selfplay episode` end to end with the scripted policy in a real toolz sandbox."""

import json

import pytest
from typer.testing import CliRunner

from agent_scaffold.trajectory import load_jsonl
from selfplay.cli import app

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_episode_command_saves_trajectory_and_view(tmp_path, tokenizer):
    script = tmp_path / "script.json"
    script.write_text(json.dumps(["```bash\necho hi > NEW.txt\n```", "```submit\n```"]))
    result = CliRunner().invoke(app, ["episode", "--role", "solver", "--policy", "scripted", "--script", str(script),
                                      "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert "ended: submitted after 2 turns" in result.output
    [traj] = load_jsonl(next((tmp_path / "out").glob("solver-*.jsonl")))
    assert traj.termination == "submitted" and traj.metadata["repo"] == "toolz"
    assert "+hi" in traj.metadata["submission"]
    assert "## [2] assistant" in next((tmp_path / "out").glob("solver-*.txt")).read_text()
