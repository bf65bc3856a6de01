"""The scripted injector's plan, without Docker: eight valid actions (two list and print the function the bug
changes, by name), the rule that says which bugs it can show that way, a parser that agrees with the
built-in one, and a weakening script that deletes exactly what the procedural seeder deletes.
(tests/selfplay/demos/test_demos_docker.py validates what the plan writes in a real sandbox.)"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from dataclasses import replace

import pytest

from agent_scaffold.actions import parse_action
from selfplay.demos.injector import (
    DEF_LISTING,
    LIST_TESTS,
    PARSER,
    VIEW_AFTER,
    WEAKEN,
    NotDemonstrable,
    change_note,
    injector_actions,
    located_function,
)
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


SOURCE = """import os


def helper(x):
    return x * 2


def f(x):
    \"\"\"Add ten.\"\"\"
    return x + 10
"""
"""pkg/core.py of `make_artifact(10)`: its bug changes line 10, inside `f`."""


def _shell(command: str, source: str, root) -> str:
    """What `command` prints in a git repo whose pkg/core.py holds `source` (the real git, grep, head, sed)."""
    (root / "pkg").mkdir(exist_ok=True)
    (root / "tests").mkdir(exist_ok=True)
    (root / "pkg" / "core.py").write_text(source)
    (root / "tests" / "test_core.py").write_text("def test_f():\n    pass\n")
    subprocess.run("git init -q . && git add -A", shell=True, cwd=root, check=True)
    return subprocess.run(command, shell=True, cwd=root, capture_output=True, text=True, check=True).stdout


def test_the_plan_is_eight_valid_actions_ending_in_submit(tmp_path):
    artifact = make_artifact(10)
    actions = injector_actions(artifact, {"pkg/core.py": SOURCE}, random.Random(0),
                               repo_files=["pkg/core.py", "tests/test_core.py"])
    tools = [parse_action(a).tool for a in actions]
    assert tools == ["bash", "bash", "bash", "bash", "edit", "bash", "bash", "submit"]
    # the first command names no folder of this repo: the policy cannot know it before it has looked
    assert parse_action(actions[0]).command.strip() == LIST_TESTS
    edit = parse_action(actions[4])
    assert edit.command == "str_replace" and "return x - 10" in actions[4]  # the bug, from the artifact
    # the listing finds the code file by the oracle test file's name and prints its path; the function's
    # name comes from the listing, and the SEARCH text from the view printed just before: nothing of the
    # repo is typed from memory (only `core.py`, from tests/test_core.py), and no line number is
    listing_cmd = parse_action(actions[2]).command
    assert "pkg/" not in listing_cmd and "core.py" in listing_cmd
    listing = _shell(listing_cmd, SOURCE, tmp_path)
    view = _shell(parse_action(actions[3]).command, SOURCE, tmp_path)
    assert listing.splitlines()[0] == "pkg/core.py" == edit.path and "def f(" in listing
    assert "pkg/core.py" in actions[3] and "def f(" in actions[3]
    assert edit.old in view and not any(ch.isdigit() for ch in parse_action(actions[3]).command.split("+")[0])
    assert artifact.test_weaken not in "".join(actions)  # the weakening is computed, not quoted


def test_a_bug_whose_file_the_listing_does_not_find_by_its_test_name_is_not_demonstrable():
    artifact = make_artifact(10)
    with pytest.raises(NotDemonstrable, match="finds other/core.py, not pkg/core.py"):
        injector_actions(artifact, {"pkg/core.py": SOURCE}, random.Random(0),
                         repo_files=["other/core.py", "pkg/core.py", "tests/test_core.py"])
    renamed = replace(artifact, test_files=("tests/test_other.py",))
    with pytest.raises(NotDemonstrable, match="no selected test file is named test_core.py"):
        injector_actions(renamed, {"pkg/core.py": SOURCE}, random.Random(0))


def test_a_bug_the_function_view_cannot_show_is_not_demonstrable_unless_falling_back():
    # 25 functions before f: its def line is beyond the listing's first DEF_LISTING lines
    many = "".join(f"def g{i}():\n    pass\n\n\n" for i in range(DEF_LISTING + 5))
    line = len(many.split("\n")) + 1
    source = many + f"def f(x):\n    return x + {line}\n"
    artifact = make_artifact(line)
    with pytest.raises(NotDemonstrable, match="not among the first"):
        injector_actions(artifact, {"pkg/core.py": source}, random.Random(0))
    # a test harness that needs any plan that writes the artifact prints the changed lines by number
    actions = injector_actions(artifact, {"pkg/core.py": source}, random.Random(0), lines_fallback=True)
    assert [parse_action(a).tool for a in actions] == ["bash", "bash", "bash", "edit", "bash", "bash", "submit"]
    first, last = (int(x) for x in actions[2].split("sed -n '")[1].split("p'")[0].split(","))
    assert f"    return x + {line}" in source.splitlines()[first - 1:last]


@pytest.mark.parametrize("source, search, reason", [
    ("X = 1\nY = X + 1\n", "Y = X + 1", "lies in no function"),
    ("def f(x):\n" + "    x += 1\n" * VIEW_AFTER + "    return x\n", "    return x", "more than 20 lines below"),
    ("class A:\n    def f(self):\n        return 1\n\n\nclass B:\n    def f(self):\n        return 2\n",
     "        return 2", "on more than one line"),
    ("def f(x):\n    return [" + ", ".join(["x"] * 400) + "]\n", "    return [", "over 1100 characters"),
])
def test_located_function_names_why_a_bug_cannot_be_shown(source, search, reason):
    with pytest.raises(NotDemonstrable, match=reason):
        located_function(source, search)


def test_located_function_accepts_a_method_and_a_bug_on_the_last_line_of_the_window(tmp_path):
    source = "class A:\n    def f(self, x):\n" + "        x += 1\n" * (VIEW_AFTER - 1) + "        return x\n"
    assert located_function(source, "        return x") == "f"
    view = _shell("sed -n '/def f(/,+20p' pkg/core.py", source, tmp_path)
    assert "        return x" in view.splitlines()


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


@pytest.mark.parametrize("search, replace_, note", [
    ("    if n < 0:", "    if n >= 0:", "`<` becomes `>=`"),
    ("    x = max(a, b)", "    x = min(a, b)", "`max` becomes `min`"),  # whole words, not `ax` -> `in`
    ("    return f(a, b)", "    return f(b, a)", "`a, b` becomes `b, a`"),
    ("    y = 1\n    x += 1\n    return x", "    y = 1\n    return x", "delete `x += 1`"),
    ("    if a and b:", "    if a or b:", "`and` becomes `or`"),
    ("    a = 1\n    return a", "    a = 1\n    return None\n    return a", None),  # spans lines: no short note
])
def test_the_expert_names_its_change_before_the_edit(search, replace_, note):
    assert change_note(search, replace_) == note


def test_the_bug_edit_turn_says_what_it_changes():
    actions = injector_actions(make_artifact(10), {"pkg/core.py": SOURCE}, random.Random(0))
    assert actions[4].splitlines()[0].endswith("`+` becomes `-`.")


def kit_artifact():
    """`make_artifact(10)` with a bug the operators make (`change_constant`: `x + 10` becomes `x + 11`), so
    the kit's `mutate f` lists it, as change 1."""
    bug = ("diff --git a/pkg/core.py b/pkg/core.py\n--- a/pkg/core.py\n+++ b/pkg/core.py\n@@ -10,1 +10,1 @@\n"
           "-    return x + 10\n+    return x + 11\n")
    return replace(make_artifact(10), bug_inject=bug)


