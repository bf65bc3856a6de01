"""`KnownBug`: what the scripted experts know about a procedural bug, read from its `bug_inject.diff`.

The hunks of a unified diff (read by `selfplay.diffs.parse_diff`, which checks it against git's own
reading) as (old lines, new lines) with their context, the repair as a `str_replace` whose SEARCH text is
unique in the buggy file, and the function that holds the bug. All but the diff check are pure.
"""

from __future__ import annotations

import ast
import random
from collections.abc import Iterator
from dataclasses import dataclass

from agent_scaffold.mutation_operators import Operator, mutate
from selfplay.diffs import parse_diff
from selfplay.errors import DiffError


@dataclass(frozen=True)
class Hunk:
    """One hunk of a one-file diff: its lines tagged ' ', '-' or '+', and where it starts."""

    path: str
    """File the hunk changes (relative to the repo root)."""
    new_start: int
    """1-based line of the hunk's first line in the new (buggy) file."""
    lines: tuple[tuple[str, str], ...]
    """(tag, text without newline) in diff order."""

    def side(self, tags: str, lo: int = 0, hi: int | None = None) -> list[str]:
        """Lines lo..hi of the hunk that belong to a side: ' +' is the new file, ' -' the old."""
        return [text for tag, text in self.lines[lo:hi] if tag in tags]

    @property
    def changed(self) -> tuple[int, int]:
        """[first, last] index of the changed lines inside `lines`."""
        idx = [i for i, (tag, _) in enumerate(self.lines) if tag != " "]
        return idx[0], idx[-1]

    @property
    def first_changed_line(self) -> int:
        """1-based line in the new file of the first changed (or, for a pure deletion, following) line."""
        first, _ = self.changed
        return self.new_start + sum(1 for tag, _ in self.lines[:first] if tag == " ")


def parse_hunks(diff: str) -> list[Hunk]:
    """The hunks of a git diff (every file in it). Raises DiffError for a diff git would not apply as
    written, or one with no changed line."""
    hunks = [Hunk(patched.path, hunk.target_start,
                  tuple((line.line_type, line.value.removesuffix("\n")) for line in hunk if line.line_type in " -+"))
             for patched in parse_diff(diff, name="bug_inject.diff") for hunk in patched]
    if not hunks or any(not any(t != " " for t, _ in h.lines) for h in hunks):
        raise DiffError("bug_inject.diff has no usable hunks; the scripted expert needs a unified diff")
    return hunks


def reversed_hunk(hunk: Hunk) -> Hunk:
    """`hunk` undone: '+' and '-' swapped (its line numbers are those of the old side then)."""
    swap = {"+": "-", "-": "+", " ": " "}
    return Hunk(hunk.path, hunk.new_start, tuple((swap[t], text) for t, text in hunk.lines))


