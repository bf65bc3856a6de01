"""Dataset loading and normalisation: derived fields, FAIL_TO_PASS/PASS_TO_PASS decoding, image names,
the verified-50 subset, and clear errors for unknown ids and missing files (no Docker)."""

from __future__ import annotations

import json
import re

import pytest

from selfplay.eval.dataset import image_name, load_instances, normalise, verified_50
from selfplay.eval.errors import EvalError

pytest.importorskip("swebench")

ROW = {"instance_id": "django__django-11099", "repo": "django/django", "version": "3.0",
       "base_commit": "abc", "problem_statement": "UsernameValidator allows trailing newline",
       "FAIL_TO_PASS": '["test_a (auth_tests.T)"]', "PASS_TO_PASS": ["test_b (auth_tests.T)"],
       "eval_script": "#!/bin/bash\nset -uxo pipefail\n: '>>>>> Start Test Output'\n./tests/runtests.py\n"
                      ": '>>>>> End Test Output'\n"}


def test_normalise_derives_image_parser_and_eval_type_and_decodes_test_lists():
    inst = normalise(ROW)
    assert inst["image"] == "swebench/sweb.eval.x86_64.django_1776_django-11099:latest"
    assert inst["log_parser"] == "parse_log_django" and inst["eval_type"] == "pass_and_fail"
    assert inst["FAIL_TO_PASS"] == ["test_a (auth_tests.T)"] and inst["PASS_TO_PASS"] == ["test_b (auth_tests.T)"]
    from swebench.harness.utils import make_test_spec

    spec = make_test_spec(inst)  # everything swebench 5.x requires is there
    assert spec.FAIL_TO_PASS == ["test_a (auth_tests.T)"] and "Test Exit Code" in spec.eval_script


def test_namespace_rewrites_official_images_only():
    assert normalise({**ROW, "image": "x"}, namespace="epoch")["image"] == \
        "ghcr.io/epoch-research/swe-bench.eval.x86_64.django__django-11099:latest"
    assert image_name("sympy__sympy-20590", "logicstar") == "logicstar/sweb.eval.x86_64.sympy_1776_sympy-20590:latest"
    assert image_name("a__B-1", "mirror.local/{id_1776}:v1") == "mirror.local/a_1776_b-1:v1"
    ours = {**ROW, "image": "selfplay-task-t:abc"}
    assert normalise(ours, namespace="epoch")["image"] == "selfplay-task-t:abc"
    with pytest.raises(EvalError, match="unknown image namespace 'nope'"):
        image_name("a__b-1", "nope")


def test_missing_eval_script_and_bad_test_lists_are_clear_errors():
    with pytest.raises(EvalError, match="django__django-11099 has no eval_script.*swebench==4.1.0"):
        normalise({**ROW, "eval_script": ""})
    with pytest.raises(EvalError, match="FAIL_TO_PASS is a string but not JSON"):
        normalise({**ROW, "FAIL_TO_PASS": "[oops"})


@pytest.mark.parametrize("iid", ["../../../ESCAPED", "a/b", ".hidden", "-x", "", 123])
def test_an_instance_id_that_would_name_a_path_outside_is_refused(iid):
    """The id names files under --out and the image: `../../../ESCAPED` reached Docker as an image name."""
    with pytest.raises(EvalError, match="use letters, digits"):
        normalise({**ROW, "instance_id": iid})
    assert normalise({**ROW, "instance_id": "toolz-eb2b6d0e2a642f35-1a2b3c4d"})["instance_id"].startswith("toolz")


def test_verified_50_is_a_fixed_subset_of_real_ids():
    ids = verified_50()
    assert len(ids) == 50 == len(set(ids)) and list(ids) == sorted(ids)
    assert all(re.fullmatch(r"[\w.-]+__[\w.-]+-\d+", i) for i in ids)
    assert ids[0] == "astropy__astropy-12907" and "django__django-11099" not in ids
    assert len({i.split("__")[0] for i in ids}) == 10  # spread over the Verified repos, django the largest