def test_the_kit_prompt_spells_out_each_command_the_kit_plan_runs():
    """The `kit` prompt lists the plan's commands with placeholders (PATH, NAME, K), so a policy can copy each
    from its context; every command of the expert's kit plan is that template filled in from an earlier
    observation: six turns, the bug a change `mutate` numbers."""
    from agent_scaffold.artifact_kit import KIT_COMMAND
    from agent_scaffold.roles import load_role

    prompt = load_role("injector", "kit").task_template
    templates = [LIST_TESTS, f"{KIT_COMMAND} oracle PATH", f"{KIT_COMMAND} mutate NAME", f"{KIT_COMMAND} mutate NAME K",
                 f"{KIT_COMMAND} weaken", f"{KIT_COMMAND} show NAME", f"{KIT_COMMAND} bug"]
    for template in templates:
        assert f"`{template}`" in prompt, template
    actions = injector_actions(kit_artifact(), {"pkg/core.py": SOURCE}, random.Random(0),
                               repo_files=["pkg/core.py", "tests/test_core.py"], strategy="kit")
    assert [parse_action(a).tool for a in actions] == ["bash"] * 5 + ["submit"]
    assert [parse_action(a).command.strip() for a in actions[:5]] == [
        LIST_TESTS, f"{KIT_COMMAND} oracle tests/test_core.py", f"{KIT_COMMAND} mutate f", f"{KIT_COMMAND} mutate f 1",
        f"{KIT_COMMAND} weaken"]


