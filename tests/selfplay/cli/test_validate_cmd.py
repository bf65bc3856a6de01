"""`selfplay validate`: a store that opens but refuses the verdict's write (a full disk, a damaged page) is
exit 2 naming the store, with the verdict still printed (minutes of validation are not lost); Ctrl-C ends a
validation at once, with no verdict and nothing blamed on the artifact."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
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


@pytest.mark.docker
def test_ctrl_c_mid_validation_ends_at_once_without_blaming_the_artifact(tmp_path):
    """Ctrl-C removes the sandboxes; the validation's threads must not take their dead jobs for the artifact's
    fault (a control run on a new container, "the artifact is at fault", parser-box retries)."""
    child = subprocess.Popen([sys.executable, "-c", "from selfplay.cli import main; main()", "validate", str(VALID),
                              "--repo", "toolz"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, env={**os.environ, "COLUMNS": "300"})
    deadline = time.monotonic() + 120
    while not _containers_of(child.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # the first jobs are running
    child.send_signal(signal.SIGINT)
    out, _ = child.communicate(timeout=60)
    assert child.returncode == 130, out
    assert "at fault" not in out and "control run" not in out and "parser box failed" not in out, out
    assert "removed" in out and "on shutdown" in out, out
    assert not _containers_of(child.pid)


def _containers_of(pid: int) -> set[str]:
    res = subprocess.run(["docker", "ps", "-aq", "--filter", "label=selfplay.sandbox",
                          "--filter", f"label=selfplay.owner.pid={pid}"], capture_output=True, text=True, timeout=30)
    return set(res.stdout.split())
