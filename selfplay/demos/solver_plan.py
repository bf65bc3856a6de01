"""The scripted solver's plan: the actions a careful agent takes on a procedural task (pure).

Reproduce (put the spec's tests back, run the failing one), locate, read the function, repair with
`str_replace`, re-run, restore the test files, submit. The expert knows the bug (from `bug_inject.diff`),
so it reads the right function; what varies, drawn from a seeded `random.Random`, is the wording of the
thoughts, the commands (pytest node id or `-k`, `tail` lengths), an optional orientation step or wrong
first look, the view window, extra SEARCH context and a final run of the whole test file.

Nothing the policy must type comes from the expert's privileged knowledge alone, where the episode can
show it first: the expert locates a function with a repo-wide `git grep` for its definition, whose output
names the file and the `def` line, and then views that file from that line. A policy imitating it copies
the path and the line from its context, which a small model can learn; a path written from memory is a
path of some training repo on a held-out task. With `visible_only` (the warm start's `locate: visible`) the
function comes from the spec itself: the expert quotes the call the new test makes (`inflection.singularize`)
and views and edits that name (`view inflection.singularize`, `str_replace inflection.singularize`; the
editor goes to its definition, `agent_scaffold.symbols`), so nothing is copied out of an observation but the
lines to replace. FORMAT 17 policies found the right `def` line with a grep and then wrote the call where the
hit's path goes. A task whose spec never names the bug's function is not demonstrated (`NotDemonstrable`):
FORMAT 11 demonstrations grepped names the spec did not show (3 of the default's 6), and on held-out repos its
policy grepped names it made up or qualified (`def inflections.singularize(`), found nothing, and never
reached the code.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from agent_scaffold.editor import page_last
from agent_scaffold.mutation_operators import OPERATORS_BY_NAME
from selfplay.demos.bug import (
    LINE_OPERATORS,
    Function,
    Hunk,
    change_note,
    enclosing_function,
    line_mutants,
    other_functions,
    parse_hunks,
    repair,
)
from selfplay.errors import DiffError, NotDemonstrable

FENCE = "```"


@dataclass(frozen=True)
class SolverTask:
    """What the expert is given: the task's spec and failing tests, plus its knowledge of the bug."""

    spec: str
    """The solver's spec: the reversed test-weakening diff shown in the prompt."""
    fail_to_pass: tuple[str, ...]
    """Test ids that fail in the buggy state (as in the task)."""
    bug_inject: str
    """The bug diff (the expert's privileged knowledge)."""
    buggy_sources: dict[str, str]
    """Content of each file the bug changed, in the buggy state."""
    reproduce: bool = True
    """Put the spec's tests back and run the failing one before the fix (quotes the spec once more, so
    the caller turns it off for long specs); without it the expert reads the spec, fixes, and runs the
    test file."""
    short: bool = False
    """The shortest plan: find the function named by the spec's test (grep), view it, repair it, submit.
    One turn per step and no action quoting the spec, for runs whose solver budget is a few turns of
    ~100 tokens (the default run: 4 turns of 96), where the full plan (6-9 turns) runs out of turns."""
    visible_only: bool = False
    """Locate only by the call the spec shows (`spec_call`), NotDemonstrable when the spec's added lines never
    name the bug's function: view and edit that name (`view inflection.singularize`), no grep and no wrong
    first look. The view is the page from the `def` line (`def_page`), so NotDemonstrable too when that page
    would end before the bug."""
    localize: bool = False
    """Locate with the `localize` tool (`agent_scaffold.localize`): the expert's plan is `localize_actions`."""
    ranked: tuple[tuple[str, int], ...] = ()
    """With `localize`: the first (path, line)s the tool lists in this task's buggy state, in order, as many as
    the expert may edit (the caller runs it in the sandbox before the episode; the episode's own call shows
    the same list)."""
    recover: bool = False
    """With `localize`: a bug whose line is listed second is demonstrated with a recovery (`recovery_plan`):
    a wrong edit of the first listed line, `localize` again, that edit undone, the second line repaired.
    `buggy_sources` must then hold the first listed line's file too."""


@dataclass(frozen=True)
class Plan:
    """A demonstration's actions, and which of them SFT does not train on."""

    actions: tuple[str, ...]
    """Each one reply (a thought plus one fenced block), in order."""
    unlearned: tuple[int, ...] = ()
    """Indices of actions the episode plays but that carry no loss: the recovery's wrong first edit, shown so
    that the policy learns what follows one, not to make it."""