def test_the_kit_plan_demonstrates_only_bugs_mutate_lists():
    """A bug no operator makes (`+` becoming `-`) has no number to choose: the kit plan cannot show it, the
    direct plan still can."""
    sources = {"pkg/core.py": SOURCE}
    with pytest.raises(NotDemonstrable, match="not among the 1 changes `mutate f` lists"):
        injector_actions(make_artifact(10), sources, random.Random(0), strategy="kit")
    assert len(injector_actions(make_artifact(10), sources, random.Random(0))) == 8


KIT_SOURCE = SOURCE + "\n\ndef noop():\n    return None\n"
"""`SOURCE` and a function no operator can change."""


def _kit_repo(tmp_path, test_files: str = "tests/test_core.py\n", source: str = KIT_SOURCE, stored=(),
              next_function: bool = False, share: tuple[int, int] | None = None, rotate: bool = False):
    """A committed git repo with pkg/core.py (`source`), the artifact directory holding `test_files` and a
    test script that fails when `return x + 10` is gone, and a runner of the kit written for it (told of
    `stored` lines, the move-on and a share: its `KitView`)."""
    from agent_scaffold.artifact_kit import KitView, kit_source

    art, repo = tmp_path / "art", tmp_path / "repo"
    art.mkdir()
    repo.mkdir()
    _shell("git -c user.email=k@t -c user.name=k commit -qm base", source, repo)
    (art / "test_files.txt").write_text(test_files)
    (art / "test_script.sh").write_text('#!/bin/bash\nif grep -q "x + 10$" pkg/core.py; then echo "PASSED tests/test_core.py::test_f"; '
                                        'else echo "FAILED tests/test_core.py::test_f"; fi\n')
    (art / "test_parser.py").write_text(PARSER)
    kit = tmp_path / "kit.py"
    kit.write_text(kit_source(str(art), KitView(tuple(stored), next_function, share, rotate)))

    def run(*args):
        return subprocess.run([sys.executable, str(kit), *args], cwd=repo, capture_output=True, text=True)
    return art, repo, run


def _listing(changes, note: str | None, name: str) -> list[str]:
    """The lines `mutate NAME` prints for `changes`, with `note` below them."""
    return [*(f"{k}. line {m.line}: {m.old}  ->  {m.new}" for k, m in enumerate(changes, 1)), *([note] if note else []),
            f"Apply one: python /tmp/kit.py mutate {name} K"]


