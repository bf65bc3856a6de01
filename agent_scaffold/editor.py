"""`Editor`: the search-replace file editor tool (view, create, str_replace, insert, undo).

Every method returns the observation text for the agent; mistakes the agent can fix (no match, several
matches, bad line numbers, missing file, a file too large to read, one the agent user may not read or
write) raise `EditError` whose message is that observation. Sandbox failures (`SandboxError`) pass
through untouched: they are infrastructure, not agent, errors. Reads, writes and commands all run as the
sandbox's agent uid (`user="agent"`), never as the grader's root.
"""

from __future__ import annotations

import ast
import difflib
import posixpath
import re
import shlex
from dataclasses import dataclass
from typing import NoReturn

from agent_scaffold import symbols
from sandboxes.sandbox import Sandbox

SNIPPET_CONTEXT = 4
"""Lines shown around an edit in its confirmation."""
VIEW_MAX_LINES = 400
"""A view without an END shows at most this many lines."""
PAGE_NOTE_CHARS = 120
"""Room a paged view keeps for its "more lines" note within `max_chars`."""
MAX_LISTED_MATCHES = 10
"""A SEARCH that matches several places is refused with the lines of at most this many of them (and
`match_reindented` stops looking there)."""


class EditError(ValueError):
    """An edit the agent got wrong; the message explains how to fix it."""


LISTED_SOURCES = 8
"""A path that is no file is refused with at most this many of the repo's tracked Python files outside the
tests, those with its file name first."""
HOLDER_MIN_CHARS = 12
"""Shortest SEARCH first line that may pick the file of a str_replace whose path is no file: `pass` or
`return x` is in too many files to say which one was meant."""


def numbered(lines: list[str], start: int) -> str:
    """`cat -n` style lines, numbered from `start` (1-based)."""
    return "\n".join(f"{i:6d}\t{line}" for i, line in enumerate(lines, start))


def page_last(lines: list[str], first: int, max_chars: int | None) -> int:
    """Last line (1-based) of a view from `first` without an END: whole lines up to `VIEW_MAX_LINES` whose
    numbered text, with room for the "more lines" note, fits `max_chars` (at least `first` itself), and no
    further than the end of the `def` or `class` that starts at `first` (`block_end`). Paging instead of
    cutting the text in its middle keeps every shown line whole and the page from `first` on, so
    `view PATH N` with N copied from a grep shows the function that starts there, and only it."""
    last = min(len(lines), first + VIEW_MAX_LINES - 1, block_end(lines, first) or len(lines))
    if max_chars is None:
        return last
    used = 0
    for i in range(first, last + 1):
        used += 7 + len(lines[i - 1]) + (i > first)
        if used > max_chars - PAGE_NOTE_CHARS and i > first:
            return i - 1
    return last


def block_end(lines: list[str], first: int) -> int | None:
    """Last line (1-based) of the `def`/`class` whose header starts at line `first`: its `end_lineno` when the
    file parses as Python, else the last line before one indented no deeper than the header (a bracket
    closing a signature aside); None when line `first` starts no such block."""
    if not 1 <= first <= len(lines) or not lines[first - 1].lstrip().startswith(("def ", "async def ", "class ")):
        return None
    try:
        tree = ast.parse("\n".join(lines))
    except (SyntaxError, ValueError):
        tree = None
    if tree is not None:
        kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        return next((n.end_lineno for n in ast.walk(tree) if isinstance(n, kinds) and n.lineno == first), None)
    head = lines[first - 1]
    indent, end = len(head) - len(head.lstrip()), first
    for i in range(first + 1, len(lines) + 1):
        text = lines[i - 1]
        if not text.strip():
            continue
        if len(text) - len(text.lstrip()) <= indent and not text.lstrip().startswith((")", "]", "}")):
            break
        end = i
    return end


