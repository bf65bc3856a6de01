"""Procedural seeds: mutation operators source-in/source-out, the built-in pytest parser, the weakening
helpers, and real seeding on three default repos."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap

import pytest

from agent_scaffold.mutation_operators import OPERATORS, OPERATORS_BY_NAME, mutate
from selfplay.procedural import PARSER_SOURCE
from selfplay.procedural.pytest_parser import parse
from selfplay.procedural.seed import delete_tests, restricted_command

SOURCE = textwrap.dedent('''\
    LIMIT = 10  # module level: never mutated


    def f(xs, n):
        """Doc."""
        total = 0
        for i in range(0, n):
            if i < len(xs) and xs[i] is not None:
                total += xs[0]
        if not xs:
            return -1
        print(total, n)
        return max(total, n)  # keep this comment
    ''')


@pytest.mark.parametrize("op, site, before, after", [
    ("flip_comparison", 0, "if i < len(xs) and", "if i >= len(xs) and"),
    ("flip_comparison", 1, "xs[i] is not None", "xs[i] is None"),
    ("shift_bound", 0, "range(0, n)", "range(0, n + 1)"),
    ("shift_bound", 1, "total += xs[0]", "total += xs[1]"),
    ("swap_boolean_operator", 0, "if i < len(xs) and xs[i] is not None:", "if i < len(xs) or xs[i] is not None:"),
    ("drop_statement", 0, "    total = 0\n", "    pass\n"),
    ("return_early", 0, "if not xs:", "if True:"),
    ("swap_arguments", 0, "range(0, n)", "range(n, 0)"),
    ("change_constant", 0, "total = 0", "total = 1"),
])
def test_operator_source_in_source_out(op, site, before, after):
    out = mutate(SOURCE, OPERATORS_BY_NAME[op], site)
    assert out == SOURCE.replace(before, after, 1)
    assert "LIMIT = 10  # module level" in out and "# keep this comment" in out


def test_every_operator_has_sites_and_only_inside_functions():
    import ast

    tree = ast.parse(SOURCE)
    for op in OPERATORS:
        sites = op.sites(tree)
        assert sites, op.name
        assert all(s.lineno > 3 for s in sites), op.name  # LIMIT on line 1 is never a site


def test_mutate_errors():
    with pytest.raises(IndexError):
        mutate(SOURCE, OPERATORS_BY_NAME["swap_boolean_operator"], 5)
    with pytest.raises(ValueError, match="shares its line"):
        mutate("def f():\n    a = 1; b = 2\n    return a\n", OPERATORS_BY_NAME["drop_statement"], 0)


PYTEST_OUTPUT = """\
============================= test session starts ==============================
collected 6 items
t/test_a.py ..F.xE                                                  [100%]
=========================== short test summary info ============================
PASSED t/test_a.py::test_one
PASSED t/test_a.py::TestK::test_two[1-2]
FAILED t/test_a.py::test_three - AssertionError: assert 1 == 2 - with a dash
XFAIL t/test_a.py::test_four - reason
ERROR t/test_a.py::test_five - RuntimeError
PASSED t/test_a.py::test_six
ERROR t/test_a.py::test_six - teardown failed
SKIPPED [1] t/test_a.py:40: no network
ERROR t/test_b.py - ImportError: nope
"""


def test_builtin_parser():
    assert parse(PYTEST_OUTPUT) == {
        "t/test_a.py::test_one": "passed", "t/test_a.py::TestK::test_two[1-2]": "passed",
        "t/test_a.py::test_three": "failed", "t/test_a.py::test_four": "passed",
        "t/test_a.py::test_five": "failed", "t/test_a.py::test_six": "failed",
    }
    assert parse("t/test_v.py::test_x PASSED   [ 50%]\nt/test_v.py::test_y FAILED [100%]\n") == {
        "t/test_v.py::test_x": "passed", "t/test_v.py::test_y": "failed"}


def test_builtin_parser_runs_as_a_script(tmp_path):
    (tmp_path / "p.py").write_text(PARSER_SOURCE)
    out = subprocess.run([sys.executable, "-I", str(tmp_path / "p.py")], input=PYTEST_OUTPUT, text=True,
                         capture_output=True, check=True).stdout
    assert json.loads(out) == parse(PYTEST_OUTPUT)


def test_restricted_command():
    assert restricted_command("python -m pytest -rA -p no:cacheprovider toolz/tests",
                              ["toolz/sandbox/tests/test_core.py"]) == \
        "python -m pytest -rA -p no:cacheprovider toolz/sandbox/tests/test_core.py"
    assert restricted_command("python -m pytest -rA tests", ["tests/test_x.py"]) == "python -m pytest -rA tests/test_x.py"


def test_delete_tests_removes_functions_methods_and_inherited_ones():
    src = textwrap.dedent('''\
        import pytest


        @pytest.mark.parametrize("x", [1])
        def test_a(x):
            assert x


        def test_b():
            assert 1


        class TestBase:
            def test_m(self):
                assert 1

            def test_n(self):
                assert 1


        class TestChild(TestBase):
            pass
        ''')
    out = delete_tests(src, [["test_a"], ["TestChild", "test_m"]])
    assert "def test_a" not in out and "parametrize" not in out and "def test_m" not in out
    assert "def test_b" in out and "def test_n" in out
    assert delete_tests(src, [["test_zzz"]]) is None


@pytest.mark.docker
@pytest.mark.slow
def test_seed_toolz_produces_a_valid_artifact(tmp_path, toolz_spec, toolz_pool):
    from selfplay.artifact import load_artifact
    from selfplay.procedural.seed import seed

    results = seed(toolz_spec, 1, tmp_path, pool=toolz_pool)
    assert len(results) == 1
    r = results[0]
    assert r.report.valid and r.report.fail_to_pass
    assert load_artifact(r.directory) == r.artifact
    assert json.loads((r.directory / "report.json").read_text())["valid"] is True
    assert r.artifact.test_parser == PARSER_SOURCE and r.operator in OPERATORS_BY_NAME


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("repo", ["cachetools", "parse"])
def test_cli_seed_on_other_default_repos(repo, tmp_path):
    from typer.testing import CliRunner

    from selfplay.cli import app

    db = tmp_path / "tasks.db"
    result = CliRunner().invoke(app, ["seed", "--repo", repo, "-n", "1", "--out", str(tmp_path / "seeds"),
                                      "--json", "--store", str(db)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["produced"] == 1 and data["artifacts"][0]["fail_to_pass"]
    from selfplay.store import open_store

    stored = open_store(str(db)).list_tasks()
    assert len(stored) == 1 and stored[0].origin == "procedural"
    # the seeded artifact validates again from disk through the CLI, and grades +1 with its reversed bug
    artifact_dir = data["artifacts"][0]["dir"]
    from selfplay.artifact import load_artifact
    from selfplay.diffs import reverse_diff

    fix = tmp_path / "fix.diff"
    fix.write_text(reverse_diff(load_artifact(artifact_dir).bug_inject))
    graded = CliRunner().invoke(app, ["grade", artifact_dir, "--repo", repo, "--patch", str(fix), "--json"])
    assert graded.exit_code == 0, graded.output
    assert json.loads(graded.stdout)["reward"] == 1


def test_only_code_files_with_a_related_test_file_are_mutated():
    from repos.spec import DEFAULT_TEST_PATTERNS
    from selfplay.procedural.seed import mutable_files

    files = ["pkg/__init__.py", "pkg/core.py", "pkg/_private.py", "pkg/untested.py", "setup.py", "tools/run.py",
             "docs/conf.py", "tests/test_pkg.py", "tests/test_core.py", "tests/test_private.py", "tests/test_run.py"]
    assert mutable_files(files, DEFAULT_TEST_PATTERNS) == [
        ("pkg/__init__.py", ["tests/test_pkg.py"]), ("pkg/_private.py", ["tests/test_private.py"]),
        ("pkg/core.py", ["tests/test_core.py"]), ("tools/run.py", ["tests/test_run.py"])]


def test_a_mutant_whose_generated_diffs_do_not_parse_is_skipped_not_fatal(monkeypatch, tmp_path, caplog):
    """A seeding attempt whose diffs git refuses (seen once: a corrupt weakening of a boltons mutant, which
    crashed a whole warm-start build) is logged and skipped; seeding goes on to its next attempt."""
    import logging

    from repos.listfile import get_repo
    from selfplay.errors import DiffError
    from selfplay.procedural import seed as seed_mod

    class Corrupt:
        def digest(self):
            raise DiffError("diff is not a valid diff: git apply refuses it: error: corrupt patch at line 226")

    attempts = []

    class FakeSeeder:
        def __init__(self, *args):
            self.rng, self.last_operator = random.Random(0), ""

        def inventory(self):
            return [("pkg/mod.py", ["tests/test_mod.py"])]

        def attempt(self, code_file, tests):
            attempts.append(code_file)
            return Corrupt() if len(attempts) == 1 else None

    monkeypatch.setattr(seed_mod, "_Seeder", FakeSeeder)
    with caplog.at_level(logging.INFO, logger=seed_mod.__name__):
        results = seed_mod.seed(get_repo("toolz"), 1, tmp_path, pool=object(),
                                config=seed_mod.SeedConfig(attempts_per_bug=3))
    assert results == [] and len(attempts) == 3
    assert "its diffs do not parse" in caplog.text and "corrupt patch" in caplog.text


def test_one_files_changes_are_each_functions_own_and_parse_as_the_whole_file_would():
    """`FileChanges` (the kit's move-on) lists exactly what a fresh `function_mutations` call lists for each
    name, and what a check of each mutant by parsing the whole file keeps: on real modules of this package,
    and on methods, a decorated class, a nested function (whose changes are the outer function's too) and a
    name defined twice (the first `def` counts)."""
    import ast
    from pathlib import Path

    import agent_scaffold.mutation_operators as ops

    root = Path(__file__).resolve().parents[2]
    nested = ("import functools\n\n\ndef outer(a):\n    def inner(b):\n        return b + 1\n    return inner(a) < 2\n\n\n"
              "@functools.total_ordering\nclass K:\n    @staticmethod\n    def m(x):\n        return x * 3\n\n\n"
              "def twice(x):\n    return x - 1\n\n\ndef twice(x):\n    return x + 1\n")
    sources = [nested, *(p.read_text() for p in (root / "selfplay/task.py", root / "agent_scaffold/mutation_operators.py",
                                                 root / "selfplay/orchestration/rollouts.py"))]
    for source in sources:
        changes = ops.FileChanges(source)
        assert changes.names == ops.function_names(source)
        tree = ast.parse(source)
        whole = [(node, ops._mutant(source, op, node)) for op in ops.OPERATORS
                 for node in op.sites(tree, ops._function_nodes(tree)) if _parses_whole(ops, source, op, node)]
        for name in changes.names:
            listed = changes.of(name)
            assert listed == ops.function_mutations(source, name)
            fn = ops.function_node(tree, name)
            assert {m.source for m in listed} == {mutant for node, mutant in whole
                                                  if fn.lineno <= node.lineno <= node.end_lineno <= fn.end_lineno}
        assert changes.of("no_such_function") is None
    nested_changes = ops.FileChanges(nested)
    assert {m.source for m in nested_changes.of("inner")} <= {m.source for m in nested_changes.of("outer")}
    assert nested_changes.of("inner") and nested_changes.of("m")


def _parses_whole(ops, source, op, node) -> bool:
    try:
        ops._mutant(source, op, node)
    except ValueError:
        return False
    return True
