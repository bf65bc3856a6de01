"""`selfplay episode`: bad choices and scripts are named with exit 2 before a sandbox starts or a file is
written (the episode itself: test_episode_cmd.py, with Docker)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from selfplay.cli import app


def _episode(tmp_path, *args: str):
    res = CliRunner().invoke(app, ["episode", "--policy", "scripted", "--out", str(tmp_path / "out"), *args],
                             env={"COLUMNS": "400"})
    assert not (tmp_path / "out").exists(), "an episode ran"
    return res.exit_code, " ".join(res.output.split())


@pytest.mark.parametrize(("args", "names"), [
    (("--role", "injector", "--strategy", "bogus"), "removal, history, direct, kit"),
    (("--role", "solver", "--strategy", "removal"), "only the injector takes a strategy"),
    # the error lists what --help offers
    (("--role", "solver", "--spec-kind", "bogus"), "auto, weaken, tests, issue"),
])
def test_a_bad_choice_lists_the_valid_ones(tmp_path, args, names):
    code, out = _episode(tmp_path, *args)
    assert code == 2, out
    assert args[2] in out and names in out


def test_spec_kind_help_lists_every_accepted_kind():
    res = CliRunner().invoke(app, ["episode", "--help"], env={"COLUMNS": "400"})
    assert "auto, weaken, tests, issue" in " ".join(res.output.split())


@pytest.mark.parametrize(("content", "names"), [
    (json.dumps({"actions": ["```submit\n```"]}), "holds a JSON dict, not a non-empty list of strings"),
    (json.dumps([]), "holds a JSON list, not a non-empty list of strings"),
    (json.dumps(["ok", 3]), "not a non-empty list of strings"),
    ('["```submit\\n```",', "is not JSON"),
])
def test_a_script_that_is_not_a_list_of_actions_is_named(tmp_path, content, names):
    script = tmp_path / "script.json"
    script.write_text(content)
    code, out = _episode(tmp_path, "--role", "solver", "--script", str(script))
    assert code == 2, out
    assert "--script" in out and str(script) in out and names in out


def test_a_missing_script_is_named(tmp_path):
    code, out = _episode(tmp_path, "--role", "solver", "--script", str(tmp_path / "missing.json"))
    assert code == 2, out
    assert "missing.json" in out and "does not exist" in out


def test_a_script_for_another_policy_is_refused_not_ignored(tmp_path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps(["```submit\n```"]))
    res = CliRunner().invoke(app, ["episode", "--policy", "openai", "--role", "solver", "--script", str(script),
                                   "--out", str(tmp_path / "out")], env={"COLUMNS": "400"})
    out = " ".join(res.output.split())
    assert res.exit_code == 2 and "--script replays actions for --policy scripted only" in out, out
    assert not (tmp_path / "out").exists()