@dataclass(frozen=True)
class Replacement:
    """A file's content after one str_replace."""

    content: str
    line: int
    """First line (1-based) of the replaced text."""
    reindented: bool
    """The SEARCH text matched only up to its lines' leading whitespace (`match_reindented`), and the REPLACE
    text was moved by the same indentation."""
    unnumbered: bool = False
    """The SEARCH text carried a view's line numbers (`    33\t`), which were dropped before matching (and
    from the REPLACE text when it carried them too)."""


def replace_once(content: str, old: str, new: str, path: str, start: int | None = None) -> Replacement:
    """`content` with the single occurrence of `old` replaced, else with the single run of whole lines that
    `old` matches up to a uniform change of indentation (`match_reindented`); EditError for no match, several
    matches or an edit that changes nothing. With `start` (`str_replace PATH:START`, a grep hit's prefix),
    the first occurrence that begins on or after line `start` is replaced, so several are no error."""
    if not old:
        raise EditError("str_replace: the SEARCH text is empty; copy the exact lines to replace.")
    # lines copied from a view with its numbers; FORMAT 18 policies copied one numbered line among unnumbered
    # ones in 4 of 60 episodes, so one number is enough
    numbered_copy = old not in content and _numbered(old)
    if numbered_copy:
        old, new = _unnumbered(old), _unnumbered(new)
    if start is None:
        count = content.count(old)
        pos = content.find(old) if count == 1 else -1
        offset, line = 0, 1
    else:
        total = content.count("\n") + (not content.endswith("\n"))
        if not 1 <= start <= total:
            raise EditError(f"str_replace: line {start} is out of range; {path} has {total} lines.")
        offset = _line_offset(content, start)
        pos, count, line = content.find(old, offset), 1, start
    if pos != -1:
        updated = content[:pos] + new + content[pos + len(old):]
        line, reindented = line + content.count("\n", offset, pos), False
    elif count == 0 or start is not None:
        found = match_reindented(content, old, new, path, start)
        if found is None:
            where = f" at or after line {start}" if start is not None else ""
            raise EditError(f"str_replace: the SEARCH text was not found in {path}{where}.{_closest(content, old, start)}")
        updated, line, reindented = found[0], found[1], True
    else:
        starts, pos, line, seen = [], content.find(old), 1, 0
        while pos != -1 and len(starts) < MAX_LISTED_MATCHES:  # each count from the last: linear in the file
            line += content.count("\n", seen, pos)
            starts.append(line)
            seen, pos = pos, content.find(old, pos + 1)
        more = ", ..." if count > len(starts) else ""
        raise EditError(f"str_replace: the SEARCH text matches {count} times in {path} (lines "
                        f"{', '.join(map(str, starts))}{more}); include more surrounding lines so it matches once.")
    if updated == content:  # a no-op "edit" would read as done (measured: 6 of 8 refused bug edits of one warm start)
        unnumbered = "without the line numbers copied from the view, " if numbered_copy else ""
        raise EditError(f"str_replace: {unnumbered}the REPLACE text is the same as the SEARCH text, so {path} would "
                        "not change; write the changed lines between ======= and >>>>>>> REPLACE.")
    return Replacement(updated, line, reindented, numbered_copy)


_NUMBERED = re.compile(r"^ *\d+\t", re.MULTILINE)


def _numbered(text: str) -> bool:
    """Some line starts with a view's line number (`numbered`: spaces, digits, a tab)."""
    return _NUMBERED.search(text) is not None


def _unnumbered(text: str) -> str:
    return _NUMBERED.sub("", text)


CLOSEST_LINES = 3
"""Lines of the file a refused SEARCH is shown, the ones most like its first line."""
CLOSEST_SCAN = 2_000
"""Lines compared for `_closest`, from START on (the SEARCH is the policy's and the comparison runs on the host)."""


