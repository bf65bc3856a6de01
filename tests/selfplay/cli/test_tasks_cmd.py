"""`selfplay tasks list/show/stats/export/import` on a real SQLite store."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

from typer.testing import CliRunner

from selfplay.cli import app
from selfplay.cli.failure import exit_code, message
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


def _store_of_two(tmp_path) -> str:
    db = str(tmp_path / "selfplay.db")
    with open_store(db) as store:
        for i in (1, 2):
            store.record_validation(make_artifact(i), "toolz", make_report(n=i), origin="injector")
    return db


def _run(*args: str) -> tuple[int, str]:
    """(exit code, output on one line) as `selfplay` itself ends: an exception no command turned into an exit
    code goes through `failure`, as in `selfplay.cli.main`."""
    res = CliRunner().invoke(app, list(args), env={"COLUMNS": "400"})
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        return exit_code(res.exception), " ".join((res.output + message(res.exception)).split())
    return res.exit_code, " ".join(res.output.split())


def test_export_from_a_corrupted_store_keeps_the_output_file(tmp_path):
    db = str(tmp_path / "big.db")
    with open_store(db) as store:
        for i in range(1, 40):
            store.record_validation(make_artifact(i), "toolz", make_report(n=i), origin="injector")
    with open(db, "r+b") as fh:  # pages 3-10 overwritten: the schema page survives, table pages do not
        fh.seek(4096 * 3)
        fh.write(b"\xa5" * 4096 * 8)
    keep = tmp_path / "keep.jsonl"
    keep.write_text('{"precious": 1}\n')
    code, out = _run("tasks", "export", "--store", db, str(keep))
    assert code == 2 and "big.db is corrupted (database disk image is malformed)" in out, out
    assert keep.read_text() == '{"precious": 1}\n'
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_read_commands_refuse_a_database_that_is_not_a_store(tmp_path):
    empty = tmp_path / "empty.db"
    empty.touch()
    code, out = _run("tasks", "list", "--store", str(empty))
    assert code == 2 and "empty.db is empty, not a selfplay store" in out, out
    assert empty.stat().st_size == 0
    other = tmp_path / "o3.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE foo (x)")
    conn.close()
    code, out = _run("tasks", "stats", "--store", str(other))
    assert code == 2 and "o3.db is not a selfplay store (it has tables: foo)" in out, out
    code, out = _run("tasks", "import", str(_export_file(tmp_path)), "--store", str(other))
    assert code == 2 and "o3.db is not a selfplay store" in out, out
    conn = sqlite3.connect(other)
    assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master")] == ["foo"]
    conn.close()


def _export_file(tmp_path) -> Path:
    out = tmp_path / "export.jsonl"
    assert _run("tasks", "export", str(out), "--store", _store_of_two(tmp_path))[0] == 0
    return out


def test_export_checks_its_selection_and_never_empties_a_file(tmp_path):
    db = _store_of_two(tmp_path)
    out = tmp_path / "x.jsonl"
    code, text = _run("tasks", "export", "--status", "bogus", str(out), "--store", db)
    assert code == 2 and "unknown status 'bogus'; use one of active, retired, invalid" in text, text
    assert not out.exists()
    out.write_text("kept\n")
    code, text = _run("tasks", "export", "--repo", "nosuch", str(out), "--store", db)
    assert code == 2 and "no task in" in text and "matches repo 'nosuch'" in text and "left as it was" in text
    assert out.read_text() == "kept\n"
    fresh = tmp_path / "fresh.jsonl"
    code, text = _run("tasks", "export", "--repo", "nosuch", str(fresh), "--store", db)
    assert code == 0 and "wrote 0 tasks" in text and "no stored task matches" in text, text
    assert fresh.read_text() == ""
    code, text = _run("tasks", "export", str(out), "--store", db)  # a real export does replace the file
    assert code == 0 and len(out.read_text().splitlines()) == 2


def test_list_refuses_a_negative_limit(tmp_path):
    code, text = _run("tasks", "list", "--limit", "-1", "--store", _store_of_two(tmp_path))
    assert code == 2 and "--limit" in text, text


def test_import_of_a_file_without_tasks_is_an_error_and_makes_no_store(tmp_path):
    empty = tmp_path / "none.jsonl"
    empty.write_text("\n\n")
    code, text = _run("tasks", "import", str(empty), "--store", str(tmp_path / "new.db"))
    assert code == 2 and "none.jsonl holds no tasks" in text and "nothing from" in text, text
    assert not (tmp_path / "new.db").exists()