def block(tool: str, body: str = "") -> str:
    return f"{FENCE}{tool}\n{body}{FENCE}" if not body else f"{FENCE}{tool}\n{body.rstrip(chr(10))}\n{FENCE}"


def _pick(rng: random.Random, options: list[str], **values: str) -> str:
    return rng.choice(options).format(**values)


def spec_call(spec: str, name: str) -> str | None:
    """How the spec's added lines name `name`: the dotted expression that ends in it as a whole word
    (`inflection.singularize`, `oneof.options`, `itemfilter`), first occurrence; None when they never do."""
    pattern = re.compile(r"(?<![\w.])((?:[A-Za-z_]\w*\.)*" + re.escape(name) + r")(?![\w])")
    return next((m.group(1) for line in _added_lines(spec) if (m := pattern.search(line))), None)


def _added_lines(spec: str) -> list[str]:
    """The lines the spec's diff adds, without their `+` (file headers left out)."""
    return [line[1:] for line in spec.splitlines() if line.startswith("+") and not line.startswith("+++")]


def _find_thought(rng: random.Random, name: str, call: str | None) -> str:
    """The thought before the locate action: with `call` (`spec_call`), the spec's words quoted, which the
    view then copies; else the bare name, which the grep copies."""
    if call is None:
        return _pick(rng, ["The failure points at `{f}`. Let me find it.", "Let me locate `{f}`.",
                           "Where is `{f}` defined?"], f=name)
    return _pick(rng, ["The new test calls `{c}`. Let me read it.", "The test uses `{c}`. Let me view it."], c=call)


def locate(name: str) -> str:
    """The command that finds where `name` is defined: its output is `path:line:def name(`."""
    return f"git grep -n \"def {name}(\" -- '*.py'"


OBSERVATION_CHARS = 1500
"""Longest observation of a demonstration (`solver.DEMO_LIMITS.max_observation_chars`, the held-out bench's
too): the page a `visible_only` view shows (`editor.page_last`) and so whether the bug's line is on it."""


def def_page(fn: Function, source: str, last_line: int) -> int | None:
    """The `visible_only` view, `view PATH N`: N is the `def` line the grep printed (copied, never computed;
    FORMAT 13 policies copied START and typed an END before it). Its page must show the bug's `last_line`
    and the line after it; None when it would not."""
    lines = source.split("\n")[:-1] if source.endswith("\n") else source.split("\n")
    return fn.start if page_last(lines, fn.start, OBSERVATION_CHARS) >= min(fn.end, last_line + 1) else None


def _last_line(h: Hunk) -> int:
    """1-based line in the buggy file of the hunk's last changed line (for a pure deletion, the one before)."""
    return h.new_start + len(h.side(" +", 0, h.changed[1] + 1)) - 1


def _target(task: SolverTask, path: str, fn: Function) -> str:
    """The view's and the str_replace's target: with `visible_only`, the call the spec makes (the editor
    goes to its definition, and a str_replace edits the first match from there on), because FORMAT 17
    policies wrote that call where a grep hit's path goes; else the path."""
    if task.visible_only and fn.name and (call := spec_call(task.spec, fn.name)):
        return call
    return path


def _view(task: SolverTask, path: str, fn: Function, line: int, pad: int) -> str:
    """The view command: the page from the `def` line with `visible_only` (`view inflection.singularize`),
    else a window around the bug."""
    if task.visible_only and fn.name:
        return f"view {_target(task, path, fn)}"
    start, end = view_window(fn, line, pad)
    return f"view {path} {start} {end}"


def view_window(fn: Function, line: int, pad: int) -> tuple[int, int]:
    """Lines to view around the bug at `line`: from the `def` line (the one `locate` printed) when the bug
    is near it, else from a few lines above the bug."""
    start = fn.start if line - fn.start <= 12 else max(fn.start, line - pad - 3)
    return start, min(fn.end, max(line + pad, start + 6), start + 16)


def _pytest(rng: random.Random, test_id: str) -> str:
    path, _, rest = test_id.partition("::")
    name = rest.split("::")[-1].split("[", 1)[0]
    tail = rng.choice((8, 10, 12))
    if "[" in rest or rng.random() < 0.4:
        return f"python -m pytest -p no:cacheprovider -q -x --tb=short -k {name} {path} 2>&1 | tail -n {tail}"
    return f"python -m pytest -p no:cacheprovider -q -x --tb=short {path}::{rest} 2>&1 | tail -n {tail}"


