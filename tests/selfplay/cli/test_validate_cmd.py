"""`selfplay validate --store`: a store that opens but refuses the verdict's write (a full disk, a damaged
page) is exit 2 naming the store, with the verdict still printed: minutes of validation are not lost."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from selfplay.cli import app
from selfplay.store import open_store

VALID = Path(__file__).resolve().parents[2] / "fixtures" / "artifacts" / "valid"


@pytest.mark.docker
def test_a_store_refusing_the_write_is_exit_2_and_the_verdict_is_printed(tmp_path):
    db = tmp_path / "s.db"
    with open_store(str(db)):
        pass  # a real store: schema and all
    with sqlite3.connect(db) as con:  # every insert into it now fails, as on a full disk
        for table in ("repos", "artifacts", "tasks"):
            con.execute(f"CREATE TRIGGER refuse_{table} BEFORE INSERT ON {table} "
                        "BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END")
    res = CliRunner().invoke(app, ["validate", str(VALID), "--repo", "toolz", "--store", str(db), "--json"])
    assert res.exit_code == 2, res.output
    text = " ".join(res.output.split())
    assert "the verdict was not recorded" in text and "database or disk is full" in text and "s.db" in text
    verdict = json.loads(res.output[res.output.index("{"):res.output.rindex("}") + 1])
    assert verdict["valid"] is True  # validation ran and its verdict stands
    assert "Traceback" not in res.output