def test_the_kit_numbers_the_operators_changes_and_applies_one_from_the_committed_file(tmp_path):
    """`mutate NAME` prints `function_mutations` of the committed file, numbered; `mutate NAME K` writes change
    K over whatever the file holds now, runs the tests and saves bug_inject.diff, as `bug` does; a name or a
    number it did not list gets a message and exit 1."""
    from agent_scaffold.mutation_operators import function_mutations

    art, repo, run = _kit_repo(tmp_path)
    listed = run("mutate", "f")
    assert listed.returncode == 0
    expected = [f"{k}. line {m.line}: {m.old}  ->  {m.new}" for k, m in enumerate(function_mutations(SOURCE, "f"), 1)]
    assert listed.stdout.splitlines() == [*expected, "Apply one: python /tmp/kit.py mutate f K"]
    assert expected == ["1. line 10: return x + 10  ->  return x + 11"]
    (repo / "pkg" / "core.py").write_text(KIT_SOURCE.replace("import os", "import sys"))  # an earlier edit of its own
    applied = run("mutate", "f", "1")
    assert applied.returncode == 0, applied.stdout
    assert applied.stdout.splitlines() == ["Saved bug_inject.diff (pkg/core.py). With the bug: 0 passed, 1 failed.",
                                           "FAILED tests/test_core.py::test_f", "Next: python /tmp/kit.py weaken"]
    assert (repo / "pkg" / "core.py").read_text() == KIT_SOURCE.replace("x + 10", "x + 11")
    diff = (art / "bug_inject.diff").read_text()
    assert "\n-    return x + 10\n+    return x + 11\n" in diff and "import" not in diff
    for args, message in ((("mutate", "f", "2"), "No change 2: K is one of the numbers `python /tmp/kit.py mutate f` lists."),
                          (("mutate", "f", "one"), "No change one"),
                          (("mutate", "nope"), "No function nope in pkg/core.py: copy a name from"),
                          (("mutate", "noop"), "No listed change fits noop: choose another function")):
        out = run(*args)
        assert out.returncode == 1 and out.stdout.startswith(message), (args, out.stdout)


def test_the_kit_leaves_out_the_changes_on_lines_the_store_bugs_change(tmp_path):
    """`stored_lines` (`rollout.kit_store_view`): `mutate NAME` lists only the changes whose line no stored bug
    changes, numbered from 1, and says how many it left out; `mutate NAME K` applies the K-th of that list.
    A function with nothing left gets a message and exit 1; lines of another file hide nothing."""
    from agent_scaffold.mutation_operators import function_mutations

    source = KIT_SOURCE + "\n\ndef g(a, b):\n    if a < b:\n        c = a + b\n        return c\n    return a\n"
    every = function_mutations(source, "g")
    first = every[0].line
    fresh = [m for m in every if m.line != first]
    assert fresh and len(fresh) < len(every)
    art, repo, run = _kit_repo(tmp_path, source=source, stored=[("pkg/core.py", first), ("pkg/core.py", 10),
                                                                  ("pkg/other.py", fresh[0].line)])
    listed = run("mutate", "g")
    assert listed.returncode == 0
    assert listed.stdout.splitlines() == _listing(
        fresh, f"({len(every) - len(fresh)} more on lines that bugs in the store already change: not listed.)", "g")
    assert run("mutate", "g", "1").returncode == 0
    assert (repo / "pkg" / "core.py").read_text() == fresh[0].source
    for args in (("mutate", "f"), ("mutate", "f", "1")):
        out = run(*args)
        assert out.returncode == 1
        assert out.stdout.startswith("Every change of f is on a line that a bug in the store already changes: "
                                     "choose another function, or change it with str_replace.")
    (tmp_path / "other").mkdir()
    (tmp_path / "none").mkdir()
    _, _, unaware = _kit_repo(tmp_path / "other", source=source, stored=[("pkg/other.py", first)])
    assert unaware("mutate", "g").stdout == _kit_repo(tmp_path / "none", source=source)[2]("mutate", "g").stdout


def test_the_kit_leaves_out_a_change_that_touches_a_stored_line_after_its_first(tmp_path):
    """A statement dropped from several lines changes each of them, and the store's rule (`keys_match`) calls a
    bug with any changed line in common the same bug: a stored line inside the statement, not only its
    first, hides the change. `Mutation.last` is the statement's last line; a one-line change ends where it
    starts."""
    from agent_scaffold.mutation_operators import function_mutations

    source = KIT_SOURCE + "\n\ndef h(a):\n    total = max(\n        a,\n        0,\n    )\n    return total\n"
    every = function_mutations(source, "h")
    dropped = next(m for m in every if m.new == "pass")
    assert dropped.last == dropped.line + 3 and source.splitlines()[dropped.last - 1].strip() == ")"
    assert [m.last for m in every if m.old == "0,"] == [dropped.line + 2]  # `0,` -> `1,`: one line
    inside = dropped.line + 1  # the `a,` line: not the first line of any change
    assert all(m.line != inside for m in every)
    fresh = [m for m in every if not m.line <= inside <= m.last]
    assert dropped not in fresh and fresh
    _, _, run = _kit_repo(tmp_path, source=source, stored=[("pkg/core.py", inside)])
    listed = run("mutate", "h")
    assert listed.returncode == 0
    assert listed.stdout.splitlines() == _listing(
        fresh, f"({len(every) - len(fresh)} more on lines that bugs in the store already change: not listed.)", "h")