def visible_target(task: SolverTask) -> tuple[str, str, int]:
    """With `visible_only`: the spec's call of the bug's function, the file it is in and its `def` line,
    where the editor must resolve that call (`Editor.definition`) for the view to show the bug; the caller
    checks it in the sandbox. NotDemonstrable as `solver_actions` raises it."""
    h0 = parse_hunks(task.bug_inject)[0]
    fn = enclosing_function(task.buggy_sources[h0.path], h0.first_changed_line)
    call = spec_call(task.spec, fn.name) if fn and fn.name else None
    if call is None:
        raise NotDemonstrable(f"the spec's added lines never name `{fn.name if fn else '(no function)'}`, the "
                              "function the bug is in, so its locate step would be a name the policy cannot read")
    return call, h0.path, fn.start


def expert_plan(task: SolverTask, rng: random.Random) -> Plan:
    """The plan of one demonstration: `solver_actions`, or with `localize` and `recover` the recovery of a bug
    listed second."""
    if task.localize:
        return localize_plan(task, rng)
    return Plan(tuple(solver_actions(task, rng)))


def solver_actions(task: SolverTask, rng: random.Random) -> list[str]:
    """The actions of one demonstration, in order, each one reply (a thought plus one fenced block)."""
    if task.localize:
        return list(localize_plan(task, rng).actions)
    hunks = parse_hunks(task.bug_inject)
    if any(FENCE in line for line in task.spec.splitlines()):
        raise DiffError("the spec contains a code fence; the expert cannot quote it in a bash block")
    h0 = hunks[0]
    source = task.buggy_sources[h0.path]
    fn = enclosing_function(source, h0.first_changed_line) or Function("", max(1, h0.first_changed_line - 5),
                                                                          h0.first_changed_line + 5)
    if task.visible_only:
        visible_target(task)  # NotDemonstrable when the spec never names the bug's function
    last = _last_line(h0)
    if task.visible_only and def_page(fn, source, last) is None:
        raise NotDemonstrable(f"the page `view {h0.path} {fn.start}` shows (`def {fn.name}`, "
                              f"{OBSERVATION_CHARS} characters) ends before the bug (line {last})")
    test_id = rng.choice(sorted(task.fail_to_pass))
    test_path = test_id.partition("::")[0]
    spec_files = sorted({line[6:].strip() for line in task.spec.splitlines() if line.startswith("+++ b/")})
    if task.short:
        return _short(task, rng, hunks, fn)
    actions: list[str] = []

    r = rng.random()
    if r < 0.2:
        actions.append(_pick(rng, ["Let me look at the repository first.", "First, the layout of the repo."])
                       + "\n" + block("bash", rng.choice(["ls", "git status --short && ls"])))
    elif r < 0.35 and fn.name and not task.visible_only:
        others = other_functions(source, fn.name)
        if others:  # a wrong first look: a plausible but unrelated function
            other = rng.choice(others)
            actions.append(_pick(rng, ["Maybe `{o}` is involved; let me check where it is defined.",
                                       "Let me start by looking for `{o}`."], o=other)
                           + "\n" + block("bash", locate(other)))

    run = _pytest(rng, test_id)
    if not task.reproduce:
        actions.extend(_fix_and_finish(task, rng, hunks, fn, source, test_path, spec_files,
                                       f"python -m pytest -p no:cacheprovider -q {test_path} 2>&1 | tail -n 5"))
        return actions
    apply = rng.choice(["git apply", "git apply -v"])
    actions.append(_pick(rng, ["The spec adds tests that the current code fails. Let me add them to reproduce the failure.",
                               "I will apply the test changes from the spec, then run the new tests.",
                               "First I reproduce the problem: apply the improved tests."])
                   + "\n" + block("bash", f"{apply} <<'EOF'\n{task.spec.rstrip(chr(10))}\nEOF"))
    actions.append(_pick(rng, ["Now run the failing test and read the traceback.", "Let me run `{t}`.",
                               "Run the new test to see how it fails."], t=test_id.split("::")[-1])
                   + "\n" + block("bash", run))
    actions.extend(_fix_and_finish(task, rng, hunks, fn, source, test_path, spec_files, run))
    return actions