def repair(hunk: Hunk, buggy_source: str, rng: random.Random, extra_context: int = 0) -> tuple[str, str]:
    """(SEARCH, REPLACE) texts that undo `hunk` in `buggy_source`: the changed lines plus the fewest
    context lines (and up to `extra_context` more, drawn by `rng`) that make SEARCH match exactly once."""
    first, last = hunk.changed
    n = len(hunk.lines)
    for total in range(0, n + 1):
        for before in range(0, total + 1):
            lo, hi = first - before, last + 1 + (total - before)
            if lo < 0 or hi > n:
                continue
            search = hunk.side(" +", lo, hi)
            if not search or not any(line.strip() for line in search):
                continue
            text = "\n".join(search) + "\n"
            if buggy_source.count(text) == 1:
                more = rng.randint(0, extra_context)
                lo2, hi2 = max(0, lo - more // 2), min(n, hi + more - more // 2)
                wider = "\n".join(hunk.side(" +", lo2, hi2)) + "\n"
                if buggy_source.count(wider) == 1:
                    lo, hi, text = lo2, hi2, wider
                return text.removesuffix("\n"), "\n".join(hunk.side(" -", lo, hi))
    raise DiffError(f"no unique SEARCH text undoes the hunk at {hunk.path}:{hunk.new_start}")


@dataclass(frozen=True)
class Function:
    """A function (or method) of a source file: name and 1-based line span."""

    name: str
    start: int
    end: int


def enclosing_function(source: str, line: int) -> Function | None:
    """The innermost function whose span holds `line`, or None."""
    best = None
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno <= line <= node.end_lineno:
            if best is None or node.lineno >= best.start:
                best = Function(node.name, node.lineno, node.end_lineno)
    return best


def other_functions(source: str, exclude: str) -> list[str]:
    """Names of the top-level functions of `source` except `exclude` (targets of a wrong first look)."""
    return [n.name for n in ast.parse(source).body
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name != exclude]


LINE_OPERATORS = ("flip_comparison", "shift_bound", "swap_boolean_operator", "swap_arguments", "change_constant")
"""Seeding operators whose one-line change the changed line itself can undo (`drop_statement` and
`return_early` delete what the line said): the repair drills' and the recovery demonstrations' changes."""


def line_mutants(source: str, operator: Operator, rng: random.Random, line: int | None = None) -> Iterator[tuple[int, str]]:
    """One-line mutants of `source` by `operator`, its sites in an order drawn by `rng`: (1-based line, that line
    mutated, as in the file); with `line`, only the sites on that line. A site whose mutant changes more or
    less than one line is skipped, and a source that does not parse has none."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return
    nodes = operator.sites(tree)
    sites = [i for i, node in enumerate(nodes) if line is None or node.lineno == line == node.end_lineno]
    rng.shuffle(sites)
    old = source.splitlines()
    for site in sites:
        try:
            new = mutate(source, operator, site).splitlines()
        except ValueError:
            continue
        changed = [i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b]
        if len(new) == len(old) and len(changed) == 1:
            yield changed[0] + 1, new[changed[0]]


OPERATOR_CHARS = frozenset("=!<>+-*/%&|^~")


def _kind(ch: str, operators: bool) -> str | None:
    """The run a character belongs to when a note widens to whole tokens: a word, with `operators` an
    operator (so `!=` -> `==` reads as such, not `!` -> `=`), else None."""
    if ch.isalnum() or ch == "_":
        return "word"
    return "op" if operators and ch in OPERATOR_CHARS else None


def change_note(search: str, replace: str, *, operators: bool = False) -> str | None:
    """What the edit changes, in words, from the texts' differing middle widened to whole words (and, with
    `operators`, whole operators): "`<` becomes `>=`", "delete `x += 1`", "add `return None`"; None when
    there is no short one. The experts say it before their edit, so the policy names a change before it
    writes one (FORMAT 10 injector policies copied SEARCH into REPLACE unchanged in 10 of 24 episodes;
    the injector's notes keep `operators` off, so the default warm start's demonstrations are unchanged)."""
    def joins(kind: str | None, *chars: str | None) -> bool:
        return kind is not None and any(c is None or _kind(c, operators) == kind for c in chars)

    def at(text: str, i: int) -> str | None:
        return text[i] if 0 <= i < len(text) else None

    p = 0
    while p < min(len(search), len(replace)) and search[p] == replace[p]:
        p += 1
    while p > 0 and joins(_kind(search[p - 1], operators), at(search, p), at(replace, p)):
        p -= 1
    q = 0
    while q < min(len(search), len(replace)) - p and search[-1 - q] == replace[-1 - q]:
        q += 1
    while q > 0 and joins(_kind(search[-q], operators), None if q >= len(search) - p else search[-1 - q],
                          at(replace, len(replace) - 1 - q)):
        q -= 1
    old, new = search[p:len(search) - q].strip(), replace[p:len(replace) - q].strip()
    if (not old and not new) or len(old) > 60 or len(new) > 60 or "`" in old + new or "\n" in old + new:
        return None
    return f"delete `{old}`" if not new else f"add `{new}`" if not old else f"`{old}` becomes `{new}`"
