"""`selfplay tasks list/show/stats/export/import` on a real SQLite store."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from typer.testing import CliRunner

from selfplay.cli import app
from selfplay.store import open_store

sys.path.insert(0, str(Path(__file__).parents[1] / "store"))
from store_data import make_artifact, make_report


def test_tasks_commands(tmp_path):
    db = str(tmp_path / "selfplay.db")
    with open_store(db) as store:
        ids = [
            store.record_validation(make_artifact(i), "toolz", make_report(n=i), origin="injector")
            for i in (1, 2)
        ]
        store.record_attempt(
            ids[0], role="solver", policy_version=1, reward=1.0, turns=3, tokens=10, termination="submitted"
        )
    runner = CliRunner()
    res = runner.invoke(app, ["tasks", "list", "--store", db], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert ids[0] in res.output and ids[1] in res.output and "active" in res.output
    res = runner.invoke(app, ["tasks", "list", "--status", "retired", "--store", db], env={"COLUMNS": "200"})
    assert res.exit_code == 0 and "0 shown" in res.output
    res = runner.invoke(app, ["tasks", "list", "--status", "done", "--store", db], env={"COLUMNS": "200"})
    assert res.exit_code != 0 and "unknown status 'done'; use one of active, retired, invalid" in res.output
    res = runner.invoke(app, ["tasks", "show", ids[0], "--store", db], env={"COLUMNS": "200"})
    assert res.exit_code == 0 and "bug_validity" in res.output and "return x - 1" in res.output
    with open_store(db) as store:
        store.retire([ids[1]], "spec too long for the solver: a test's reason")
    res = runner.invoke(app, ["tasks", "show", ids[1], "--store", db], env={"COLUMNS": "200"})
    assert res.exit_code == 0 and "retired (spec too long for the solver: a test's reason)" in res.output
    with open_store(db) as store, open_store(str(tmp_path / "other.db")) as other:
        other.add_task(store.get_task(ids[1]))  # the reason is the store's, not the task's: not copied
        assert "retired_reason" not in other.get_task(ids[1]).metadata
        store.set_status([ids[1]], "active")
        assert "retired_reason" not in store.get_task(ids[1]).metadata
    res = runner.invoke(app, ["tasks", "show", "nope", "--store", db])
    assert res.exit_code != 0 and "no task 'nope'" in res.output
    res = runner.invoke(app, ["tasks", "stats", "--store", db], env={"COLUMNS": "200"})
    assert res.exit_code == 0 and "unseen" in res.output and "2 tasks, 1 solver attempts" in res.output
    out = tmp_path / "out.jsonl"
    res = runner.invoke(app, ["tasks", "export", "--format", "swebench", str(out), "--store", db])
    assert res.exit_code == 0 and len(out.read_text().splitlines()) == 2
    assert {json.loads(line)["instance_id"] for line in out.read_text().splitlines()} == set(ids)
    res = runner.invoke(app, ["tasks", "export", "--format", "csv", str(out), "--store", db])
    assert res.exit_code != 0 and "swebench" in res.output
    copy = str(tmp_path / "copy.db")
    res = runner.invoke(app, ["tasks", "import", str(out), "--store", copy])
    assert res.exit_code == 0 and "imported 2 new tasks" in res.output
    with open_store(copy) as st:
        assert sorted(t.task_id for t in st.list_tasks()) == sorted(ids)