def test_with_next_function_the_kit_moves_on_from_a_used_up_function_to_the_next_one(tmp_path):
    """`next_function` (`rollout.kit_next_function`): when every change of NAME is on a stored line,
    `mutate NAME` lists the next function's fresh changes (after NAME in the file, then from the top) and
    says so below them, `mutate NAME K` and `mutate OTHER K` both apply the K-th of that list, and only when no
    function has a fresh change does it refuse. Without the flag the refusal stands."""
    from agent_scaffold.mutation_operators import function_mutations, function_names

    source = KIT_SOURCE + "\n\ndef g(a, b):\n    if a < b:\n        c = a + b\n        return c\n    return a\n"
    assert function_names(source) == ["helper", "f", "noop", "g"]  # noop has no change: passed over
    f_lines = [(("pkg/core.py", m.line)) for m in function_mutations(source, "f")]
    g = function_mutations(source, "g")
    art, repo, run = _kit_repo(tmp_path, source=source, stored=[*f_lines, ("pkg/core.py", g[0].line)],
                               next_function=True)
    fresh = [m for m in g if m.line != g[0].line]
    listed = run("mutate", "f")
    assert listed.returncode == 0
    assert listed.stdout.splitlines() == _listing(
        fresh, "(Every change of f is on a line that a bug in the store already changes: these are the changes of g, "
        "the next function of pkg/core.py with one elsewhere.)", "f")
    assert run("mutate", "f", "1").returncode == 0
    assert (repo / "pkg" / "core.py").read_text() == fresh[0].source
    _shell("git checkout -q -- pkg/core.py", source, repo)
    assert run("mutate", "g", "1").returncode == 0 and (repo / "pkg" / "core.py").read_text() == fresh[0].source
    # g used up as well: from g the search wraps around to helper, the first function of the file
    every = [("pkg/core.py", m.line) for name in ("f", "g") for m in function_mutations(source, name)]
    (tmp_path / "wrap").mkdir()
    _, _, wrapped = _kit_repo(tmp_path / "wrap", source=source, stored=every, next_function=True)
    helper = function_mutations(source, "helper")
    out = wrapped("mutate", "g")
    assert out.returncode == 0 and "the changes of helper," in out.stdout
    assert f"1. line {helper[0].line}: {helper[0].old}" in out.stdout
    # nothing fresh anywhere: the refusal, with or without the flag
    everything = every + [("pkg/core.py", m.line) for m in helper]
    for flag in (True, False):
        (tmp_path / f"none{flag}").mkdir()
        _, _, none = _kit_repo(tmp_path / f"none{flag}", source=source, stored=everything, next_function=flag)
        out = none("mutate", "g")
        assert out.returncode == 1 and out.stdout.startswith("Every change of g is on a line that a bug in the store "
                                                             "already changes: choose another function")


def test_with_next_function_a_function_with_no_change_moves_on_too(tmp_path):
    """`next_function`: `mutate noop` (no operator changes noop) lists the next function's changes, wrapping
    round to the top of the file, and says why, where without the flag it refuses."""
    from agent_scaffold.artifact_kit import NO_CHANGE
    from agent_scaffold.mutation_operators import function_mutations

    _, repo, run = _kit_repo(tmp_path, next_function=True)
    helper = function_mutations(KIT_SOURCE, "helper")
    listed = run("mutate", "noop")
    assert listed.returncode == 0
    assert listed.stdout.splitlines() == _listing(
        helper, f"(noop {NO_CHANGE}: these are the changes of helper, the next function of pkg/core.py with one "
        "elsewhere.)", "noop")
    assert run("mutate", "noop", "1").returncode == 0
    assert (repo / "pkg" / "core.py").read_text() == helper[0].source


