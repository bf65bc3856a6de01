"""git's own rules for splitting a patch into file sections and reading their paths (git 2.39 apply.c).

Pure: no git process. `selfplay.diffs.patch` cross-checks the result against `git apply --numstat` itself
(`selfplay.diffs.git_view`) and refuses a patch on any disagreement, so a corner case this module gets wrong
costs a false rejection, never a path the filter did not judge. Departures from apply.c: mixed quoting
on a `diff --git` line (one name quoted, one not) is not resolved here (git's view decides), and
epoch timestamps on `---`/`+++` lines are not read (they do not change the path).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from selfplay.errors import DiffError

_ESCAPES = {"a": 7, "b": 8, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11, "\\": 92, '"': 34}
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
# Extended header lines git reads after `diff --git` (apply.c `optable`); any other line ends the header.
_GIT_HEADER_LINES = ("@@ -", "--- ", "+++ ", "old mode ", "new mode ", "deleted file mode ", "new file mode ",
                     "copy from ", "copy to ", "rename old ", "rename new ", "rename from ", "rename to ",
                     "similarity index ", "dissimilarity index ", "index ")


@dataclass(frozen=True)
class Section:
    """One file patch as git sees it."""

    start: int
    """Index of its first line in the patch."""
    old_name: str | None
    """Path before the change (None for a new file)."""
    new_name: str | None
    """Path after the change (None for a deletion)."""
    git: bool
    """True for a `diff --git` section, False for a traditional `---`/`+++` one."""
    hunks: int
    """Number of text hunks."""
    binary: bool
    """`GIT binary patch` or `Binary files ... differ`."""
    modes: tuple[str, ...]
    """Every file mode its header names (`new file mode 120000` gives "120000")."""
    rename: bool
    """A `rename from`/`rename to` section."""
    copy: bool
    """A `copy from`/`copy to` section."""


def unquote_c(text: str) -> tuple[str, str] | None:
    """git's unquote_c_style: ("name", rest after the closing quote) for text starting with '"'."""
    if not text.startswith('"'):
        return None
    out = bytearray()
    i = 1
    while i < len(text):
        ch = text[i]
        if ch == '"':
            return out.decode("utf-8", "surrogateescape"), text[i + 1:]
        if ch == "\n":
            return None
        if ch != "\\":
            out += ch.encode("utf-8", "surrogateescape")
            i += 1
            continue
        nxt = text[i + 1:i + 2]
        if nxt in _ESCAPES:
            out.append(_ESCAPES[nxt])
            i += 2
        elif re.match(r"[0-3][0-7]{2}", text[i + 1:i + 4]):
            out.append(int(text[i + 1:i + 4], 8))
            i += 4
        else:
            return None
    return None


def _squash_slash(name: str) -> str:
    return re.sub(r"/{2,}", "/", name)


def _skip_tree_prefix(p: int, name: str) -> str | None:
    """Remove `p` leading path components (apply.c skip_tree_prefix); None when there are fewer."""
    if p == 0:
        return None if name.startswith("/") else name
    for i, ch in enumerate(name):
        if ch == "/":
            p -= 1
            if p <= 0:
                return None if i == 0 else name[i + 1:]
    return None


def find_name(line: str, default: str | None, p: int, tab_ends: bool) -> str | None:
    """apply.c find_name: a quoted or plain path from a `---`/`+++`/`rename` line, `p` components off."""
    line = line.rstrip("\n")
    if line.startswith('"') and (q := unquote_c(line)) is not None:
        name: str | None = q[0]
        for _ in range(p):
            cut = name.find("/") if name is not None else -1
            name = None if cut < 0 else name[cut + 1:]
        if name:
            return _squash_slash(name)
    start = 0 if p == 0 else None
    end = len(line)
    for i, ch in enumerate(line):
        if ch.isspace() and ch not in " \t" or (ch == "\t" and tab_ends):
            end = i
            break
        if ch == "/" and p > 0:
            p -= 1
            if p == 0:
                start = i + 1
    if start is None or end <= start:
        return _squash_slash(default) if default else None
    name = line[start:end]
    if default and len(default) < len(name) and name.startswith(default):
        return _squash_slash(default)
    return _squash_slash(name)


def is_dev_null(line: str) -> bool:
    return line.startswith("/dev/null") and line[9:10].isspace()


def git_header_name(rest: str, p: int) -> str | None:
    """apply.c git_header_name: the one name of `diff --git A B` when A and B agree, else None."""
    rest = rest.rstrip("\n")
    if rest.startswith('"'):
        q = unquote_c(rest)
        if q is None:
            return None
        first = _skip_tree_prefix(p, q[0])
        second_text = q[1].lstrip()
        q2 = unquote_c(second_text)
        if first is None or q2 is None:
            return None  # an unquoted second name: left to git's view
        return first if _skip_tree_prefix(p, q2[0]) == first else None
    name = _skip_tree_prefix(p, rest)
    if name is None or '"' in name:
        return None
    for i, ch in enumerate(name):
        if ch in " \t":
            second = _skip_tree_prefix(p, name[i + 1:])
            if second is not None and second == name[:i]:
                return name[:i]
    return None