def _fix_and_finish(task: SolverTask, rng: random.Random, hunks: list, fn: Function, source: str,
                    test_path: str, spec_files: list[str], run: str) -> list[str]:
    h0 = hunks[0]
    actions: list[str] = []
    view = _view(task, h0.path, fn, h0.first_changed_line, rng.choice((3, 4, 6)))
    if task.visible_only:  # the spec's call is viewed as is: nothing to find first
        actions.append(_find_thought(rng, fn.name, spec_call(task.spec, fn.name)) + "\n" + block("edit", view))
    else:
        if fn.name:
            actions.append(_find_thought(rng, fn.name, None) + "\n" + block("bash", locate(fn.name)))
        where = f"`{fn.name}` in {h0.path}" if fn.name else h0.path
        actions.append(_pick(rng, ["Let me read {w}.", "Viewing {w} around the failing logic.",
                                   "Let me look at {w}."], w=where) + "\n" + block("edit", view))

    for h in hunks:
        search, replace = repair(h, task.buggy_sources[h.path], rng, extra_context=2)
        actions.append(_repair_thought(task, rng, h, search, replace,
                                       ["This line is wrong; fix it.", "Here is the bug. Let me repair it.",
                                        "The logic here is inverted from what the test expects. Fixing it."])
                       + "\n" + block("edit", f"str_replace {_target(task, h.path, fn)}\n<<<<<<< SEARCH\n"
                                              f"{search}\n=======\n{replace}\n>>>>>>> REPLACE"))
    actions.append(_pick(rng, ["Re-run the test.", "Check that the tests pass now.", "Run the tests again."])
                   + "\n" + block("bash", run.rsplit("| tail -n", 1)[0] + "| tail -n 2"))
    if task.reproduce and rng.random() < 0.5:
        actions.append(_pick(rng, ["Run the whole test file for regressions.", "And the rest of that file."])
                       + "\n" + block("bash", f"python -m pytest -p no:cacheprovider -q {test_path} 2>&1 | tail -n 3"))
    if task.reproduce:
        actions.append(_pick(rng, ["Restore the test files I changed.", "Put the tests back as they were."])
                       + "\n" + block("bash", "git checkout -- " + " ".join(spec_files or [test_path])))
    actions.append(_pick(rng, ["The tests pass. Submitting.", "Done.", "Fixed; submitting."]) + "\n" + block("submit"))
    return actions


QUOTED_LINE_CHARS = 80
"""Longest buggy line a repair thought quotes (`_repair_thought`); a longer one is named by number only."""


def _repair_thought(task: SolverTask, rng: random.Random, h: Hunk, search: str, replace: str,
                    plain: list[str]) -> str:
    """The thought before a repair: with `visible_only`, the line the view showed, quoted as the page shows
    it, and the change in words ("Line 40, `return s[:n + 1]`: delete `+ 1`.", `bug.change_note`), so the
    policy names the line and the change before it writes the edit. FORMAT 14 policies read the buggy line
    on the page, then wrote a SEARCH copied into REPLACE unchanged; FORMAT 18 policies, whose thought named
    a line number alone, wrote made-up numbers and changes ("Line 32: `not` becomes `and`.") and then left
    62 of 194 SEARCH texts unchanged: a quoted line ties the change to text the SEARCH then copies. Since
    FORMAT 20 the thought ends with the line as the repair leaves it ("..., so it reads `return s[:n]`."),
    which the REPLACE then copies. Else, or when the change has no short note, one of `plain`."""
    note = change_note(search, replace, operators=True) if task.visible_only else None
    if note is None:
        return rng.choice(plain)
    quoted, fixed = _buggy_line(h), _fixed_line(h)
    if quoted is None:
        return _pick(rng, ["Line {n}: {c}.", "The bug is on line {n}: {c}."], n=str(h.first_changed_line), c=note)
    if fixed is None:
        return _pick(rng, ["Line {n}, `{q}`: {c}.", "The bug is on line {n}, `{q}`: {c}."],
                     n=str(h.first_changed_line), q=quoted, c=note)
    return _pick(rng, ["Line {n}, `{q}`: {c}, so it reads `{f}`.", "The bug is on line {n}, `{q}`: {c}, so `{f}`."],
                 n=str(h.first_changed_line), q=quoted, c=note, f=fixed)


def _quotable(line: str | None) -> str | None:
    return line if line and len(line) <= QUOTED_LINE_CHARS and "`" not in line else None


def _buggy_line(h: Hunk) -> str | None:
    """The hunk's first changed line as the buggy file has it, stripped; None for a hunk that only deletes
    (the buggy file lacks the line), or a line too long or with a backtick to quote."""
    return _quotable(next((text.strip() for tag, text in h.lines if tag == "+"), None))


