"""Offline SWE-bench-format tasks read pytest's output with the built-in parser (no Docker)."""

from __future__ import annotations

import json
import subprocess
import sys

from swebench_fixtures import FIXTURES

from selfplay.eval.offline import task_from_folder
from selfplay.procedural import PARSER_SOURCE


def test_offline_tasks_carry_the_builtin_pytest_parser(tmp_path):
    task, _ = task_from_folder(FIXTURES / "toolz-keyfilter")
    assert task.artifact.test_parser == PARSER_SOURCE
    (tmp_path / "test_parser.py").write_text(task.artifact.test_parser)
    log = ("PASSED t.py::test_a[a b]\nXFAIL t.py::test_x - flaky\nPASSED t.py::test_t\n"
           "ERROR t.py::test_t - teardown failed\n")
    out = subprocess.run([sys.executable, "-I", str(tmp_path / "test_parser.py")], input=log, text=True,
                         capture_output=True, check=True).stdout
    # A parametrised id keeps its space, XFAIL counts as passed, and a teardown error fails its test.
    assert json.loads(out) == {"t.py::test_a[a b]": "passed", "t.py::test_x": "passed", "t.py::test_t": "failed"}
