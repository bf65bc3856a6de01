"""Python names as edit targets (pure): `view parse.search` and `str_replace parse.search` go to where the
name is defined.

A small policy quotes the call a new test makes (`parse.search`) reliably, but fails to copy a file path out
of a grep hit into its next action: 0 of 32 sampled parse and inflection episodes of the FORMAT 17 warm
start viewed a file, and most of them wrote the call where the path goes (`view parse.search`). The editor
therefore also takes a dotted name for a path that does not exist: one `git grep` in the sandbox
(`grep_command`) finds the `def`/`class` lines of its last component, and `pick_definitions` keeps the
ones its qualifier points at. The name is checked against `SYMBOL` before it reaches a command. A name
no file defines as written is looked up once more in any letter case, and taken when exactly one definition
fits: FORMAT 19 policies wrote `view parse.parser` for the spec's `parse.Parser(template)` in 23 of 60
held-out episodes, and were refused for the rest of each.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

SYMBOL = re.compile(r"[A-Za-z_]\w{0,99}(?:\.[A-Za-z_]\w{0,99}){0,7}")
"""A dotted Python name as a test writes a call (`inflection.singularize`, `parse.Parser.parse`)."""
MAX_DEFINITIONS = 200
"""Definition lines read from the grep (a name like `__init__` is defined in most files)."""
LISTED = 10
"""Definitions named in the refusal when the name is ambiguous."""


@dataclass(frozen=True)
class Definition:
    """One `def NAME` or `class NAME` line of a tracked non-test `.py` file."""

    path: str
    """Relative to the repository root, as git prints it."""
    line: int
    """1-based."""
    top_level: bool
    """Not indented: a module-level function or class, not a method."""
    name: str = ""
    """The name as defined (it differs from the one asked for in letter case only after an `any_case` grep)."""


def is_symbol(target: str) -> bool:
    """A dotted name, but not a file name: `infer.py` is a path (held-out policies asked for one that did not
    exist and were told that no function `py` is defined)."""
    return SYMBOL.fullmatch(target) is not None and not target.endswith(".py")


def grep_command(name: str, any_case: bool = False) -> str:
    """The sandbox command that prints `path:line:text` for each definition of the bare `name` (which must
    be a plain identifier: the last component of an `is_symbol` target); `any_case`: in any letter case."""
    if not re.fullmatch(r"[A-Za-z_]\w*", name):
        raise ValueError(f"not an identifier: {name!r}")
    pattern = rf"^[[:space:]]*(async[[:space:]]+)?(def|class)[[:space:]]+{name}[[:space:]]*[(:]"
    return f"git grep -n{' -i' if any_case else ''} -E {shlex.quote(pattern)} -- '*.py' | head -n {MAX_DEFINITIONS}"


def defined_name(text: str) -> str | None:
    """The name a `def`/`class` line defines (`class Parser(object):` -> `Parser`)."""
    m = re.match(r"\s*(?:async\s+)?(?:def|class)\s+(\w+)", text)
    return m.group(1) if m else None


def is_test_path(path: str) -> bool:
    """A test module or a file under a test directory: the task is to fix the code the tests call. Close to
    `repos.spec.DEFAULT_TEST_PATTERNS`, written out here because the editor knows no RepoSpec and
    agent_scaffold does not import repos."""
    *dirs, name = path.split("/")
    return (any(d in ("test", "tests", "testing") or d.startswith("test_") for d in dirs)
            or name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py")


def parse_hits(output: str) -> list[Definition]:
    """The definitions in `grep_command`'s output, test files left out."""
    found = []
    for row in output.splitlines():
        path, sep, rest = row.partition(":")
        number, sep2, text = rest.partition(":")
        if sep and sep2 and number.isdigit() and not is_test_path(path):
            found.append(Definition(path, int(number), not text[:1].isspace(), defined_name(text) or ""))
    return found


def module_of(path: str) -> str:
    """The dotted module a file defines: `src/humanize/lists.py` -> `humanize.lists`,
    `parse/__init__.py` -> `parse`."""
    parts = path.removesuffix(".py").split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    if parts[:1] in (["src"], ["lib"]):
        parts = parts[1:]
    return ".".join(parts)


def _rank(qualifier: list[str], d: Definition) -> tuple[int, bool]:
    """How well `d` fits a name qualified by `qualifier`: 2 when a prefix of the qualifier is `d`'s module,
    1 when it is a package above it (a re-export, `humanize.natural_list`) or its tail, else 0; then whether
    `d` is top-level exactly when nothing of the qualifier is left after the module (else a method). A bare
    name prefers a top-level definition (a test calls what it imported); a qualifier that names no module
    (an instance, `result.named`) prefers nothing."""
    if not qualifier:
        return 0, d.top_level
    module = module_of(d.path)
    for k in range(len(qualifier), 0, -1):
        q = ".".join(qualifier[:k])
        level = 2 if module == q else 1 if module.startswith(q + ".") or module.endswith("." + q) else 0
        if level:
            return level, d.top_level == (k == len(qualifier))
    return 0, False


def pick_definitions(target: str, found: list[Definition]) -> list[Definition]:
    """The definitions of `target`'s last component that its qualifier fits best (`_rank`); several when
    they fit equally, none when there are none."""
    if not found:
        return []
    qualifier = target.split(".")[:-1]
    ranks = [_rank(qualifier, d) for d in found]
    best = max(ranks)
    return [d for d, r in zip(found, ranks, strict=True) if r == best]