def _fixed_line(h: Hunk) -> str | None:
    """That line as the repair leaves it (the hunk's first removed line, stripped), when the hunk both adds
    and removes lines: the thought writes the changed line right after the change in words, where FORMAT 19
    policies quoted the line, named the change ("delete `not`"), and then copied the line into REPLACE
    unchanged (75 of 88 SEARCH texts)."""
    if not any(tag == "+" for tag, _ in h.lines):
        return None
    return _quotable(next((text.strip() for tag, text in h.lines if tag == "-"), None))


def _short(task: SolverTask, rng: random.Random, hunks: list, fn: Function) -> list[str]:
    """grep -> view (with `visible_only`, the view of the spec's call alone) -> str_replace per hunk -> submit;
    SEARCH with no extra context, so each action stays short."""
    h0 = hunks[0]
    where = f"`{fn.name}`" if fn.name else h0.path
    view = _view(task, h0.path, fn, h0.first_changed_line, 4)
    if task.visible_only:
        actions = [_find_thought(rng, fn.name, spec_call(task.spec, fn.name)) + "\n" + block("edit", view)]
    else:
        grep = locate(fn.name) if fn.name else f"grep -c '' {h0.path}"
        actions = [_pick(rng, ["The test calls {w}. Find it.", "Locate {w}."], w=where) + "\n" + block("bash", grep),
                   _pick(rng, ["Read it.", "View the logic."]) + "\n" + block("edit", view)]
    for h in hunks:
        search, replace = repair(h, task.buggy_sources[h.path], rng, extra_context=0)
        actions.append(_repair_thought(task, rng, h, search, replace, ["Fix it.", "This line is wrong."])
                       + "\n" + block("edit", f"str_replace {_target(task, h.path, fn)}\n<<<<<<< SEARCH\n"
                                              f"{search}\n=======\n{replace}\n>>>>>>> REPLACE"))
    return actions + [_pick(rng, ["Fixed.", "Done."]) + "\n" + block("submit")]


LOCALIZE_RANKS = 3
"""The `localize` plan is demonstrated only when the bug's line is among the first this many lines the tool
lists: the line the expert edits is one the policy has just read, and one an imitating policy can pick."""
ORDINALS = ("first", "second", "third", "fourth", "fifth")


def localize_actions(task: SolverTask, rng: random.Random) -> list[str]:
    """localize -> `str_replace PATH:LINE` of the listed buggy line, SEARCH that line as the tool printed it
    (stripped) -> maybe localize again to see no test fail -> submit. NotDemonstrable for a bug that is not
    one changed line, or whose line the tool does not list among the first `LOCALIZE_RANKS`."""
    return list(localize_plan(task, rng).actions)


def localize_plan(task: SolverTask, rng: random.Random) -> Plan:
    """`localize_actions`, or with `recover` and the bug's line listed second, `recovery_plan`."""
    hunks = parse_hunks(task.bug_inject)
    added = [i for i, (tag, _) in enumerate(hunks[0].lines) if tag == "+"] if len(hunks) == 1 else []
    if len(added) != 1:
        raise NotDemonstrable("the bug is not one changed line, so no one listed line repairs it")
    h = hunks[0]
    line = h.new_start + sum(1 for tag, _ in h.lines[:added[0]] if tag != "-")
    listed = task.ranked[:LOCALIZE_RANKS]
    if (h.path, line) not in listed:
        raise NotDemonstrable(f"localize does not list the bug's line {h.path}:{line} among its first "
                              f"{LOCALIZE_RANKS} ({', '.join(f'{p}:{n}' for p, n in listed) or 'none'})")
    buggy = h.lines[added[0]][1]
    original = [text for tag, text in h.lines if tag == "-"]
    search = buggy.strip()
    # The SEARCH matches inside the line's indentation, so the first REPLACE line goes there stripped and any
    # further line keeps its own indentation.
    replace = "\n".join([original[0].strip(), *original[1:]]) if original else ""
    opening = _pick(rng, ["The spec's tests fail. Let me see which lines they run.", "First, localize the failure.",
                          "Let me rank the lines the failing tests run."]) + "\n" + block("localize")
    rank = listed.index((h.path, line))
    if task.recover and rank == 1:
        return recovery_plan(task, rng, opening, h.path, line, search, replace)
    actions = [opening, localized_edit(rng, rank, h.path, line, search, replace)]
    if rng.random() < 0.5:
        actions.append(_recheck(rng))
    return Plan((*actions, _pick(rng, ["Fixed.", "Done.", "Fixed; submitting."]) + "\n" + block("submit")))


