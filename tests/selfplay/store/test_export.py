"""SWE-bench jsonl export -> import gives the same tasks; the file loads with `datasets`; the exported
`patch` really undoes the bug."""

from __future__ import annotations

import json
import subprocess

import pytest
from store_data import make_artifact, make_report

from selfplay.store import ImportFormatError, open_store
from selfplay.store.export import export_swebench, import_swebench

PRED = (
    "diff --git a/pkg/core.py b/pkg/core.py\n--- a/pkg/core.py\n+++ b/pkg/core.py\n"
    "@@ -1,1 +1,1 @@\n-    return x + 1\n+    return 0\n"
)


def _fill(store) -> list[str]:
    store.upsert_repo("toolz", image="selfplay/toolz:1.0.0", base_commit="c0ffee", version="1.0.0")
    ids = [
        store.record_validation(
            make_artifact(i), "toolz", make_report(n=i), origin="injector", strategy="removal"
        )
        for i in range(1, 4)
    ]
    ids.append(
        store.record_validation(
            make_artifact(1),
            "toolz",
            make_report(n=1),
            origin="higher_order",
            parent_id=ids[0],
            order=2,
            pred_patch=PRED,
        )
    )
    store.retire([ids[2]], "test")
    return ids


def test_export_import_round_trip_and_datasets_load(store, tmp_path):
    ids = _fill(store)
    out = tmp_path / "tasks.jsonl"
    assert export_swebench(store, out) == 4
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    row = next(r for r in rows if r["instance_id"] == ids[0])
    assert (row["repo"], row["selfplay_repo_image"], row["selfplay_repo_base_commit"], row["version"]) == (
        "toolz",
        "selfplay/toolz:1.0.0",
        "c0ffee",
        "1.0.0",
    )
    # the instance itself is the task image with the buggy state at selfplay-base (Task.to_swebench)
    assert row["image"].startswith("selfplay-task-") and row["base_commit"] == "selfplay-base"
    assert {"eval_script", "log_parser", "eval_type"} <= set(row)
    assert json.loads(row["FAIL_TO_PASS"]) == ["tests/test_core.py::test_1"]
    assert "+    assert f(1) == 2" in row["test_patch"] and "assert f(1) == 2" in row["problem_statement"]

    with open_store(f"sqlite:///{tmp_path / 'copy.db'}") as copy:
        summary = import_swebench(copy, out)
        assert (summary.added, summary.existing) == (4, 0)
        for task_id in ids:
            assert copy.get_task(task_id) == store.get_task(task_id)
        assert {s.task_id: s.status for s in copy.task_stats()} == {
            s.task_id: s.status for s in store.task_stats()
        }
        assert copy.get_repo("toolz").image == "selfplay/toolz:1.0.0"
        assert copy.get_task(ids[0]).metadata["strategy"] == "removal"
        assert import_swebench(copy, out).existing == 4  # importing again adds nothing

    datasets = pytest.importorskip("datasets")
    ds = datasets.load_dataset("json", data_files=str(out), split="train", cache_dir=str(tmp_path / "hf"))
    assert len(ds) == 4 and set(ds["instance_id"]) == set(ids)
    assert {"patch", "test_patch", "FAIL_TO_PASS", "PASS_TO_PASS", "problem_statement", "base_commit"} <= set(
        ds.column_names
    )


def test_exported_patch_undoes_the_bug(tmp_path):
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    original = "".join(f"    return x + {i}\n" for i in range(1, 6))
    (repo / "pkg" / "core.py").write_text(original)
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t", "-C", str(repo)]
    subprocess.run(git[:5] + ["init", "-q"], check=True)
    subprocess.run(
        git + ["apply", "--unidiff-zero", "-"], input=make_artifact(3).bug_inject, text=True, check=True
    )
    assert (repo / "pkg" / "core.py").read_text() != original
    from selfplay.store.export import gold_patch
    from selfplay.task import Task

    task = Task("t", "toolz", make_artifact(3), ("a",), ())
    subprocess.run(git + ["apply", "--unidiff-zero", "-"], input=gold_patch(task), text=True, check=True)
    assert (repo / "pkg" / "core.py").read_text() == original


def test_import_rejects_a_foreign_file_naming_line_and_field(store, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"instance_id": "x", "repo": "r"}\n')
    with pytest.raises(ImportFormatError, match=r"bad.jsonl:1: missing field\(s\) FAIL_TO_PASS"):
        import_swebench(store, bad)
    bad.write_text("not json\n")
    with pytest.raises(ImportFormatError, match="bad.jsonl:1: not JSON"):
        import_swebench(store, bad)
    assert store.task_stats() == []