def _shared_g():
    """KIT_SOURCE with a function g of 8 changes on 4 lines, g's changes, its first line stored, and the 7
    changes on the other lines: the round the share tests split."""
    from agent_scaffold.mutation_operators import function_mutations

    source = KIT_SOURCE + ("\n\ndef g(a, b):\n    if a < b:\n        a = a + 1\n    if a > 3 and b:\n"
                           "        return a - b\n    return b * 2\n")
    g = function_mutations(source, "g")
    fresh = [m for m in g if m.line != g[0].line]
    assert len(fresh) == 7
    return source, g, [("pkg/core.py", g[0].line)], fresh


def test_a_share_lists_every_nth_fresh_change_and_moves_on_where_it_holds_none(tmp_path):
    """`share` (`rollout.kit_spread`): episode k of n lists the k-th, k+n-th, ... fresh change of NAME, so the
    n episodes' listings are disjoint and together hold every fresh change; the count below says what it left
    out and why. A share empty for NAME moves on to the next function where its share is not; a share empty
    everywhere lists the unshared changes, so a share never makes the kit refuse."""
    from agent_scaffold.artifact_kit import SHARE_NOTE, KitView

    source, g, stored, fresh = _shared_g()
    listings = []
    for k in range(3):
        (tmp_path / str(k)).mkdir()
        _, repo, run = _kit_repo(tmp_path / str(k), source=source, stored=stored, next_function=True, share=(k, 3))
        out = run("mutate", "g")
        assert out.returncode == 0
        mine = fresh[k::3]
        assert out.stdout.splitlines() == _listing(
            mine, f"({len(g) - len(mine)} more on lines that bugs in the store already change, or {SHARE_NOTE}: "
            "not listed.)", "g")
        assert run("mutate", "g", "1").returncode == 0
        assert (repo / "pkg" / "core.py").read_text() == mine[0].source
        listings.append([m.source for m in mine])
    assert sorted(sum(listings, [])) == sorted(m.source for m in fresh)  # disjoint, and every fresh change
    # f has one change: share (1, 2) holds none of it and moves on to g, where it holds g's 2nd, 4th, ...
    (tmp_path / "f").mkdir()
    _, _, run = _kit_repo(tmp_path / "f", source=source, next_function=True, share=(1, 2))
    out = run("mutate", "f")
    assert out.returncode == 0
    assert out.stdout.splitlines()[0] == f"1. line {g[1].line}: {g[1].old}  ->  {g[1].new}"
    assert f"(The changes of f are {SHARE_NOTE}: these are the changes of g," in out.stdout
    # a share that holds nothing anywhere: every fresh change is listed, as without a share
    lone = SOURCE.replace("import os\n", "")
    (tmp_path / "lone").mkdir()
    _, _, run = _kit_repo(tmp_path / "lone", source=lone, next_function=True, share=(5, 6))
    (tmp_path / "plain").mkdir()
    assert run("mutate", "f").stdout == _kit_repo(tmp_path / "plain", source=lone, next_function=True)[2]("mutate", "f").stdout
    with pytest.raises(ValueError, match="0 <= k < n"):
        KitView(share=(2, 2))


def test_a_rotated_share_lists_every_fresh_change_from_its_own_place(tmp_path):
    """`rotate` (`rollout.kit_share_by`): episode k of n lists all of NAME's fresh changes, the count of stored
    ones as without a share, starting k/n of the way in and wrapping round, so `mutate NAME 1` (and 2)
    applies a different change in each episode; a moved-on listing is rotated the same way."""
    from agent_scaffold.mutation_operators import function_mutations

    source, g, stored, fresh = _shared_g()
    firsts, seconds = [], []
    for k in range(3):
        (tmp_path / str(k)).mkdir()
        _, repo, run = _kit_repo(tmp_path / str(k), source=source, stored=stored, next_function=True, share=(k, 3),
                                 rotate=True)
        cut = k * 7 // 3
        out = run("mutate", "g")
        assert out.returncode == 0
        assert out.stdout.splitlines() == _listing(
            fresh[cut:] + fresh[:cut], "(1 more on lines that bugs in the store already change: not listed.)", "g")
        assert run("mutate", "g", "1").returncode == 0
        firsts.append((repo / "pkg" / "core.py").read_text())
        seconds.append(fresh[(cut + 1) % 7].source)
    assert firsts == [fresh[0].source, fresh[2].source, fresh[4].source]
    assert len(set(seconds)) == 3
    # f used up: the move-on to g is rotated too
    (tmp_path / "f").mkdir()
    f_lines = [("pkg/core.py", m.line) for m in function_mutations(source, "f")]
    _, _, run = _kit_repo(tmp_path / "f", source=source, stored=f_lines, next_function=True, share=(1, 2), rotate=True)
    out = run("mutate", "f").stdout.splitlines()
    assert out[0] == f"1. line {g[4].line}: {g[4].old}  ->  {g[4].new}" and len(out) == len(g) + 2