def _recheck(rng: random.Random) -> str:
    return (_pick(rng, ["Check that the spec's tests pass now.", "Localize again to see that nothing fails."])
            + "\n" + block("localize"))


def recovery_plan(task: SolverTask, rng: random.Random, opening: str, path: str, line: int, search: str,
                  replace: str) -> Plan:
    """localize -> a wrong edit of the first listed line (`wrong_edit`; no loss) -> localize again, which still
    lists failing tests -> that edit undone (`undo PATH`: the path alone, where a reversed `str_replace` has two
    lines to copy, and RECOVERY_FORMAT 1 policies copied the wrong one twice) -> the second listed line (the bug's, at `path`:`line`) repaired as
    `search` -> `replace` -> submit. The one recovery a rank-1 policy needs on a bug listed second: the
    eighteenth to twenty-second attempts' policies edited the first listed line whatever it was, and then
    submitted or localized again without ever trying another (docs/benchmarks.md). NotDemonstrable when the
    first listed line has no one-line change (`wrong_edit`)."""
    first_path, first_line = task.ranked[0]
    source = task.buggy_sources.get(first_path)
    wrong = wrong_edit(source, first_line, rng) if source is not None else None
    if wrong is None:
        raise NotDemonstrable(f"the first listed line {first_path}:{first_line} has no one-line change for a "
                              "wrong first edit")
    was, changed = wrong
    undo = _pick(rng, ["The tests still fail, so line {n} was not the bug. Put it back.",
                       "Still failing: line {n} is not the bug. Undo my edit."], n=str(first_line))
    actions = (opening, localized_edit(rng, 0, first_path, first_line, was, changed), _recheck(rng),
               undo + "\n" + block("edit", f"undo {first_path}"),
               localized_edit(rng, 1, path, line, search, replace),
               _pick(rng, ["Fixed.", "Done.", "Fixed; submitting."]) + "\n" + block("submit"))
    return Plan(actions, unlearned=(1,))


WRONG_EDIT_FALLBACK = ("return_early", "drop_statement")
"""Operators for a wrong first edit when no `bug.LINE_OPERATORS` change the line (a guard's condition made
`True`, a statement made `pass`): half the first listed lines of the rank-1 build's undemonstrated toolz tasks
had no other change."""


def wrong_edit(source: str, line: int, rng: random.Random) -> tuple[str, str] | None:
    """A plausible change of line `line` of `source` that is not the repair: (the line, the line changed), both
    stripped, by one of `bug.LINE_OPERATORS` drawn by `rng`, else one of `WRONG_EDIT_FALLBACK`; None when none
    changes that line alone."""
    names = list(LINE_OPERATORS)
    rng.shuffle(names)
    for name in (*names, *WRONG_EDIT_FALLBACK):
        for n, new in line_mutants(source, OPERATORS_BY_NAME[name], rng, line=line):
            return source.splitlines()[n - 1].strip(), new.strip()
    return None


def localized_edit(rng: random.Random, rank: int, path: str, line: int, search: str, replace: str) -> str:
    """The edit turn after `localize`: the repair thought on the `rank`-th listed line, then `str_replace
    PATH:LINE` of `search` (the line as the tool printed it) by `replace`."""
    return (_localized_thought(rng, rank, line, search, replace) + "\n"
            + block("edit", f"str_replace {path}:{line}\n<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE"))


def _localized_thought(rng: random.Random, rank: int, line: int, search: str, replace: str) -> str:
    """"Listed first: line 35, `if len(x) != 1:`: `!=` becomes `==`, so it reads `if len(x) == 1:`." The
    rank says which listed line is edited, the rest is FORMAT 20's repair thought (`_repair_thought`)."""
    note = change_note(search, replace, operators=True)
    quoted, fixed = _quotable(search), _quotable(replace if "\n" not in replace else None)
    where = _pick(rng, ["Listed {r}: line {n}", "The {r} listed line, {n}"], r=ORDINALS[rank], n=str(line))
    if quoted is None:
        return f"{where}, is wrong. Fixing it."
    if note is None or fixed is None:
        return f"{where}, `{quoted}`, is wrong." + (f" It should read `{fixed}`." if fixed else "")
    return f"{where}, `{quoted}`: {note}, so it reads `{fixed}`."