def test_unknown_instance_id_and_missing_file_fail_naming_them(tmp_path):
    path = tmp_path / "ds.jsonl"
    path.write_text(json.dumps(ROW) + "\n")
    assert [i["instance_id"] for i in load_instances(str(path))] == ["django__django-11099"]
    with pytest.raises(EvalError, match=r"not in .*ds.jsonl: nope__nope-1 \(it has 1 instances, e.g. django__django-11099\)"):
        load_instances(str(path), instance_ids=["nope__nope-1"])
    with pytest.raises(EvalError, match="dataset file .*missing.jsonl does not exist"):
        load_instances(str(tmp_path / "missing.jsonl"))
    with pytest.raises(EvalError, match="unknown split 'lite'"):
        load_instances(str(path), split="lite")


def test_cli_reports_bad_input_without_writing_anything(tmp_path):
    from typer.testing import CliRunner

    from selfplay.cli import app

    path = tmp_path / "ds.jsonl"
    path.write_text(json.dumps(ROW) + "\n")
    out = tmp_path / "out"
    for args, message in ((["--dataset", str(path), "--instances", "nope__nope-1"], "nope__nope-1"),
                          (["--dataset", str(tmp_path / "gone.jsonl")], "does not exist"),
                          (["--dataset", str(path), "--max-repeats", "0"], "'--max-repeats': Input should be greater than or equal to 1"),
                          (["--dataset", str(path), "--max-turns", "0"], "'--max-turns': Input should be greater than or equal to 1")):
        res = CliRunner().invoke(app, ["eval", "swebench", "--policy", "scripted", "--out", str(out), *args])
        text = re.sub(r"[\s│╭╮╰╯─]+", " ", res.output)  # rich wraps the message in a box
        assert res.exit_code != 0 and message in text, res.output
        assert not out.exists()


def test_tasks_export_is_a_dataset_swebench_accepts(tmp_path):
    """`selfplay tasks export --format swebench` output loads as instances and builds swebench TestSpecs:
    the task image, base commit selfplay-base, and an eval script with the harness's markers."""
    from swebench.harness.utils import make_test_spec
    from swebench_fixtures import FIXTURES, KEYFILTER
    from typer.testing import CliRunner

    from selfplay.cli import app
    from selfplay.eval.offline import task_from_folder
    from selfplay.store import open_store

    url = f"sqlite:///{tmp_path / 'selfplay.db'}"
    task, _ = task_from_folder(FIXTURES / "toolz-keyfilter")
    with open_store(url) as st:
        st.add_task(task)
    out = tmp_path / "tasks.jsonl"
    res = CliRunner().invoke(app, ["tasks", "export", str(out), "--format", "swebench", "--store", url])
    assert res.exit_code == 0, res.output
    (inst,) = load_instances(str(out))
    assert (inst["instance_id"], inst["image"], inst["base_commit"]) == (KEYFILTER, task.image_name, "selfplay-base")
    assert inst["FAIL_TO_PASS"] == ["toolz/tests/test_dicttoolz.py::TestDict::test_keyfilter"]
    spec = make_test_spec(inst)
    script = spec.eval_script
    assert "git checkout selfplay-base -- toolz/tests/test_dicttoolz.py" in script
    assert script.index(">>>>> Start Test Output") < script.index("pytest -rA") < script.index(">>>>> End Test Output")
    assert "+    def test_keyfilter(self):" in script  # the test patch restores the oracle test


def test_no_hub_access_is_a_clear_error_suggesting_a_file(tmp_path):
    """The default dataset with the hub unreachable (HF_HUB_OFFLINE=1, as on this CI): no traceback,
    the error names the dataset and --dataset FILE, and nothing is written."""
    import os
    import subprocess
    import sys

    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-c", "from selfplay.cli import main; main()", "eval", "swebench",
                           "--split", "verified-50", "--out", str(out)], capture_output=True, text=True,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "COLUMNS": "200"}, timeout=120)
    text = re.sub(r"[\s│╭╮╰╯─]+", " ", proc.stdout + proc.stderr)
    assert proc.returncode == 2 and "could not load SWE-bench/SWE-bench_Verified" in text, text
    assert "--dataset FILE" in text and "Traceback" not in text and not out.exists()
