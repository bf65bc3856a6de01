"""`selfplay episode --role solver --artifact DIR`: the run loop's solver start, and its prediction graded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from selfplay.cli import app

pytestmark = [pytest.mark.docker, pytest.mark.slow]

VALID = Path(__file__).resolve().parents[2] / "fixtures" / "artifacts" / "valid"
FIX = ("```bash\nsed -i 's/if not predicate(k):/if predicate(k):/' toolz/dicttoolz.py && "
       "sed -i 's/d\\[item\\] += 2/d[item] += 1/' toolz/itertoolz.py && git status --short\n```")
LOOK = "```bash\ngit log --oneline | wc -l; git tag; grep -c 'not predicate' toolz/dicttoolz.py\n```"


def _episode(tmp_path: Path, name: str, actions: list[str]) -> Path:
    pytest.importorskip("transformers")
    script = tmp_path / f"{name}.json"
    script.write_text(json.dumps(actions))
    out = tmp_path / name
    res = CliRunner().invoke(app, ["episode", "--role", "solver", "--artifact", str(VALID), "--policy", "scripted",
                                   "--script", str(script), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "ended: submitted" in res.output
    assert f"turn {len(actions)}: submit" in res.output  # each turn as a line (no terminal here)
    [diff] = out.glob("solver-*.diff")
    assert diff.with_suffix(".jsonl").is_file() and diff.with_suffix(".txt").is_file()
    return diff


def test_solver_episode_from_the_buggy_state_and_its_prediction_graded(tmp_path):
    fixed = _episode(tmp_path, "fix", [LOOK, FIX, "```submit\n```"])
    idle = _episode(tmp_path, "idle", ["```submit\n```"])
    view = fixed.with_suffix(".txt").read_text()
    # the spec is the reversed weakening (it adds the deleted tests back); the state is one fresh commit
    assert "+def test_frequencies():" in view and "+    def test_keyfilter(self):" in view
    assert "\n1\nselfplay-base\n1\n" in view, view[-3000:]
    assert "-        if not predicate(k):" in fixed.read_text() and idle.read_text() == ""
    res = CliRunner().invoke(app, ["grade", str(VALID), "--repo", "toolz", "--json",
                                   "--patch", str(fixed), "--patch", str(idle)])
    assert res.exit_code == 0, res.output
    assert [o["reward"] for o in json.loads(res.stdout)] == [1, -1]