def _closest(content: str, old: str, start: int | None) -> str:
    """The refusal's advice: the file's lines (from `start` on) most like the SEARCH's first non-blank line, as
    they are, to copy; aider's editor answers a failed SEARCH the same way. A small model writes a SEARCH
    from memory (FORMAT 18: 82 refusals in 60 held-out episodes, `return sorted(result)` from the system
    prompt's example among them), and "view the file" sends it back to a page it already did not copy."""
    want = next((x.strip() for x in old.split("\n") if x.strip()), "")[:200]
    lines = content.split("\n")[(start or 1) - 1:][:CLOSEST_SCAN]
    as_written: dict[str, str] = {}  # compared text -> the first line that reads so
    for x in lines:
        if x.strip():
            as_written.setdefault(x.strip()[:200], x)
    near = difflib.get_close_matches(want, list(as_written), n=CLOSEST_LINES, cutoff=0.5)
    shown = [as_written[n] for n in near]
    if not shown:
        return " View the file and copy the lines exactly (indentation matters)."
    return ("\nThe lines there most like its first line, copied exactly (indentation matters):\n"
            + "\n".join(shown))


def _line_offset(content: str, line: int) -> int:
    """Character offset where 1-based `line` of `content` begins."""
    offset = 0
    for _ in range(line - 1):
        offset = content.index("\n", offset) + 1
    return offset


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _dedented(lines: list[str]) -> tuple[list[str], int]:
    """`lines` without their common leading whitespace and trailing whitespace (blank lines become ""), and
    the width removed."""
    width = min((_indent(x) for x in lines if x.strip()), default=0)
    return [x[width:].rstrip() if x.strip() else "" for x in lines], width


MAX_REINDENT_CANDIDATES = 1_000
"""Places whose stripped lines equal the SEARCH's that `match_reindented` compares before it gives up: the
SEARCH is written by the policy and the comparison runs on the host, so a file of repeated lines must
not turn one edit into minutes of work."""


_AROUND_PUNCTUATION = re.compile(r"\s*([^\w\s])\s*")
_QUOTES = ("'", '"')


def _loose(line: str) -> str:
    """`line` stripped and, outside any line with a quote (whose strings would change), without the spaces
    next to punctuation and with other runs of spaces made one: FORMAT 20 policies wrote the page's line from
    their own thought with such slips (`if re.search(rule, word) :`), in most of their refused SEARCH texts.
    Words stay apart (`not x` is not `notx`)."""
    x = line.strip()
    if any(q in x for q in _QUOTES):
        return x
    return " ".join(_AROUND_PUNCTUATION.sub(r"\1", x).split())


def _reindented_hits(lines: list[str], old_lines: list[str], want: list[str],
                     first: int = 0) -> tuple[list[int], list[int]]:
    """0-based first lines, `first` or later, of the runs of `lines` whose dedented form is `want`, and of
    the runs whose lines equal `old_lines` once each is made `_loose`. The candidates are found by one
    C-speed search of the loose text (equal loose lines are necessary for equal dedented ones), so only
    those runs are compared line by line."""
    loose_lines = [_loose(x) for x in lines]
    text = "\n".join(loose_lines)
    needle = "\n".join(_loose(x) for x in old_lines)
    line_at, offset, begin = {}, 0, 0
    for i, x in enumerate(loose_lines):
        line_at[offset] = i
        begin = offset if i == first else begin
        offset += len(x) + 1
    hits, loose, tried, pos = [], [], 0, text.find(needle, begin)
    while pos != -1 and len(hits) < MAX_LISTED_MATCHES and tried < MAX_REINDENT_CANDIDATES:
        tried += 1
        end = pos + len(needle)
        i = line_at.get(pos)
        if i is not None and (end == len(text) or text[end] == "\n"):
            if len(loose) < MAX_LISTED_MATCHES:
                loose.append(i)
            if _dedented(lines[i:i + len(old_lines)])[0] == want:
                hits.append(i)
        pos = text.find(needle, pos + 1)
    return hits, loose


