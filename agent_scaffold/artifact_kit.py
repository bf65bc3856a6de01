"""The injector's artifact kit: the `kit` strategy's helper for the artifact's fixed parts.

A bug artifact is five files, and three of them, plus the weakening, are the same text in every pytest repo:
the runner script, a parser of pytest's `-rA` lines, and a script that deletes the tests the bug breaks. The
`direct` strategy's policy types all of it (its demonstrations spend about 700 of their 2,500 tokens on it),
which a 135M policy trained on three demonstrations for one epoch never reproduced (docs/benchmarks.md).
The `kit` strategy gives its episodes one script, written into the sandbox before the first turn, that
writes those parts, finds the code the oracle tests by its name, and lists the changes the procedural
operators (`agent_scaffold.mutation_operators`) can make to a function. The policy still chooses the
oracle test file, the function to break and the change (one listed by `mutate`, or its own `str_replace`),
and `validate` judges the five submitted files exactly as it judges any others.

    python /tmp/kit.py oracle FILE...   test_files.txt, test_script.sh, test_parser.py; run them; then what
                                        `code` prints
    python /tmp/kit.py code             the code file the first oracle file tests (X.py for test_X.py)
                                        and its first 20 `def` lines
    python /tmp/kit.py mutate NAME      the operators' changes inside function NAME of that file, numbered
    python /tmp/kit.py mutate NAME K    apply change K to the committed file, then what `bug` does
    python /tmp/kit.py show NAME        function NAME of that file: its `def` line and the 20 after it
    python /tmp/kit.py bug              run the tests on the changed code, save bug_inject.diff
    python /tmp/kit.py weaken           delete the tests that failed, save test_weaken.diff

With `mutate` a bug's text comes from the operators, as a procedural seed's does; the policy's choices
are where and which, and the run's valid-bug rate is read beside that of random choices
(docs/benchmarks.md). An episode may be given the lines that the store's bugs of its repo already change
(`stored_lines`, `rollout.kit_store_view`): `mutate NAME` then leaves out the changes that touch one of
them anywhere from their first line to their last, and says how many it left out, so that a change it
lists is not a bug the curriculum holds (the store's own rule, `selfplay.task.keys_match`, which compares
every changed line, still judges every artifact). With
`next_function` (`rollout.kit_next_function`), a function whose every change is on such a line is not
refused: `mutate NAME` lists the changes of the next function of the file that has one elsewhere, says so
below the list, and `mutate NAME K` applies the K-th of that list, so a plan that names a used-up function
still writes a bug the store does not hold; a function with no change at all moves on the same way. With a
`share` (`rollout.kit_spread`), the episodes of one repo in one iteration, which all see the same store, each
list a disjoint share of every function's fresh changes (`stride`: episode k of n lists the k-th, k+n-th,
... of them), so no two of them are listed the same change, unless an episode's share of every function is
empty: it then lists the unshared changes. `rotate` hides nothing: episode k's listing starts k/n of the
way into the fresh changes and wraps round, so the same `mutate NAME K` applies a different change in each
episode of the round while every listing keeps its length.

All of it is an episode's `KitView`: what its kit is told of the store and of its round.

The kit runs as the agent uid, like any command of the episode, so it can do nothing the policy could not;
it lives in /tmp, which every sandbox reset empties, so no other episode sees it. Root writes it, so the
policy cannot rewrite it for a later call of the same episode.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from agent_scaffold import mutation_operators

if TYPE_CHECKING:
    from sandboxes.sandbox import Sandbox

KIT_STRATEGY = "kit"
"""The injector strategy whose episodes get the kit (`agent_scaffold/prompts/injector_kit.md`)."""
KIT_PATH = "/tmp/kit.py"
KIT_COMMAND = f"python {KIT_PATH}"
"""How the prompt and the demonstrations call it: the repo's interpreter, first on the sandbox's PATH."""

PARSER = """import json, re, sys
out = {}
for line in sys.stdin:
    m = re.match(r"(PASSED|FAILED|ERROR|XFAIL|XPASS) (\\S+::.+?)(?: - .*)?$", line.rstrip())
    if m and out.get(m[2]) != "failed":
        out[m[2]] = "failed" if m[1] in ("FAILED", "ERROR") else "passed"