def _hunk_end(lines: list[str], i: int) -> int:
    """Index past the hunk starting at lines[i] (counted like apply.c parse_fragment)."""
    m = _HUNK.match(lines[i])
    if not m:
        raise DiffError(f"line {i + 1}: malformed hunk header {lines[i].rstrip()!r}")
    old = int(m.group(2)) if m.group(2) is not None else 1
    new = int(m.group(4)) if m.group(4) is not None else 1
    i += 1
    while old > 0 or new > 0:
        if i >= len(lines):
            raise DiffError("a hunk ends before its line counts are used up (truncated patch)")
        ch = lines[i][:1]
        if ch in (" ", "\n"):
            old, new = old - 1, new - 1
        elif ch == "-":
            old -= 1
        elif ch == "+":
            new -= 1
        elif ch != "\\":
            raise DiffError(f"line {i + 1}: corrupt hunk line {lines[i].rstrip()!r}")
        if old < 0 or new < 0:
            raise DiffError(f"line {i + 1}: hunk has more lines than its header counts")
        i += 1
    return i


def _hunks(lines: list[str], i: int) -> tuple[int, int]:
    count = 0
    while i < len(lines) and lines[i].startswith("@@ -"):
        i = _hunk_end(lines, i)
        count += 1
        if i < len(lines) and lines[i].startswith("\\ "):
            i += 1
    return i, count


def _git_section(lines: list[str], i: int, p: int) -> tuple[Section, int]:
    default = git_header_name(lines[i][len("diff --git "):], p)
    old: str | None = default
    new: str | None = default
    is_new = is_delete = rename = copy = False
    modes: list[str] = []
    start, i = i, i + 1
    while i < len(lines) and lines[i].startswith(_GIT_HEADER_LINES) and not lines[i].startswith("@@ -"):
        line = lines[i]
        if line.startswith(("--- ", "+++ ")):
            value = line[4:]
            side_new = line.startswith("+++ ")
            current = new if side_new else old
            null = is_new if not side_new else is_delete
            if is_dev_null(value):
                if current is not None and not null:
                    raise DiffError(f"line {i + 1}: /dev/null where the header names {current!r}")
                if side_new:
                    new, is_delete = None, True
                else:
                    old, is_new = None, True
            else:
                name = find_name(value, None, p, True)
                if current is None and not null:
                    current = name
                elif current is None or name != current:
                    raise DiffError(f"line {i + 1}: {name!r} disagrees with the `diff --git` line")
                if side_new:
                    new = current
                else:
                    old = current
        elif line.startswith(("new file mode ", "deleted file mode ", "old mode ", "new mode ")):
            modes.append(line.split()[-1])
            if line.startswith("new file mode "):
                is_new, old = True, None
            elif line.startswith("deleted file mode "):
                is_delete, new = True, None
        elif line.startswith(("rename from ", "rename old ", "copy from ")):
            rename, copy = rename or line.startswith("rename"), copy or line.startswith("copy")
            old = find_name(line.split(" ", 2)[2], None, 0, False)
        elif line.startswith(("rename to ", "rename new ", "copy to ")):
            rename, copy = rename or line.startswith("rename"), copy or line.startswith("copy")
            new = find_name(line.split(" ", 2)[2], None, 0, False)
        elif line.startswith("index ") and len(line.split()) > 2:
            modes.append(line.split()[2])
        i += 1
    if (new is None and not is_delete) or (old is None and not is_new):
        raise DiffError(f"line {start + 1}: git diff header lacks filename information")
    binary = i < len(lines) and (lines[i].startswith("GIT binary patch") or lines[i].startswith("Binary files "))
    i, hunks = _hunks(lines, i)
    return Section(start, old, new, True, hunks, binary, tuple(modes), rename, copy), i


def split_sections(text: str) -> list[Section]:
    """The file patches of `text`, split and named as `git apply` (default -p1) splits and names them."""
    lines = text.splitlines(keepends=True)
    out: list[Section] = []
    p, p_known = 1, False
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("@@ -"):
            raise DiffError(f"line {i + 1}: a hunk outside any file section (patch fragment without header)")
        if line.startswith("diff --git "):
            section, i = _git_section(lines, i, p)
            out.append(section)
            continue
        if (line.startswith("--- ") and i + 2 < len(lines) and lines[i + 1].startswith("+++ ")
                and lines[i + 2].startswith("@@ -")):
            first, second = line[4:], lines[i + 1][4:]
            if not p_known:
                # apply.c guess_p_value: a name without '/' means -p0, and the guess sticks
                guesses = [None if is_dev_null(n) else (0 if "/" not in (find_name(n, None, 0, True) or "/")
                                                        else None) for n in (first, second)]
                g = guesses[0] if guesses[0] is not None else guesses[1]
                if g is not None and g == guesses[1]:
                    p, p_known = g, True
            old = None if is_dev_null(first) else find_name(first, None, p, True)
            new = None if is_dev_null(second) else find_name(second, old, p, True)
            if is_dev_null(first):
                old = None
            elif not is_dev_null(second):
                old = new
            start = i
            i, hunks = _hunks(lines, i + 2)
            out.append(Section(start, old, new, False, hunks, False, (), False, False))
            continue
        i += 1
    return out
