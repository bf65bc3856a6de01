"""The scripted solver's plan (pure): hunks, a unique repair, valid and varied actions."""

from __future__ import annotations

import random
import re

import pytest

from agent_scaffold.actions import parse_action
from selfplay.demos.bug import enclosing_function, parse_hunks, repair
from selfplay.demos.solver_plan import SolverTask, solver_actions
from selfplay.errors import DiffError, NotDemonstrable
from selfplay.procedural.seed import file_diff

ORIGINAL = """def first(seq):
    for x in seq:
        return x


def count(seq, value):
    n = 0
    for x in seq:
        if x == value:
            n += 1
    return n


def same(seq, value):
    for x in seq:
        if x == value:
            return True
    return False
"""
BUGGY = ORIGINAL.replace("        if x == value:\n            n += 1", "        if x != value:\n            n += 1")
SPEC = ("diff --git a/tests/test_m.py b/tests/test_m.py\n--- a/tests/test_m.py\n+++ b/tests/test_m.py\n"
        "@@ -1,2 +1,5 @@\n import m\n+\n+def test_count():\n+    assert m.count([1, 2, 1], 1) == 2\n")


def task(reproduce: bool = True) -> SolverTask:
    return SolverTask(spec=SPEC, fail_to_pass=("tests/test_m.py::test_count",),
                      bug_inject=file_diff("m.py", ORIGINAL, BUGGY), buggy_sources={"m.py": BUGGY},
                      reproduce=reproduce)


def test_repair_is_unique_and_undoes_the_bug():
    (hunk,) = parse_hunks(task().bug_inject)
    assert hunk.path == "m.py" and hunk.first_changed_line == 9
    # "if x == value:" occurs twice in the original, "if x != value:" once in the buggy file
    for seed in range(5):
        search, replace = repair(hunk, BUGGY, random.Random(seed), extra_context=2)
        assert BUGGY.count(search + "\n") == 1
        assert BUGGY.replace(search, replace, 1) == ORIGINAL
    assert enclosing_function(BUGGY, 9).name == "count"


def test_hunks_of_a_two_file_diff_keep_their_own_paths():
    two = file_diff("m.py", ORIGINAL, BUGGY) + file_diff("n.py", BUGGY, ORIGINAL)
    first, second = parse_hunks(two)
    assert (first.path, second.path) == ("m.py", "n.py")
    assert any(t == "+" and "!=" in text for t, text in first.lines)
    assert any(t == "-" and "!=" in text for t, text in second.lines)


def test_no_usable_hunk_is_a_clear_error():
    with pytest.raises(DiffError, match="no usable hunks"):
        parse_hunks("not a diff")


def test_a_diff_git_would_not_apply_is_refused():
    truncated = "".join(file_diff("m.py", ORIGINAL, BUGGY).splitlines(keepends=True)[:-1])
    with pytest.raises(DiffError, match="bug_inject.diff is not a valid diff"):
        parse_hunks(truncated)


@pytest.mark.parametrize("reproduce", [True, False])
def test_every_action_is_valid_and_the_plan_ends_with_submit(reproduce):
    for seed in range(20):
        actions = solver_actions(task(reproduce), random.Random(seed))
        kinds = [parse_action(a) for a in actions]  # raises FormatError on a malformed reply
        assert actions[-1].endswith("```submit\n```")
        assert sum("str_replace m.py" in a for a in actions) == 1
        assert ("git apply" in actions[0] + actions[1]) == reproduce
        assert len(kinds) <= 10


def test_plans_vary_with_the_seed():
    plans = {tuple(solver_actions(task(), random.Random(seed))) for seed in range(20)}
    assert len(plans) >= 10
    firsts = {plan[0].split("\n")[2] for plan in plans}
    assert len(firsts) >= 3  # orientation, wrong first look, straight to reproduction


def test_the_short_plan_is_grep_view_repair_submit():
    from dataclasses import replace

    for seed in range(5):
        actions = solver_actions(replace(task(), short=True), random.Random(seed))
        parsed = [parse_action(a) for a in actions]
        assert [a.tool for a in parsed] == ["bash", "edit", "edit", "submit"]
        assert parsed[0].command == 'git grep -n "def count(" -- \'*.py\'' and parsed[1].command == "view"
        search = actions[2].split("<<<<<<< SEARCH\n")[1].split("\n=======")[0]
        replace_ = actions[2].split("=======\n")[1].split("\n>>>>>>> REPLACE")[0]
        assert BUGGY.replace(search, replace_, 1) == ORIGINAL
        assert SPEC not in "".join(actions) and max(map(len, actions)) < 200


