"""The scripted injector's plan, without Docker: seven valid actions (one prints the lines the bug changes), a parser that agrees with the built-in
one, and a weakening script that deletes exactly what the procedural seeder deletes.
(tests/selfplay/demos/test_demos_docker.py validates what the plan writes in a real sandbox.)"""

from __future__ import annotations

import json
import random
import subprocess
import sys

from agent_scaffold.actions import parse_action
from selfplay.demos.injector import LIST_TESTS, PARSER, WEAKEN, injector_actions
from selfplay.procedural.pytest_parser import parse
from selfplay.procedural.seed import delete_tests, file_diff
from tests.selfplay.store.store_data import make_artifact

LOG = """============ short test summary info ============
PASSED tests/test_core.py::test_ok
PASSED tests/test_core.py::test_param[a b]
FAILED tests/test_core.py::test_param[c] - AssertionError: boom
FAILED tests/test_core.py::TestK::test_method - assert 1 == 2
ERROR tests/test_core.py::test_fixture
XFAIL tests/test_core.py::test_known - reason
XPASS tests/test_core.py::test_lucky
"""

TESTS = '''import pytest


def test_ok():
    assert True


@pytest.mark.parametrize("x", ["a b", "c"])
def test_param(x):
    assert x


class TestK:
    def test_keep(self):
        pass

    def test_method(self):
        assert 1 == 2


def test_fixture(missing):
    pass
'''


def test_the_plan_is_seven_valid_actions_ending_in_submit():
    artifact = make_artifact(3)
    source = "\n".join(f"    return x + {i}" if i == 3 else f"line{i}" for i in range(1, 8)) + "\n"
    actions = injector_actions(artifact, {"pkg/core.py": source}, random.Random(0))
    tools = [parse_action(a).tool for a in actions]
    assert tools == ["bash", "bash", "bash", "edit", "bash", "bash", "submit"]
    # the first command names no folder of this repo: the policy cannot know it before it has looked
    assert parse_action(actions[0]).command.strip() == LIST_TESTS
    edit = parse_action(actions[3])
    assert edit.command == "str_replace" and "return x - 3" in actions[3]  # the bug, from the artifact
    # the lines it replaces were printed just before, with one line either side: nothing typed from memory
    search = actions[3].split("<<<<<<< SEARCH\n")[1].split("\n=======")[0]
    first, last = (int(x) for x in actions[2].split("sed -n '")[1].split("p'")[0].split(","))
    printed = "\n".join(source.splitlines()[first - 1:last])
    assert search in printed and "pkg/core.py" in actions[2] and (first, last) == (2, 4)
    assert artifact.test_weaken not in "".join(actions)  # the weakening is computed, not quoted


def test_the_expert_parser_agrees_with_the_builtin_one():
    out = subprocess.run([sys.executable, "-c", PARSER], input=LOG, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == parse(LOG)


def test_the_weakening_deletes_the_failed_tests_like_the_seeder(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_core.py").write_text(TESTS)
    (tmp_path / "buggy.log").write_text(LOG)
    script = WEAKEN.replace("/tmp/buggy.log", str(tmp_path / "buggy.log"))
    subprocess.run([sys.executable, "-c", script], cwd=tmp_path, check=True)
    expected = delete_tests(TESTS, [["test_param"], ["TestK", "test_method"], ["test_fixture"]])
    got = (tmp_path / "tests" / "test_core.py").read_text()
    assert got == expected, file_diff("tests/test_core.py", expected, got)