def match_reindented(content: str, old: str, new: str, path: str, start: int | None = None) -> tuple[str, int] | None:
    """(updated content, first line) when the lines of `old` equal exactly one run of whole lines of `content`
    once both drop their common indentation and trailing whitespace, so the relative indentation still
    has to match; `new` is then moved by the same indentation. None when no run matches; EditError when
    several do, unless `start` (1-based) asks for the first run on or after that line. A copied function
    often carries one level of indentation too many or too few (measured: every refused SEARCH of one
    held-out evaluation), which no amount of looking at the file fixes."""
    old_lines = (old[:-1] if old.endswith("\n") else old).split("\n")
    want, old_width = _dedented(old_lines)
    if not any(want):
        return None
    lines = content.split("\n")
    n = len(old_lines)
    hits, loose = _reindented_hits(lines, old_lines, want, (start or 1) - 1)
    if not hits:
        return _match_per_line(lines, loose, old_lines, new, path, start)
    if len(hits) > 1 and start is None:
        _several(hits, path, "up to indentation")
    at = hits[0]
    _, width = _dedented(lines[at:at + n])
    prefix = next(x for x in lines[at:at + n] if x.strip() and _indent(x) == width)[:width]
    body = new[:-1] if new.endswith("\n") else new
    moved = [] if new == "" else [prefix + x[min(old_width, _indent(x)):] if x.strip() else x
                                  for x in body.split("\n")]
    return "\n".join(lines[:at] + moved + lines[at + n:]), at + 1


def _match_per_line(lines: list[str], runs: list[int], old_lines: list[str], new: str, path: str,
                    start: int | None) -> tuple[str, int] | None:
    """`match_reindented`'s last resort: the SEARCH lines equal one run of the file's lines only once each
    line is stripped (FORMAT 18 policies wrote a nested `if` and its body at one indent in 8 of 70 SEARCH
    texts found nowhere, one of them with the repair in its REPLACE), and spaced loosely (`_loose`). With
    as many REPLACE lines as SEARCH
    lines, REPLACE line i takes file line i's indentation, moved by however much it is indented past
    SEARCH line i; other shapes are refused with the lines the SEARCH was meant to copy."""
    if not runs:
        return None
    n = len(old_lines)
    if len(runs) > 1 and start is None:
        _several(runs, path, "only when each line's indentation and spacing are ignored")
    at = runs[0]
    body = new[:-1] if new.endswith("\n") else new
    new_lines = [] if new == "" else body.split("\n")
    if len(new_lines) != n:
        raise EditError(f"str_replace: the SEARCH text matches lines {at + 1}-{at + n} of {path} only when each "
                        "line's indentation and spacing are ignored. Copy those lines as the view shows them:\n"
                        + "\n".join(lines[at:at + n]))
    moved = []
    for line, searched, replaced in zip(lines[at:at + n], old_lines, new_lines, strict=True):
        shift = _indent(replaced) - _indent(searched)
        prefix = line[:_indent(line)] if shift == 0 else " " * max(0, _indent(line) + shift)
        moved.append(prefix + replaced.lstrip(" \t") if replaced.strip() else replaced)
    return "\n".join(lines[:at] + moved + lines[at + n:]), at + 1


def _several(runs: list[int], path: str, how: str) -> NoReturn:
    """Refuse a SEARCH that matches the runs starting at `runs` (0-based, at most MAX_LISTED_MATCHES kept)."""
    many = "at least " if len(runs) >= MAX_LISTED_MATCHES else ""
    raise EditError(f"str_replace: the SEARCH text matches {many}{len(runs)} places in {path} {how} (lines "
                    f"{', '.join(str(i + 1) for i in runs)}); copy the lines with their exact indentation, or "
                    "include more surrounding lines so it matches once.")