@pytest.mark.parametrize("short", [True, False])
def test_the_expert_finds_the_file_before_it_names_it(short):
    """Every plan locates the function with a repo-wide grep (its output names the path and the `def`
    line) before any action names the buggy file, and the short plan's view starts at that `def` line."""
    from dataclasses import replace

    for reproduce in (True, False):
        for seed in range(20):
            actions = solver_actions(replace(task(reproduce), short=short), random.Random(seed))
            first_path = next(i for i, a in enumerate(actions) if "m.py" in a.replace("test_m.py", ""))
            locates = [i for i, a in enumerate(actions) if 'git grep -n "def count(" -- \'*.py\'' in a]
            assert locates and locates[0] < first_path, actions
            if short:
                assert "view m.py 6 " in actions[1]  # `def count` is line 6; the bug is line 9


def test_spec_call_quotes_how_the_added_lines_name_a_function():
    from selfplay.demos.solver_plan import spec_call

    assert spec_call(SPEC, "count") == "m.count"
    assert spec_call(SPEC, "same") is None  # named nowhere
    assert spec_call(SPEC, "coun") is None  # a whole word only
    context_only = SPEC.replace("+    assert m.count", "+    assert m.total") + " m.count([1])\n"
    assert spec_call(context_only, "count") is None  # a context line is not what the new test adds
    header = "+++ b/count.py\n" + SPEC.replace("m.count", "m.total")
    assert spec_call(header, "count") is None  # nor is a file header
    nested = SPEC.replace("m.count(", "pkg.m.count(")
    assert spec_call(nested, "count") == "pkg.m.count"


@pytest.mark.parametrize("short", [True, False])
def test_visible_only_views_and_edits_the_spec_call(short):
    """With `visible_only` the thought quotes the spec's call (`m.count`), and the view and every str_replace
    take it as their target (the editor goes to its definition): no grep, no path to copy."""
    from dataclasses import replace

    for reproduce in (True, False):
        for seed in range(20):
            actions = solver_actions(replace(task(reproduce), short=short, visible_only=True), random.Random(seed))
            assert not any("git grep" in a for a in actions), actions
            view = next(a for a in actions if "view " in a)
            assert "`m.count`" in view.split("```")[0] and view.endswith("```edit\nview m.count\n```"), view
            targets = [m for a in actions for m in re.findall(r"str_replace (\S+)\n", a)]
            assert targets == ["m.count"], actions
            assert all(parse_action(a) for a in actions)


def test_visible_only_refuses_a_task_whose_spec_never_names_the_function():
    from dataclasses import replace

    from selfplay.errors import NotDemonstrable

    hidden = replace(task(), spec=SPEC.replace("m.count", "m.total"), visible_only=True)
    with pytest.raises(NotDemonstrable, match="never name `count`"):
        solver_actions(hidden, random.Random(0))
    assert solver_actions(replace(hidden, visible_only=False), random.Random(0))  # the old expert still plays it


def test_visible_only_refuses_a_bug_past_the_page_its_view_shows():
    from dataclasses import replace

    from agent_scaffold.editor import page_last
    from selfplay.demos.solver_plan import OBSERVATION_CHARS, def_page
    from selfplay.errors import NotDemonstrable

    padded = ORIGINAL.replace("    n = 0\n", "    n = 0\n" + "    # a long comment line that pads the view past the characters one observation shows\n" * 20)
    buggy = padded.replace("        if x == value:\n            n += 1", "        if x != value:\n            n += 1")
    far = replace(task(), bug_inject=file_diff("m.py", padded, buggy), buggy_sources={"m.py": buggy},
                  visible_only=True)
    assert page_last(BUGGY.splitlines(), 6, OBSERVATION_CHARS) >= 10  # the near bug (line 9) is on the page
    assert page_last(buggy.splitlines(), 6, OBSERVATION_CHARS) < 29  # the far one is not
    with pytest.raises(NotDemonstrable, match=r"ends before the bug \(line 29\)"):
        solver_actions(far, random.Random(0))
    assert def_page(enclosing_function(BUGGY, 9), BUGGY, 9) == 6


