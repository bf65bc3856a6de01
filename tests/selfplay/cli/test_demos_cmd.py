"""`selfplay demos`: bad counts are named with exit 2 before the store is made (the demonstrations
themselves: tests/selfplay/demos, with Docker)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from selfplay.cli import app


@pytest.mark.parametrize(("flag", "value"), [("-n", "0"), ("--per-task", "0"), ("--max-context", "0")])
def test_a_bad_count_is_named_and_no_store_is_made(tmp_path, flag, value):
    res = CliRunner().invoke(app, ["demos", "--repo", "toolz", "--store", str(tmp_path / "d.db"),
                                   "--out", str(tmp_path / "out"), flag, value])
    assert res.exit_code == 2, res.output
    assert flag in res.output
    assert list(tmp_path.iterdir()) == []
