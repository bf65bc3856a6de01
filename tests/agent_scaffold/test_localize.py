"""The `localize` tool: the pure Ochiai ranking, the hostile-input parsing of the tracer's output, the action,
and (Docker) the tool on a real toolz bug: its lines ranked first, the test files left as they were."""

from __future__ import annotations

import json

import pytest

from agent_scaffold.actions import Action, parse_action
from agent_scaffold.localize import ochiai, read_spectrum
from agent_scaffold.tools import Toolbox


def test_ochiai_ranks_the_line_only_failing_tests_run_first():
    files = ["pkg/a.py", "pkg/b.py"]
    tests = [(True, [(0, 10), (0, 11), (1, 3)]),   # both failing tests run a.py:10-11
             (True, [(0, 10), (0, 11)]),
             (False, [(0, 10), (1, 3)]),            # the passing test runs a.py:10 too
             (False, [(1, 3)])]
    spectrum = ochiai(files, tests)
    assert (spectrum.failed, spectrum.passed) == (2, 2)
    ranked = [(s.path, s.line, round(s.score, 3)) for s in spectrum.suspects]
    # a.py:11: ef 2, ep 0 -> 1; a.py:10: 2 / sqrt(2 * 3); b.py:3: 1 / sqrt(2 * 3)
    assert ranked == [("pkg/a.py", 11, 1.0), ("pkg/a.py", 10, 0.816), ("pkg/b.py", 3, 0.408)]


def test_ties_keep_file_order_and_lines_no_failing_test_ran_are_not_suspects():
    spectrum = ochiai(["m.py"], [(True, [(0, 7), (0, 5)]), (False, [(0, 9)])])
    assert [(s.line, s.score) for s in spectrum.suspects] == [(5, 1.0), (7, 1.0)]
    assert ochiai(["m.py"], [(False, [(0, 1)])]).suspects == ()


@pytest.mark.parametrize("text", [
    "[]", '{"files": "a.py", "tests": []}', '{"files": [1], "tests": []}',
    '{"files": ["a.py"], "tests": [[1, []]]}',                  # failed is no bool
    '{"files": ["a.py"], "tests": [[true, [[3, 1]]]]}',         # file index out of range
    '{"files": ["a.py"], "tests": [[true, [[0, -1]]]]}',        # no such line
    '{"files": ["a.py"], "tests": [[true, [[0, 1.5]]]]}',
])
def test_a_spectrum_the_repository_code_could_have_forged_is_refused(text):
    with pytest.raises(ValueError):
        read_spectrum(text)


def test_read_spectrum_ranks_what_the_plugin_writes():
    text = json.dumps({"files": ["a.py"], "tests": [[True, [[0, 4]]], [False, [[0, 2]]]]})
    assert [(s.path, s.line) for s in read_spectrum(text).suspects] == [("a.py", 4)]


def test_the_action_is_an_empty_block_and_needs_a_localizer(local_sandbox):
    assert parse_action("Rank them.\n```localize\n```") == Action("localize")
    out = Toolbox(local_sandbox).run(Action("localize"))
    assert out.error and "not available" in out.observation


@pytest.fixture
def buggy_toolz():
    """A toolz sandbox of its own: the buggy state replaces the reset snapshot, which the shared one must keep."""
    from repos.listfile import get_repo
    from sandboxes.docker import DockerSandbox
    from sandboxes.images import repo_image

    with DockerSandbox.create(repo_image(get_repo("toolz")), workdir="/testbed") as box:
        yield box


@pytest.mark.docker
@pytest.mark.slow
def test_localize_ranks_a_real_bugs_lines_first_and_leaves_the_tests_as_they_were(buggy_toolz):
    """The two-bug toolz fixture: both buggy lines are listed; the spec is taken back out after the run,
    left in when the agent had applied it, and refused when the test files no longer take it."""
    from dataclasses import replace
    from pathlib import Path

    from repos.listfile import get_repo
    from selfplay.artifact import load_artifact
    from selfplay.judge.grader import build_buggy_state
    from selfplay.task import Task

    box = buggy_toolz
    artifact = load_artifact(Path(__file__).parents[1] / "fixtures" / "artifacts" / "valid")
    task = Task("toolz-fixture", "toolz", artifact, (), ())
    localizer = replace(task.localizer(get_repo("toolz").test_command), listed=12)
    assert localizer.test_command.endswith("toolz/tests/test_dicttoolz.py toolz/tests/test_itertoolz.py")
    build_buggy_state(box, artifact)
    tools = Toolbox(box, 120, 8000, localizer)

    out = tools.run(Action("localize"))
    assert not out.error, out.observation
    head, *rows = out.observation.splitlines()
    assert head.startswith("The spec's tests ran with line tracing: ") and " 0 failed" not in head, head
    listed = [r.split()[0] for r in rows]
    # keyfilter's tests fail in every dict class, frequencies' once: keyfilter's lines lead, tied
    assert "toolz/dicttoolz.py:156" in listed[:5] and "toolz/itertoolz.py:548" in listed, rows
    assert "if not predicate(k):" in out.observation and "d[item] += 2" in out.observation
    assert box.diff() == ""  # the spec's tests were taken back out

    box.write_file("/tmp/spec.diff", task.spec)
    assert box.exec("git apply /tmp/spec.diff", user="agent").ok
    again = tools.run(Action("localize"))
    assert again.observation == out.observation
    assert "def test_frequencies" in box.diff()  # the agent's own apply stays

    tools.run(parse_action("```edit\nstr_replace toolz/itertoolz.py:548\n<<<<<<< SEARCH\nd[item] += 2\n=======\n"
                           "d[item] += 1\n>>>>>>> REPLACE\n```"))
    fixed_one = tools.run(Action("localize")).observation
    assert "toolz/itertoolz.py:548" not in fixed_one and "toolz/dicttoolz.py:156" in fixed_one

    # a context line of the spec edited away: the spec applies in neither direction
    box.exec("git checkout -- toolz/tests && sed -i 's/assert list(interpose(\"a\", \\[\\])) == \\[\\]/assert True/' "
             "toolz/tests/test_itertoolz.py")
    refused = tools.run(Action("localize"))
    assert refused.error and "do not apply" in refused.observation, refused.observation


def test_the_solver_prompt_names_the_tool_only_when_the_episode_has_it():
    from agent_scaffold.agent import LOCALIZE_HINT
    from agent_scaffold.roles import load_role, render_template, solver_variables

    role = load_role("solver")
    values = {**role.defaults, "workdir": "/testbed", "command_timeout": "60", **solver_variables("a spec")}
    plain = render_template(role.task_template, values)
    assert "localize" not in plain and "before you finish.\n" in plain  # as before the tool existed
    hinted = render_template(role.task_template, {**values, "localize_hint": LOCALIZE_HINT})
    assert hinted == plain.replace("before you finish.\n", "before you finish." + LOCALIZE_HINT + "\n")