def test_stored_paths_that_a_model_wrote_stay_data_in_the_kit(tmp_path):
    """The stored lines come from bug diffs that policies wrote, so their paths are hostile text: quotes,
    braces, newlines and code in a path stay a key of the kit's table, run nothing, and hide nothing else."""
    marker = tmp_path / "pwned"
    hostile = [f'pkg/core.py"]; open("{marker}", "w")#', "a'b\n{x}\\", f"\"\"\"; open('{marker}', 'w'); \"\"\""]
    art, repo, run = _kit_repo(tmp_path, stored=[(path, 10) for path in hostile])
    listed = run("mutate", "f")
    assert listed.returncode == 0 and listed.stdout.startswith("1. line 10: return x + 10  ->  return x + 11\n")
    assert not marker.exists()


def test_the_kit_oracle_lists_the_functions_code_would(tmp_path):
    """`oracle` ends with what `code` prints, so the plan needs no turn for it, and the next command; a first
    oracle file not named after its code gets `code`'s message there, and `oracle` still succeeds."""
    art, repo, run = _kit_repo(tmp_path)
    (art / "test_files.txt").unlink()
    ran = run("oracle", "tests/test_core.py")
    assert ran.returncode == 0
    code_listing = run("code").stdout
    assert ran.stdout.splitlines()[1:] == [*code_listing.splitlines(), "Next: python /tmp/kit.py mutate NAME, NAME a "
                                                                       "function listed above."]
    assert code_listing.startswith("pkg/core.py\n")
    (repo / "tests" / "core_checks.py").write_text("def test_f():\n    pass\n")
    other = run("oracle", "tests/core_checks.py")
    assert other.returncode == 0 and other.stdout.splitlines()[1].startswith("The first oracle file is not named test_X.py")


def test_the_kit_lists_and_shows_what_the_direct_commands_print(tmp_path):
    """`kit.py code` and `kit.py show NAME` print what the direct plan's grep and sed print, in a git repo."""
    from agent_scaffold.artifact_kit import kit_source
    from selfplay.demos.injector import list_functions_command, view_function_command

    art, repo = tmp_path / "art", tmp_path / "repo"
    art.mkdir()
    repo.mkdir()
    (art / "test_files.txt").write_text("tests/test_core.py\n")
    kit = tmp_path / "kit.py"
    kit.write_text(kit_source(str(art)))

    def run(*args):
        return subprocess.run([sys.executable, str(kit), *args], cwd=repo, capture_output=True, text=True)

    for args, direct in ((["code"], list_functions_command("core.py")),
                         (["show", "f"], view_function_command("pkg/core.py", "f"))):
        expected = _shell(direct, SOURCE, repo)
        ran = run(*args)
        assert ran.returncode == 0 and ran.stdout == expected, (ran.stdout, expected)
    missing = run("show", "nope")
    assert missing.returncode == 1
    assert missing.stdout.startswith("No function nope in pkg/core.py: copy a name from `python /tmp/kit.py code`.")
    (art / "test_files.txt").write_text("tests/core_checks.py\n")
    assert run("code").stdout.startswith("The first oracle file is not named test_X.py")
    (art / "test_files.txt").write_text("\n")  # emptied by the policy: said, not a traceback
    empty = run("code")
    assert empty.returncode == 1 and empty.stdout.startswith("test_files.txt is empty: run `python /tmp/kit.py oracle")