class Editor:
    """File edits inside one sandbox, with a per-path undo history."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        self._history: dict[str, list[str | None]] = {}  # path -> previous contents (None: did not exist)

    def _abs(self, path: str) -> str:
        return posixpath.normpath(posixpath.join(self.sandbox.workdir, path))

    def _read(self, path: str) -> str | None:
        # As the agent uid (the default, said explicitly): root-only files are refused, and the size is
        # capped before any byte moves (a huge or sparse file is an observation, not a dead host).
        try:
            return self.sandbox.read_file(self._abs(path), user="agent").decode("utf-8", errors="replace")
        except (FileNotFoundError, IsADirectoryError):
            return None
        except OSError as exc:  # too large, not readable by the agent, not a regular file
            raise EditError(f"cannot open {path}: {exc.strerror or exc}") from exc

    def definition(self, target: str, any_case: bool = False) -> tuple[str, int] | None:
        """(path, `def` line) of the Python name `target` (`symbols`), for a target that is no file; None when
        it is no name or no tracked non-test file defines it; EditError when several definitions fit equally.
        `any_case`: a name defined in no file as written is looked up in any letter case, and taken only when
        exactly one definition fits (`parse.parser` for `parse.Parser`)."""
        found = self._lookup(target, any_case)
        return (found.path, found.line) if found else None

    def _lookup(self, target: str, any_case: bool) -> symbols.Definition | None:
        found = self._definition(target)
        if found is not None or not any_case:
            return found
        try:
            return self._definition(target, any_case=True)
        except EditError:  # several in other cases: the name as written is what was asked for
            return None

    def _definition(self, target: str, any_case: bool = False) -> symbols.Definition | None:
        if not symbols.is_symbol(target):
            return None
        res = self.sandbox.exec(symbols.grep_command(target.rsplit(".", 1)[-1], any_case), timeout=30, user="agent")
        fits = symbols.pick_definitions(target, symbols.parse_hits(res.output))
        if len(fits) > 1:
            where = ", ".join(f"{d.path}:{d.line}" for d in fits[:symbols.LISTED])
            more = ", ..." if len(fits) > symbols.LISTED else ""
            raise EditError(f"{target} is no file, and {len(fits)} definitions fit that name ({where}{more}); "
                            "use one of them as the target, e.g. `view PATH:LINE`.")
        return fits[0] if fits else None

    def _module_file(self, path: str) -> tuple[str, str] | None:
        """(path, content) of the one file that is the module a missing `X.py` names: `X/__init__.py`,
        `src/X.py` or `src/X/__init__.py`, with the dots of a dotted `X` read as folders too (held-out policies
        wrote `inflection.py` and `parse.__init__.py` for the listed `inflection/__init__.py` and
        `parse/__init__.py`); None when none or several exist."""
        if not path.endswith(".py") or path.startswith("/") or ".." in path.split("/"):
            return None
        names = dict.fromkeys(f"{prefix}{stem}{suffix}" for stem in (path[:-3], path[:-3].replace(".", "/"))
                              for prefix in ("", "src/") for suffix in (".py", "/__init__.py"))
        found = [(p, c) for p in names if p != path and (c := self._read(p)) is not None]
        return found[0] if len(found) == 1 else None

    def _file_holding(self, old: str) -> tuple[str, str] | None:
        """(path, content) of the one tracked non-test `.py` file that holds the SEARCH text's first line
        (stripped, at least `HOLDER_MIN_CHARS` long): the file a SEARCH copied from a `localize` row or a view
        means when its path was miswritten (held-out policies wrote `inflection/inflection.py` and
        `parse/tests/test_parse.py` for the listed `inflection/__init__.py` and `parse/__init__.py`); None when
        no file or several do. The edit itself must still match exactly once there."""
        first = next((line.strip() for line in old.splitlines() if line.strip()), "")
        if len(first) < HOLDER_MIN_CHARS:
            return None
        res = self.sandbox.exec(f"git grep -l -F -e {shlex.quote(first)} -- '*.py' | head -n 20", timeout=30,
                                user="agent")
        paths = [p for p in res.output.splitlines() if p.strip() and not symbols.is_test_path(p)] if res.ok else []
        content = self._read(paths[0]) if len(paths) == 1 else None
        return (paths[0], content) if content is not None else None

    def _must_read(self, path: str, looked_up: bool = False) -> str:
        """The file's content, else EditError; `looked_up`: `path` was also tried as a Python name."""
        content = self._read(path)
        if content is None:
            # The way out comes first: FORMAT 16 policies copied "`create`" from "use `create` for a new
            # file" into `view create` for the rest of their episodes.
            if looked_up and symbols.is_symbol(path):
                way = (f", and no function or class `{path.rsplit('.', 1)[-1]}` is defined outside the tests; use a "
                       "name the new test calls, or a path")
            elif sources := self._sources_like(path):
                way = f"; its Python files outside the tests include {sources}: copy one of them, or a path"
            else:
                way = "; copy the path"
            raise EditError(f"{path} does not exist (paths are relative to {self.sandbox.workdir}){way} from a grep "
                            "hit or from the listing `view .` shows (`create` makes a new file).")
        return content

    def _sources_like(self, path: str) -> str:
        """Up to `LISTED_SOURCES` tracked non-test `.py` files, those named like `path`'s file first, as one
        comma-separated string ("" when there are none): held-out policies asked for a training repo's file
        (`toolz/itertoolz.py` in parse) and went on asking for it when told only where paths could be found."""
        res = self.sandbox.exec("git ls-files -- '*.py' | head -n 2000", timeout=30, user="agent")
        paths = [p for p in res.output.splitlines() if p.strip() and not symbols.is_test_path(p)] if res.ok else []
        name = posixpath.basename(path)
        # stable: within a rank, git's order; build and docs scripts last, being rarely the code under test
        paths.sort(key=lambda p: (posixpath.basename(p) != name,
                                  p == "setup.py" or p.split("/", 1)[0] in ("docs", "doc", "examples")))
        more = f" (and {len(paths) - LISTED_SOURCES} more)" if len(paths) > LISTED_SOURCES else ""
        return ", ".join(paths[:LISTED_SOURCES]) + more

    def _write(self, path: str, content: str, before: str | None) -> None:
        self._put(path, content)
        self._history.setdefault(path, []).append(before)

    def _put(self, path: str, content: str) -> None:
        try:
            self.sandbox.write_file(self._abs(path), content, user="agent")
        except OSError as exc:  # not writable by the agent, disk limit reached, a directory
            raise EditError(f"cannot write {path}: {exc.strerror or exc}") from exc

    def _snippet(self, path: str, content: str, line: int, note: str) -> str:
        lines = content.split("\n")
        lo = max(1, line - SNIPPET_CONTEXT)
        hi = min(len(lines), line + SNIPPET_CONTEXT)
        return f"{note}\n{numbered(lines[lo - 1:hi], lo)}"

    def view(self, path: str, start: int | None = None, end: int | None = None, *,
             max_chars: int | None = None) -> str:
        """Numbered lines `start`..`end` of a file, or a directory's listing. Without `end`, a page from
        `start` (`page_last`: bounded by `max_chars`, the observation limit, when given). A Python name that
        is no file (`view parse.search`) shows the page from its definition, headed by where that is."""
        res = self.sandbox.exec(f"test -d {shlex.quote(self._abs(path))}", user="agent")
        if res.exit_code == 0:
            listing = self.sandbox.exec(f"find {shlex.quote(self._abs(path))} -maxdepth 2 -not -path '*/.*' "
                                        "| sort | head -200", user="agent")
            return listing.output
        content, head = self._read(path), ""
        looked_up = content is None and start is None and end is None
        if looked_up and (found := self._lookup(path, any_case=True)):
            head = f"{path} is defined at {found.path}:{found.line}:\n"
            if found.name and found.name != path.rsplit(".", 1)[-1]:
                head = (f"{path} is not defined; `{found.name}` (another letter case) is defined at "
                        f"{found.path}:{found.line}:\n")
            path, start = found.path, found.line
            content = self._read(path)
        elif content is None and (module := self._module_file(path)):
            head = f"{path} is no file; {module[0]} is that module:\n"
            path, content = module
        if content is None:
            content = self._must_read(path, looked_up)
        lines = content.split("\n")[:-1] if content.endswith("\n") else content.split("\n")
        first = start or 1
        last = end if end is not None else page_last(lines, first, max_chars)
        if last == -1:
            last = len(lines)
        if not 1 <= first <= len(lines) or last < first:
            raise EditError(f"view: lines {first}-{last} are out of range; {path} has {len(lines)} lines.")
        last = min(last, len(lines))
        more = f"\n[... {len(lines) - last} more lines; view {path} {last + 1} to see them]" \
            if end is None and last < len(lines) else ""
        return head + numbered(lines[first - 1:last], first) + more

    def create(self, path: str, content: str) -> str:
        before = self._read(path)
        self._write(path, content, before)
        verb = "Overwrote" if before is not None else "Created"
        return f"{verb} {path} ({len(content.splitlines())} lines)."

    def str_replace(self, path: str, old: str, new: str, start: int | None = None) -> str:
        """The one SEARCH match replaced (`replace_once`). A Python name that is no file
        (`str_replace parse.search`) edits the first match from its definition on."""
        content, asked, how = self._read(path), path, ""
        looked_up = content is None and start is None
        if looked_up and (found := self.definition(path, any_case=True)):
            path, start = found
        elif content is None and (module := self._module_file(path)):
            path, content = module
            how = f" ({asked} is no file; {path} is that module.)"
        elif content is None and (holder := self._file_holding(old)):
            path, content = holder
            how = f" ({asked} is no file; {path} is the one file that holds the SEARCH text's first line.)"
        content = self._must_read(path, looked_up) if content is None else content
        done = replace_once(content, old, new, path, start)
        self._write(path, done.content, content)
        how = how if asked != path and not looked_up else ""
        how += (" The SEARCH text matched these lines up to indentation, so the REPLACE text was re-indented to "
                "match." if done.reindented else "")
        how += " The line numbers copied from the view were dropped." if done.unnumbered else ""
        return self._snippet(path, done.content, done.line, f"Edited {path}.{how} Lines around the change:")

    def insert(self, path: str, line: int, text: str) -> str:
        content = self._must_read(path)
        lines = content.split("\n")
        trailing = content.endswith("\n")
        body = lines[:-1] if trailing else lines
        if not 0 <= line <= len(body):
            raise EditError(f"insert: line {line} is out of range; {path} has {len(body)} lines (0 inserts "
                            "at the top).")
        new_lines = text[:-1].split("\n") if text.endswith("\n") else text.split("\n")
        updated = "\n".join(body[:line] + new_lines + body[line:]) + ("\n" if trailing else "")
        self._write(path, updated, content)
        return self._snippet(path, updated, line + 1, f"Inserted {len(new_lines)} lines after line {line} of "
                             f"{path}:")

    def undo(self, path: str) -> str:
        """Revert the last edit of `path`. A path with no edit that names the module of an edited file (`parse.py`
        for `parse/__init__.py`, as `str_replace` reads it), or any path while exactly one file has an edit to
        undo, undoes that file's: held-out policies undid their edit under the miswritten path they had
        edited by (`parse.py`, `infix.py`)."""
        history, asked, how = self._history.get(path), path, ""
        if not history:
            module = self._module_file(path)
            edited = [p for p, h in self._history.items() if h]
            found = module[0] if module and self._history.get(module[0]) else edited[0] if len(edited) == 1 else None
            if found is None:
                raise EditError(f"undo: no edit of {path} to undo.")
            path, history = found, self._history[found]
            how = f" ({asked} has no edit; {path} is the file edited.)"
        previous = history.pop()
        if previous is None:
            self.sandbox.exec(f"rm -f {shlex.quote(self._abs(path))}", user="agent")
            return f"Undid the creation of {path} (removed it).{how}"
        self._put(path, previous)
        return f"Restored {path} to its content before the last edit.{how}"