@pytest.mark.parametrize("short", [True, False])
def test_visible_only_names_the_line_and_the_change_before_the_repair(short):
    """The thought before the str_replace says which line of the page is wrong and how it changes; the
    `any` expert's thought stays as it was, so its demonstrations are unchanged."""
    from dataclasses import replace

    for seed in range(10):
        visible = solver_actions(replace(task(), short=short, visible_only=True), random.Random(seed))
        edit = next(a for a in visible if "str_replace" in a)
        assert edit.split("\n")[0] in ("Line 9, `if x != value:`: `!=` becomes `==`, so it reads `if x == value:`.",
                                        "The bug is on line 9, `if x != value:`: `!=` becomes `==`, so "
                                        "`if x == value:`."), edit
        hidden = solver_actions(replace(task(), short=short), random.Random(seed))
        assert "`!=` becomes" not in "".join(hidden)


def test_change_note_widens_to_whole_operators_when_asked():
    from selfplay.demos.bug import change_note

    assert change_note("if x != v:", "if x == v:", operators=True) == "`!=` becomes `==`"
    assert change_note("if x != v:", "if x == v:") == "`!` becomes `=`"  # the injector's notes, unchanged
    assert change_note("a < b", "a <= b", operators=True) == "`<` becomes `<=`"
    assert change_note("x[:-1 + 1]", "x[:-1]", operators=True) == "delete `+ 1`"
    assert change_note("if not a or b:", "if not a and b:", operators=True) == "`or` becomes `and`"


def test_a_visible_demonstration_needs_the_spec_call_to_resolve_to_the_bug(tmp_path):
    """`solver._check_resolves`, on the LocalSandbox test double: `view m.count` must go to the buggy
    `def count`; an ambiguous name or one resolved elsewhere is NotDemonstrable, before any episode."""
    from dataclasses import replace

    from agent_scaffold.editor import Editor
    from selfplay.demos.solver import _check_resolves
    from selfplay.demos.solver_plan import visible_target
    from selfplay.errors import NotDemonstrable
    from tests.agent_scaffold.local_sandbox import LocalSandbox

    plan = replace(task(), visible_only=True)
    assert visible_target(plan) == ("m.count", "m.py", 6)
    _check_resolves(Editor(LocalSandbox(tmp_path / "one", {"m.py": BUGGY})), plan)
    bare = replace(plan, spec=SPEC.replace("m.count(", "count("))  # `count`, which two modules define
    twice = LocalSandbox(tmp_path / "two", {"m.py": BUGGY, "curried.py": "def count(seq, value):\n    pass\n"})
    _check_resolves(Editor(twice), plan)  # `m.count` still names m.py's
    with pytest.raises(NotDemonstrable, match=r"`view count` is refused: count is no file, and 2 definitions fit"):
        _check_resolves(Editor(twice), bare)


def test_balanced_next_draws_the_least_demonstrated_operator_first_in_seed_order():
    """`collect.balanced_next`: the visible warm start's order of demonstration, so the seeder's most common
    operator (flip_comparison) does not fill the demonstrations."""
    from types import SimpleNamespace

    from selfplay.demos.collect import balanced_next

    pending = [SimpleNamespace(task_id=t) for t in ("a", "b", "c", "d")]
    operator_of = {"a": "flip", "b": "flip", "c": "drop", "d": "swap"}
    assert balanced_next(pending, operator_of, {}).task_id == "a"  # a tie: seed order
    assert balanced_next(pending, operator_of, {"flip": 1}).task_id == "c"
    assert balanced_next(pending, operator_of, {"flip": 1, "drop": 1}).task_id == "d"
    assert balanced_next(pending, operator_of, {"flip": 2, "drop": 1, "swap": 1}).task_id == "c"
    order, done = [], {}
    while pending:
        task = balanced_next(pending, operator_of, done)
        pending.remove(task)
        order.append(task.task_id)
        done[operator_of[task.task_id]] = done.get(operator_of[task.task_id], 0) + 1
    assert order == ["a", "c", "d", "b"]


def test_a_visible_repair_thought_quotes_the_buggy_line_only_when_it_can():
    """A deletion-only hunk has no buggy line to quote, and a line with a backtick cannot be quoted in one:
    both fall back to the line number alone."""
    from selfplay.demos.bug import Hunk
    from selfplay.demos.solver_plan import _buggy_line, _fixed_line

    assert _buggy_line(Hunk("m.py", 3, ((" ", "def f():"), ("-", "    x = 1"), ("+", "    x = 2")))) == "x = 2"
    assert _buggy_line(Hunk("m.py", 3, ((" ", "def f():"), ("-", "    x = 1"), (" ", "    return x")))) is None
    assert _buggy_line(Hunk("m.py", 3, (("-", "a = 1"), ("+", "s = '`'")))) is None
    assert _fixed_line(Hunk("m.py", 3, ((" ", "def f():"), ("-", "    x = 1"), ("+", "    x = 2")))) == "x = 1"
    assert _fixed_line(Hunk("m.py", 3, ((" ", "def f():"), ("+", "    x = 2")))) is None  # the repair deletes
    assert _fixed_line(Hunk("m.py", 3, ((" ", "def f():"), ("-", "    x = 1")))) is None  # nothing to quote before


