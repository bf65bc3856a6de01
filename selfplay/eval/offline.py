"""The offline SWE-bench-format dataset: tasks on the bundled repos, evaluated by the same code path as
SWE-bench Verified where no registry or hub is reachable (CI).

A fixture folder holds one sub-folder per task: `bug_inject.diff`, `test_weaken.diff`, a natural-language
`problem_statement.md`, and `tests.json` (`instance_id`, `repo`, FAIL_TO_PASS, PASS_TO_PASS). Each becomes a
`Task` whose test script runs `pytest -rA` on the weakened test files, read by the built-in pytest parser
(`selfplay.procedural.PARSER_SOURCE`), serialised by `Task.to_swebench` (through `tasks export`'s
`to_instance`, so the `selfplay_*` fields let the task image be built on demand), with the written issue as
`problem_statement`. Tasks exported by `selfplay tasks export --format swebench`
load directly as a dataset and need no builder.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from selfplay.artifact import BugArtifact
from selfplay.diffs import touched_files
from selfplay.procedural import PARSER_SOURCE
from selfplay.store.export import to_instance
from selfplay.task import Task


def task_from_folder(folder: Path) -> tuple[Task, str]:
    """(task, problem statement) of one fixture folder."""
    meta = json.loads((folder / "tests.json").read_text())
    weaken = (folder / "test_weaken.diff").read_text()
    files = touched_files(weaken)
    artifact = BugArtifact(
        test_script="#!/bin/bash\npython -m pytest -rA -p no:cacheprovider " + " ".join(files) + "\n",
        test_files=files, test_parser=PARSER_SOURCE,
        bug_inject=(folder / "bug_inject.diff").read_text(), test_weaken=weaken)
    task = Task(meta["instance_id"], meta["repo"], artifact, tuple(meta["FAIL_TO_PASS"]),
                tuple(meta["PASS_TO_PASS"]), origin="imported")
    return task, (folder / "problem_statement.md").read_text()


def build_offline_dataset(fixtures: Path, out: Path) -> list[dict[str, Any]]:
    """Write the SWE-bench-format JSONL of every task folder under `fixtures` to `out`; returns the rows."""
    rows = []
    for folder in sorted(p for p in fixtures.iterdir() if (p / "tests.json").is_file()):
        task, statement = task_from_folder(folder)
        row = to_instance(task, image=None, base_commit=None, version=None, created_at="")
        rows.append({**row, "problem_statement": statement})
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    return rows
