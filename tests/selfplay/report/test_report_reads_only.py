"""A report reads a run and writes nothing into it: an older store.db keeps its schema revision (no
in-place migration) and a run without a store gets no empty one."""

from __future__ import annotations

from selfplay.report.run_data import load_run
from selfplay.store.engine import current_revision, make_engine, migrate, resolve_url


def test_report_leaves_an_older_store_unmigrated(tmp_path):
    run = tmp_path / "run-1"
    run.mkdir()
    (run / "config.yaml").write_text("name: run\n")
    engine = make_engine(resolve_url(str(run / "store.db")))
    migrate(engine, "0003")
    engine.dispose()
    load_run(run)
    engine = make_engine(resolve_url(str(run / "store.db")))
    assert current_revision(engine) == "0003"
    engine.dispose()


def test_report_of_a_run_without_a_store_makes_none(tmp_path):
    run = tmp_path / "run-2"
    run.mkdir()
    (run / "config.yaml").write_text("name: run\n")
    data = load_run(run)
    assert not (run / "store.db").exists() and any("no store" in p for p in data.problems)