def _localize_task(ranked: tuple[tuple[str, int], ...]) -> SolverTask:
    return SolverTask(spec=SPEC, fail_to_pass=("tests/test_m.py::test_count",),
                      bug_inject=file_diff("m.py", ORIGINAL, BUGGY), buggy_sources={"m.py": BUGGY},
                      localize=True, ranked=ranked)


def test_the_localize_plan_edits_the_listed_line_it_names():
    """localize, then a str_replace of the listed buggy line as the tool prints it (stripped) from that line,
    the thought naming its rank and the change; maybe localize again; submit."""
    for seed in range(8):
        actions = solver_actions(_localize_task((("m.py", 7), ("m.py", 9), ("m.py", 8))), random.Random(seed))
        parsed = [parse_action(a) for a in actions]
        assert parsed[0].tool == "localize" and parsed[-1].tool == "submit"
        edit = parsed[1]
        assert (edit.command, edit.path, edit.args) == ("str_replace", "m.py", (9,))
        assert (edit.old, edit.body) == ("if x != value:\n", "if x == value:\n")
        assert "second" in actions[1] and "`!=` becomes `==`, so it reads `if x == value:`" in actions[1]
        assert [a.tool for a in parsed[2:-1]] in ([], ["localize"])


def test_the_localize_plan_needs_the_bugs_line_near_the_top_of_the_list():
    with pytest.raises(NotDemonstrable, match="does not list the bug's line m.py:9"):
        solver_actions(_localize_task((("m.py", 7), ("m.py", 8), ("m.py", 10), ("m.py", 9))), random.Random(0))
    with pytest.raises(NotDemonstrable, match="none"):
        solver_actions(_localize_task(()), random.Random(0))


def _recovery_task(ranked: tuple[tuple[str, int], ...]) -> SolverTask:
    from dataclasses import replace

    return replace(_localize_task(ranked), recover=True)


def test_a_bug_listed_second_is_demonstrated_with_a_wrong_first_edit_undone():
    """With `recover`: localize, a wrong edit of the first listed line (`if x == value:` flipped; no loss), localize
    again, that edit undone, the second listed line (the bug) repaired, submit."""
    from selfplay.demos.solver_plan import expert_plan

    for seed in range(6):
        plan = expert_plan(_recovery_task((("m.py", 16), ("m.py", 9))), random.Random(seed))
        parsed = [parse_action(a) for a in plan.actions]
        assert [p.tool for p in parsed] == ["localize", "edit", "localize", "edit", "edit", "submit"]
        wrong, undo, fix = parsed[1], parsed[3], parsed[4]
        assert (wrong.path, wrong.args, wrong.old, wrong.body) == ("m.py", (16,), "if x == value:\n", "if x != value:\n")
        assert (undo.command, undo.path) == ("undo", "m.py")
        assert "line 16" in plan.actions[3] and "not the bug" in plan.actions[3]
        assert (fix.path, fix.args, fix.old, fix.body) == ("m.py", (9,), "if x != value:\n", "if x == value:\n")
        assert "second" in plan.actions[4]
        assert plan.unlearned == (1,)  # the wrong edit is played, not trained on


def test_a_recovery_needs_a_first_listed_line_it_can_change_and_is_only_for_the_second_rank():
    from selfplay.demos.solver_plan import expert_plan, wrong_edit

    with pytest.raises(NotDemonstrable, match="m.py:8 has no one-line change"):  # `for x in seq:`
        expert_plan(_recovery_task((("m.py", 8), ("m.py", 9))), random.Random(0))
    assert wrong_edit(BUGGY, 8, random.Random(0)) is None
    assert wrong_edit(BUGGY, 7, random.Random(0)) == ("n = 0", "n = 1")  # a constant plus one
    # listed first: the direct plan, every turn trained
    direct = expert_plan(_recovery_task((("m.py", 9), ("m.py", 16))), random.Random(0))
    assert direct.unlearned == () and parse_action(direct.actions[1]).args == (9,)
    # without `recover` a bug listed second is not demonstrated when only the first line may be edited
    with pytest.raises(NotDemonstrable, match="does not list the bug's line m.py:9"):
        expert_plan(_localize_task((("m.py", 16),)), random.Random(0))
