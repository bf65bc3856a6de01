"""`selfplay tasks import` trusts nothing but the shape of its file (docs/security.md, class 8): each entry passes
validation's format check, a higher-order entry's failed prediction passes the test-infrastructure filter
untouched, and one bad entry rejects the whole file (nothing is written)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from selfplay.cli import app
from selfplay.store import open_store

sys.path.insert(0, str(Path(__file__).parents[1] / "store"))
from store_data import make_artifact, make_report

CONFTEST = ("diff --git a/conftest.py b/conftest.py\nnew file mode 100644\n--- /dev/null\n+++ b/conftest.py\n"
            "@@ -0,0 +1 @@\n+import os\n")
CODE = "diff --git a/pkg/util.py b/pkg/util.py\n--- a/pkg/util.py\n+++ b/pkg/util.py\n@@ -1 +1 @@\n-a = 1\n+a = 2\n"


def _export(tmp_path: Path) -> list[dict]:
    db = str(tmp_path / "src.db")
    with open_store(db) as st:
        for i in (1, 2, 3):
            st.record_validation(make_artifact(i), "toolz", make_report(n=i), origin="injector")
    out = tmp_path / "export.jsonl"
    assert CliRunner().invoke(app, ["tasks", "export", str(out), "--store", db]).exit_code == 0
    return [json.loads(line) for line in out.read_text().splitlines()]


def _artifact_edit(**files):
    def edit(rec):
        rec["selfplay_artifact"] = json.dumps({**json.loads(rec["selfplay_artifact"]), **files})
    return edit


def _drop_file(name):
    def edit(rec):
        files = json.loads(rec["selfplay_artifact"])
        del files[name]
        rec["selfplay_artifact"] = json.dumps(files)
    return edit


def _set(**fields):
    return lambda rec: rec.update(fields)


BAD_ENTRIES = {
    "parser not python": (_artifact_edit(**{"test_parser.py": "def (:\n"}), "test_parser.py is not valid Python"),
    "file missing": (_drop_file("test_weaken.diff"), "missing test_weaken.diff"),
    "absolute test path": (_artifact_edit(**{"test_files.txt": ["/etc/passwd"]}), "must be relative to the repo root"),
    "empty bug": (_artifact_edit(**{"bug_inject.diff": ""}), "bug_inject.diff is empty"),
    "file not text": (_artifact_edit(**{"test_script.sh": 7}), "test_script.sh in selfplay_artifact must be text"),
    "no FAIL_TO_PASS": (_set(FAIL_TO_PASS="[]"), "FAIL_TO_PASS is empty"),
    "prediction with conftest": (_set(selfplay_pred_patch=CODE + CONFTEST, selfplay_order=2),
                                 "selfplay_pred_patch would lose sections"),
    "prediction not a diff": (_set(selfplay_pred_patch="trust me", selfplay_order=2), "selfplay_pred_patch"),
    "order not a number": (_set(selfplay_order="two"), "selfplay_order must be a whole number from 1"),
    "order zero": (_set(selfplay_order=0), "selfplay_order must be a whole number from 1"),
    "id not text": (_set(instance_id=123), "instance_id must be a non-empty string, not 123"),
    "repo not text": (_set(repo=["toolz"]), "repo must be a non-empty string"),
    "unknown status": (_set(selfplay_status="done"), "selfplay_status must be one of active, retired, invalid"),
    "unknown origin": (_set(selfplay_origin="alien"), "selfplay_origin must be one of"),
    "parent not text": (_set(selfplay_parent_id=7), "selfplay_parent_id must be a string or null"),
}


@pytest.mark.parametrize("case", BAD_ENTRIES, ids=str)
def test_a_bad_entry_is_named_and_nothing_is_imported(tmp_path, case):
    edit, message = BAD_ENTRIES[case]
    recs = _export(tmp_path)
    edit(recs[1])  # the second line: the first one is fine and must not be written either
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    copy = str(tmp_path / "copy.db")
    res = CliRunner().invoke(app, ["tasks", "import", str(path), "--store", copy], env={"COLUMNS": "400"})
    flat = " ".join(res.output.split())
    assert res.exit_code != 0 and message in flat, flat
    assert f"bad.jsonl:2 ({recs[1]['instance_id']})" in flat and "nothing from" in flat
    with open_store(copy) as st:
        assert st.list_tasks() == []


def test_a_clean_higher_order_prediction_is_imported(tmp_path):
    recs = _export(tmp_path)
    recs[1].update(selfplay_pred_patch=CODE, selfplay_order=2)
    path = tmp_path / "ok.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    res = CliRunner().invoke(app, ["tasks", "import", str(path), "--store", str(tmp_path / "copy.db")])
    assert res.exit_code == 0 and "imported 3 new tasks" in res.output, res.output


def test_a_line_that_is_not_a_json_object_is_named(tmp_path):
    recs = _export(tmp_path)
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(recs[0]) + "\n[1, 2]\n")
    copy = str(tmp_path / "copy.db")
    res = CliRunner().invoke(app, ["tasks", "import", str(path), "--store", copy], env={"COLUMNS": "400"})
    flat = " ".join(res.output.split())
    assert res.exit_code == 2 and "bad.jsonl:2: a JSON list, not an object" in flat, flat
    assert not Path(copy).exists()
