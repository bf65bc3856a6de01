"""A held-out split never holds a task the measured warm start was built on: `shown_task_ids` reads a real
warm start store (SQLite), and `heldout_tasks` skips those ids when seeding and drops them from a listed
split. Seeding is replaced by a documented test double (the real seeding needs Docker and is exercised by
the experiment's Docker tests); the artifacts, task ids, store and tasks.json are real."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

from selfplay.artifact import BugArtifact, save_artifact
from selfplay.experiment import heldout
from selfplay.experiment.heldout import heldout_tasks, shown_task_ids
from selfplay.store import open_store
from selfplay.task import Task, make_task_id
from tests.selfplay.store.store_data import make_artifact, make_report


@dataclass(frozen=True)
class Seeded:
    """What `cached_seed` returns per bug: the fields heldout_tasks reads."""

    artifact: BugArtifact
    report: object
    directory: Path


def _warm_start(tmp_path: Path, artifacts: list[BugArtifact]) -> Path:
    """A warm start's cache directory: its store.db holding `artifacts`' tasks, and the model beside it."""
    root = tmp_path / "warm_start" / "key"
    (root / "model-abc").mkdir(parents=True)
    with open_store(str(root / "store.db")) as store:
        for a in artifacts:
            store.add_task(Task(make_task_id("toolz", a), "toolz", a, ("t::a",), ("t::b",)))
    return root / "model-abc"


def test_shown_task_ids_reads_the_store_beside_a_warm_start_model(tmp_path):
    shown = [make_artifact(1), make_artifact(2)]
    model = _warm_start(tmp_path, shown)
    assert shown_task_ids([model]) == {make_task_id("toolz", a) for a in shown}
    plain = tmp_path / "checkpoints" / "v1"  # an RL checkpoint: no store beside it
    plain.mkdir(parents=True)
    assert shown_task_ids([plain]) == frozenset()
    assert shown_task_ids([plain, model]) == shown_task_ids([model])


def test_heldout_tasks_skip_and_drop_the_warm_starts_tasks(tmp_path, monkeypatch, caplog):
    arts = [make_artifact(n) for n in range(1, 5)]
    dirs = [save_artifact(a, tmp_path / "bugs" / str(i)) for i, a in enumerate(arts)]
    seeded = [Seeded(a, make_report(n=i), d) for i, (a, d) in enumerate(zip(arts, dirs, strict=True))]
    monkeypatch.setattr(heldout, "cached_seed", lambda spec, k, **kw: (seeded, False))
    monkeypatch.setattr(heldout, "repo_image", lambda spec: "image")
    monkeypatch.setattr(heldout, "fits", lambda task, tokenizer: True)
    model = _warm_start(tmp_path, [arts[0]])
    ids = [make_task_id("toolz", a) for a in arts]

    work = tmp_path / "work"
    tasks = heldout_tasks(["toolz"], 2, 0, work, None, exclude=shown_task_ids([model]))
    assert [t.task_id for _, t in tasks] == ids[1:3]  # the shown bug is skipped; the next ones fill n
    assert [e["task_id"] for e in json.loads((work / "tasks.json").read_text())] == ids[1:3]

    # a split listed before the checkpoint was known: its shown task is dropped, loudly
    monkeypatch.setattr(heldout, "cached_seed", lambda spec, k, **kw: (_ for _ in ()).throw(AssertionError))
    caplog.set_level(logging.WARNING, logger=heldout.__name__)
    again = heldout_tasks(["toolz"], 2, 0, work, None, exclude={ids[2]})
    assert [t.task_id for _, t in again] == [ids[1]]
    assert "1 of its 2 held-out tasks are in the measured warm start's store" in caplog.text
    assert ids[2] in caplog.text
    assert [t.task_id for _, t in heldout_tasks(["toolz"], 2, 0, work, None)] == ids[1:3]


def test_a_split_seeded_from_a_users_repo_list_reads_back_from_it(tmp_path, monkeypatch):
    """tasks.json records the repo list that named its repos, so a later process (a resume, a recheck, a
    report) reads the split back from that list without being told it again."""
    from repos.listfile import DEFAULT_LIST

    (tmp_path / "mine").mkdir()
    listed = tmp_path / "my_repos.toml"
    listed.write_text(Path(DEFAULT_LIST).read_text() + '\n[[repo]]\nname = "mine"\nsource = "local"\n'
                      'path = "mine"\ntest_command = "python -m pytest -rA"\n')
    arts = [make_artifact(n) for n in range(1, 3)]
    seeded = [Seeded(a, make_report(n=i), save_artifact(a, tmp_path / "bugs" / str(i))) for i, a in enumerate(arts)]
    specs = []
    monkeypatch.setattr(heldout, "cached_seed", lambda spec, k, **kw: (specs.append(spec), (seeded, False))[1])
    monkeypatch.setattr(heldout, "repo_image", lambda spec: "image")
    monkeypatch.setattr(heldout, "fits", lambda task, tokenizer: True)
    work = tmp_path / "work"
    tasks = heldout_tasks(["mine"], 2, 0, work, None, repo_list=listed)
    assert [sp.name for sp, _ in tasks] == ["mine", "mine"] and specs[0].path == str(tmp_path / "mine")
    assert {e["repo_list"] for e in json.loads((work / "tasks.json").read_text())} == {str(listed.resolve())}
    monkeypatch.setattr(heldout, "cached_seed", lambda spec, k, **kw: (_ for _ in ()).throw(AssertionError))
    again = heldout_tasks((), 0, 0, work, None)  # as `--arm recheck` reads it: no list given
    assert [(sp, t.task_id) for sp, t in again] == [(sp, t.task_id) for sp, t in tasks]