print(json.dumps(out))
"""
"""A compact test_parser.py: pytest's -rA summary lines, the same verdicts as the built-in parser (XFAIL
and XPASS pass, ERROR fails, a failure wins). The `direct` expert types it; the kit writes it."""
WEAKEN = """import ast, re
bad = re.findall(r"^(?:FAILED|ERROR) (\\S+?)::(?:\\S+::)?(\\w+)", open("/tmp/buggy.log").read(), re.M)
for path in {p for p, _ in bad}:
    src = open(path).read().splitlines(True)
    for n in sorted(ast.walk(ast.parse("".join(src))), key=lambda n: -getattr(n, "lineno", 0)):
        if isinstance(n, ast.FunctionDef) and (path, n.name) in bad:
            del src[min([n.lineno] + [d.lineno for d in n.decorator_list]) - 1:n.end_lineno]
    open(path, "w").write("".join(src))
"""
"""Deletes every test function that failed in /tmp/buggy.log (the buggy run). The `direct` expert types
it; the kit runs it."""

DEF_LISTING = 20
"""`def` lines `code` prints (the `direct` plan's `grep -n "def " FILE | head -n 20`)."""
VIEW_AFTER = 20
"""Lines `show` prints after the `def` line (the `direct` plan's `sed -n '/def NAME(/,+20p' FILE`)."""

HIDDEN_NOTE = "more on lines that bugs in the store already change: not listed."
"""How `mutate NAME` ends a listing that the store's view shortened (after the count left out)."""
ALL_STORED = "is on a line that a bug in the store already changes"
"""How `mutate NAME` refuses a function whose every change the store's view left out."""
MOVED_ON = "these are the changes of "
"""How `mutate NAME` says, below the list, that it lists another function's changes (`next_function`), the
name after it. The note goes below so that the list starts as a plain listing does: with the note above it,
the 135M policy stopped copying NAME into `mutate NAME K` (docs/benchmarks.md, thirty-third attempt)."""

SHARE_NOTE = "left to the other episodes of this round"
"""How `mutate NAME` says that a `share` left changes out: in the count below a listing of NAME's own, and as
the reason it moved on when NAME's fresh changes are all other episodes'."""
NO_CHANGE = "has no listed change"
"""How `mutate NAME` says, moving on, that no operator changes NAME (`next_function`)."""

MUTATIONS_LISTED = 8
"""Changes `mutate NAME` lists at most (the first, by line)."""
CHANGE_CHARS = 50
"""Characters of a changed line's before and after that `mutate NAME` prints."""

_KIT = '''"""The injector's artifact kit (agent_scaffold/artifact_kit.py). Usage:
  python {path} oracle FILE...   write test_files.txt, test_script.sh and test_parser.py; run them
  python {path} code             list the functions of the code the first oracle file tests
  python {path} mutate NAME      list changes that could break function NAME of that code
  python {path} mutate NAME K    apply change K; run the tests on it; save bug_inject.diff
  python {path} show NAME        print function NAME of that code
  python {path} bug              run the tests on the changed code; save bug_inject.diff
  python {path} weaken           delete the tests that failed; save test_weaken.diff
"""
import json, os, subprocess, sys, types

D = {artifact_dir!r}
PARSER = {parser!r}
WEAKEN = {weaken!r}
OPERATORS = {operators!r}
STORED = {stored!r}
NEXT_FUNCTION = {next_function!r}
SHARE = {share!r}
ROTATE = {rotate!r}


def fail(message):
    print(message)
    sys.exit(1)


def test_files():
    if not os.path.exists(D + "/test_files.txt"):
        fail("No test_files.txt yet: run `python {path} oracle FILE...` first.")
    files = open(D + "/test_files.txt").read().split()
    if not files:
        fail("test_files.txt is empty: run `python {path} oracle FILE...` with a listed test file.")
    return files


def run_tests(log):
    with open(log, "w") as f:
        subprocess.run(["bash", D + "/test_script.sh"], stdout=f, stderr=subprocess.STDOUT)
    with open(log) as f:
        out = subprocess.run([sys.executable, D + "/test_parser.py"], stdin=f, capture_output=True, text=True).stdout
    try:
        return json.loads(out or "{{}}")
    except ValueError:
        fail("test_parser.py printed no JSON object.")


def git(*args):
    return subprocess.run(["git", *args], capture_output=True, text=True).stdout


def oracle(files):
    if not files:
        fail("Name the oracle test files: `python {path} oracle FILE...`.")
    missing = [f for f in files if not os.path.isfile(f)]
    if missing:
        fail("No such file: " + " ".join(missing) + ". Copy test file paths from the listing.")
    os.makedirs(D, exist_ok=True)
    open(D + "/test_files.txt", "w").write("\\n".join(files) + "\\n")
    open(D + "/test_script.sh", "w").write("#!/bin/bash\\npython -m pytest -rA -p no:cacheprovider " + " ".join(files) + "\\n")
    open(D + "/test_parser.py", "w").write(PARSER)
    verdicts = run_tests("/tmp/original.log")
    passed = sum(v == "passed" for v in verdicts.values())
    print("Wrote test_files.txt, test_script.sh, test_parser.py. On the original code: %d passed, %d failed."
          % (passed, len(verdicts) - passed))
    path, problem = find_code()
    print(problem or listing(path) + "\\nNext: python {path} mutate NAME, NAME a function listed above.")


def find_code():
    module = os.path.basename(test_files()[0])
    if not module.startswith("test_"):
        return None, "The first oracle file is not named test_X.py, so its code file X.py cannot be found by name."
    module = module[len("test_"):]
    found = [f for f in git("ls-files", "*" + module).split() if "test" not in f]
    if not found:
        return None, "No code file is named " + module + ": choose an oracle test file named after its code."
    return found[0], None


def code_file():
    path, problem = find_code()
    if problem:
        fail(problem)
    return path


def source_lines(path):
    lines = open(path).read().split("\\n")
    return lines[:-1] if lines and lines[-1] == "" else lines  # as sed counts them: no line after the last newline


def listing(path):
    lines = source_lines(path)
    return "\\n".join([path] + ["%d:%s" % (i, line) for i, line in enumerate(lines, 1) if "def " in line][:{listing}])


def code():
    print(listing(code_file()))


def show(name):
    path = code_file()
    lines = source_lines(path)
    at = next((i for i, line in enumerate(lines) if "def " + name + "(" in line), None)
    if at is None:
        fail("No function " + name + " in " + path + ": copy a name from `python {path} code`.")
    print("\\n".join(lines[at:at + {after} + 1]))


def mutations(path, name):
    """The changes `mutate NAME` lists, and the note below them (or None)."""
    ops = types.ModuleType("mutation_operators")
    sys.modules[ops.__name__] = ops  # dataclasses look the module up
    exec(compile(OPERATORS, "mutation_operators.py", "exec"), ops.__dict__)
    source = git("show", "HEAD:" + path)
    try:
        changes = ops.FileChanges(source)  # each function's changes worked out once, when the scan reaches it
    except SyntaxError:
        fail(path + " does not parse: choose another oracle test file.")
    found = changes.of(name)
    if found is None:
        fail("No function " + name + " in " + path + ": copy a name from `python {path} code`.")
    stored = set(STORED.get(path, ()))

    def untouched(listed):  # the changes with no line, from their first to their last, a stored bug changes
        return [m for m in listed if not stored.intersection(range(m.line, m.last + 1))]

    fresh = untouched(found)
    if not found:
        why = name + " {no_change}"
    elif not fresh:
        why = "Every change of " + name + " {all_stored}"
    else:
        why = "The changes of " + name + " are {share_note}"
    # without the move-on only NAME is looked at, and a share does nothing
    names, share_of = (changes.names, SHARE) if NEXT_FUNCTION else ([name], None)
    at = names.index(name)
    # a stride's share first; only where it is empty everywhere, every fresh change
    for share in ([share_of] if share_of and not ROTATE else []) + [None]:
        for other in [name] + names[at + 1:] + names[:at]:  # NAME, the functions after it, then those before
            every = changes.of(other)
            mine = untouched(every)
            mine = mine[share[0]::share[1]] if share else mine
            if not mine:
                continue
            hidden = len(every) - len(mine)
            if share_of and ROTATE:  # all of them, from this episode's place on
                cut = share_of[0] * len(mine) // share_of[1]
                mine = mine[cut:] + mine[:cut]
            if other != name:
                note = "(" + why + ": {moved_on}" + other + ", the next function of " + path + " with one elsewhere.)"
            elif hidden and share:
                note = "(%d more on lines that bugs in the store already change, or {share_note}: not listed.)" % hidden
            else:
                note = "(%d {hidden_note})" % hidden if hidden else None
            return mine[:{mutations}], note
    if not found:
        fail("No listed change fits " + name + ": choose another function, or change it with str_replace.")
    fail("Every change of " + name + " {all_stored}: choose another function, or change it with str_replace.")


def mutate(name, pick):
    path = code_file()
    found, note = mutations(path, name)
    if pick is None:
        for k, m in enumerate(found, 1):
            print("%d. line %d: %s  ->  %s" % (k, m.line, m.old[:{chars}], m.new[:{chars}]))
        if note:
            print(note)
        print("Apply one: python {path} mutate " + name + " K")
        return
    if not pick.isdigit() or not 1 <= int(pick) <= len(found):
        fail("No change " + pick + ": K is one of the numbers `python {path} mutate " + name + "` lists.")
    open(path, "w").write(found[int(pick) - 1].source)
    bug()


def bug():
    tests = test_files()
    code = [f for f in git("diff", "--name-only").split() if f not in tests]
    if not code:
        fail("No code file is changed: apply a change with `mutate NAME K`, or edit with str_replace, first.")
    verdicts = run_tests("/tmp/buggy.log")
    failed = sorted(t for t, v in verdicts.items() if v == "failed")
    open(D + "/bug_inject.diff", "w").write(git("diff", "--", *code))
    print("Saved bug_inject.diff (%s). With the bug: %d passed, %d failed."
          % (", ".join(code), len(verdicts) - len(failed), len(failed)))
    for t in failed[:3]:
        print("FAILED " + t[:72])
    print("Next: python {path} weaken" if failed else "No test fails: change the code so that some test fails.")


def weaken():
    tests = test_files()
    if not os.path.exists("/tmp/buggy.log"):
        fail("No buggy run yet: run `python {path} bug` first.")
    exec(WEAKEN, {{}})
    open(D + "/test_weaken.diff", "w").write(git("diff", "--", *tests))
    print("Deleted the failed tests; saved test_weaken.diff. " + D + " holds: " + " ".join(sorted(os.listdir(D))))
    print("Next: submit.")


if __name__ == "__main__":
    command, args = (sys.argv[1], sys.argv[2:]) if len(sys.argv) > 1 else ("", [])
    if command == "oracle":
        oracle(args)
    elif command == "code" and not args:
        code()
    elif command == "mutate" and len(args) in (1, 2):
        mutate(args[0], args[1] if len(args) == 2 else None)
    elif command == "show" and len(args) == 1:
        show(args[0])
    elif command in ("bug", "weaken") and not args:
        (bug if command == "bug" else weaken)()
    else:
        fail(__doc__.strip())
'''


@dataclass(frozen=True)
class KitView:
    """What an episode's kit is told of the store and of its round (`rollout.kit_store_view`)."""

    stored_lines: tuple[tuple[str, int], ...] = ()
    """(path, line) of the committed files' lines that the store's bugs already change: `mutate` lists no
    change there."""
    next_function: bool = False
    """`rollout.kit_next_function`: when NAME has no change off those lines (or none at all), `mutate NAME`
    lists (and `mutate NAME K` applies) the changes of the next function of the file that has one, instead of
    refusing."""
    share: tuple[int, int] | None = None
    """`rollout.kit_spread`, with `next_function`: (k, n), this episode's share of the fresh changes of every
    function (the k-th, k+n-th, ... of them) when n episodes of its repo play the same iteration."""
    rotate: bool = False
    """`rollout.kit_share_by: rotate`: the share lists every fresh change, starting k/n of the way in, instead
    of every n-th."""

    def __post_init__(self) -> None:
        if self.share is not None and not 0 <= self.share[0] < self.share[1]:
            raise ValueError(f"a kit share is (k, n) with 0 <= k < n, not {self.share!r}")


def kit_source(artifact_dir: str, view: KitView | None = None) -> str:
    """The kit's Python source for an episode whose artifact goes to `artifact_dir`, told `view`. Without
    stored lines the kit prints what it printed before the view existed, so demonstrations keep their text."""
    view = view or KitView()
    stored: dict[str, list[int]] = {}
    for path, line in sorted(set(view.stored_lines)):
        stored.setdefault(path, []).append(line)
    return _KIT.format(path=KIT_PATH, artifact_dir=artifact_dir, parser=PARSER, weaken=WEAKEN, listing=DEF_LISTING,
                       after=VIEW_AFTER, operators=Path(mutation_operators.__file__).read_text(),
                       mutations=MUTATIONS_LISTED, chars=CHANGE_CHARS, stored=stored, hidden_note=HIDDEN_NOTE,
                       all_stored=ALL_STORED, next_function=view.next_function, moved_on=MOVED_ON,
                       share=view.share, rotate=view.rotate, share_note=SHARE_NOTE, no_change=NO_CHANGE)


def install_kit(sandbox: Sandbox, artifact_dir: str, view: KitView | None = None) -> None:
    """Writes the kit to `KIT_PATH` as root (the policy can run it, not rewrite it)."""
    sandbox.write_file(KIT_PATH, kit_source(artifact_dir, view), user="root")
