"""`distinct_bugs` counts an arm's valid bugs as bugs: a repeated task id once, and tasks that are one bug
in other words (`same_bug`) once, read from a real SQLite store."""

from __future__ import annotations

from selfplay.experiment.arms import distinct_bugs
from selfplay.store import open_store
from tests.selfplay.test_bug_site import one_line, task


def test_repeated_and_reworded_bugs_count_once(tmp_path):
    db = tmp_path / "store.db"
    fail, failed, other = task(one_line("fail")), task(one_line("failed")), task(one_line("fail", line=40))
    with open_store(f"sqlite:///{db}") as store:
        for t in (fail, failed, other):
            store.add_task(t)
    ids = [fail.task_id, fail.task_id, failed.task_id, other.task_id]
    assert distinct_bugs(db, ids) == 2
    assert distinct_bugs(db, [*ids, "not-in-the-store"]) == 3  # an unknown id is its own bug
    assert distinct_bugs(tmp_path / "none.db", ids) == 3  # no store: distinct ids
