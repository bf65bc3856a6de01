"""Pure helpers over git/unified diffs: split by file, touched paths, binary detection, a normalised hash
for dedup, reversal, and dropping the file sections that touch test infrastructure.

Diffs are kept as the exact text of each file section (what `git apply` needs). Sections and their
paths follow git's own rules (`selfplay.diffs.headers`) and are cross-checked against git itself
(`selfplay.diffs.git_view`); a patch on which the two disagree is refused (DiffError). unidiff only reads hunks. Filtering works per file section: every hunk of a dropped file is dropped,
since a partial edit to a conftest.py or pytest.ini is no more trustworthy than a whole one.
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
import sys
from dataclasses import dataclass
from pathlib import PurePosixPath

from unidiff import PatchSet
from unidiff.errors import UnidiffParseError

from selfplay.diffs.git_view import GitView, git_view, rename_summary, strip_score
from selfplay.diffs.headers import Section, split_sections
from selfplay.errors import DiffError

# pytest reads its configuration from these files (any of them at the rootdir or above); a prediction
# editing one can deselect, skip or xfail oracle tests, or load a plugin.
TEST_CONFIG_FILES = frozenset({"pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml",
                               "noxfile.py", "Makefile"})
# pytest looks for its configuration from the folder common to its arguments upwards, so one of these
# in a package folder (`toolz/pyproject.toml`) is the run's config when the tests live below it: they are
# infrastructure at any depth.
PYTEST_CONFIG_FILES = frozenset({"pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml"})
# pytest's default `--doctest-glob`: such a file anywhere under a test path is collected and its `>>>`
# lines run inside the test process, with `getfixture` at hand.
DOCTEST_GLOB = "test*.txt"
# Executed by every Python process at start-up when found on sys.path (the repo is on it for
# `python -m pytest`, and for editable installs always), so they can rewrite any test outcome.
STARTUP_HOOK_FILES = frozenset({"sitecustomize.py", "usercustomize.py"})
# Modules a file at the repo root may shadow when pytest runs with the repo first on sys.path.
_SHADOWABLE = frozenset(sys.stdlib_module_names) | {"pytest", "_pytest", "pluggy", "py", "iniconfig"}


@dataclass(frozen=True)
class FileDiff:
    """One file's section of a diff."""

    path: str
    """Path relative to the repo root (the target path; the source path for a deletion)."""
    source_path: str | None
    """Path before the change; None for a new file."""
    target_path: str | None
    """Path after the change; None for a deleted file."""
    text: str
    """The exact text of this section, headers included."""
    hunks: int
    """Number of hunks."""
    binary: bool
    """True for a binary change (`Binary files ... differ` or `GIT binary patch`)."""
    symlink: bool
    """True when the section creates or edits a symlink (mode 120000)."""


def _unidiff(text: str, name: str) -> PatchSet:
    try:
        return PatchSet(text)
    except UnidiffParseError as exc:
        raise DiffError(f"{name} is not a valid unified diff: {exc}") from None


def parse_diff(text: str, *, name: str = "diff") -> PatchSet:
    """Parse `text` with unidiff once its file sections agree with git's view (see `split_diff`);
    raises DiffError naming `name` and the problem."""
    split_diff(text, name=name)
    return _unidiff(text, name)


def _agree(sections: list[Section], view: GitView, name: str) -> None:
    """Raise DiffError unless the Python parse and git's own reading of the patch name the same paths."""
    ours = [s.new_name or s.old_name for s in sections]
    if ours != list(view.paths):
        raise DiffError(f"{name} is not a valid diff: sections disagree with git's view (sections name "
                        f"{ours[:6]!r}, git applies to {list(view.paths)[:6]!r}); produce it with plain `git diff`")
    if [s.binary for s in sections] != list(view.binary):
        raise DiffError(f"{name} is not a valid diff: binary sections disagree with git's view")
    renames = sorted(rename_summary("rename" if s.rename else "copy", s.old_name or "", s.new_name or "")
                     for s in sections if s.rename or s.copy)
    theirs = sorted(strip_score(ln) for ln in view.summary if ln.startswith(("rename ", "copy ")))
    if renames != theirs:
        raise DiffError(f"{name} is not a valid diff: rename/copy headers disagree with git's view "
                        f"({renames[:3]!r} vs {theirs[:3]!r})")
    if any("120000" in ln for ln in view.summary) and not any("120000" in s.modes for s in sections):
        raise DiffError(f"{name} is not a valid diff: git reads a symlink the sections do not show")


def split_diff(text: str, *, name: str = "diff") -> list[FileDiff]:
    """The file sections of `text`, in order, split and named exactly as `git apply` splits and names them.

    Paths come from git's header rules (`selfplay.diffs.headers`: C-quoted names, -p1 whatever the first
    component is, `---`/`+++` sections mixed among `diff --git` ones) and must agree with what git itself
    reads (`selfplay.diffs.git_view`), else DiffError: a trick that fools one parser is refused outright.
    """
    try:
        sections = split_sections(text)
    except DiffError as exc:
        raise DiffError(f"{name} is not a valid diff: {exc}") from None
    if sections:
        try:
            view = git_view(text)
        except DiffError as exc:
            raise DiffError(f"{name} is not a valid diff: {exc}") from None
        _agree(sections, view, name)
    elif text.strip():
        try:
            view = git_view(text)
        except DiffError:  # "No valid patches in input": git agrees there is no file section
            view = GitView((), (), ())
        _agree(sections, view, name)
    lines = text.splitlines(keepends=True)
    bounds = [s.start for s in sections] + [len(lines)]
    out = []
    for k, sec in enumerate(sections):
        body = "".join(lines[bounds[k]:bounds[k + 1]])
        symlink = "120000" in sec.modes
        out.append(FileDiff(path=sec.new_name or sec.old_name or "", source_path=sec.old_name,
                            target_path=sec.new_name, text=body, hunks=sec.hunks, binary=sec.binary,
                            symlink=symlink))
    return out


def touched_files(text: str) -> tuple[str, ...]:
    """Every path the diff touches (both sides of a rename), de-duplicated, in order."""
    paths: list[str] = []
    for fd in split_diff(text):
        paths += [p for p in (fd.source_path, fd.target_path) if p]
        if not fd.source_path and not fd.target_path:
            paths.append(fd.path)
    return tuple(dict.fromkeys(paths))


def has_binary(text: str) -> bool:
    return any(fd.binary for fd in split_diff(text))


def join_diff(sections: list[FileDiff]) -> str:
    return "".join(s.text if s.text.endswith("\n") else s.text + "\n" for s in sections)


def normalised_hash(text: str) -> str:
    """sha256 of the diff's meaning: per file (sorted) its path and its changed lines, trailing whitespace off.

    Leading whitespace is kept: in Python an indentation-only change (a `return` moved out of an `if`)
    is a real edit and must not hash like a no-op.

    Context lines, line numbers, hunk headers, index lines and file order do not change it, so two
    patches making the same edits hash the same.
    """
    items = []
    for fd in split_diff(text):
        lines = []
        for pf in _unidiff(fd.text, "diff"):
            for hunk in pf:
                for line in hunk:
                    if line.is_added or line.is_removed:
                        lines.append(line.line_type + line.value.rstrip())
        items.append((fd.source_path or "", fd.target_path or "", tuple(lines)))
    h = hashlib.sha256()
    for src, tgt, lines in sorted(items):
        h.update(f"{src}\0{tgt}\0".encode())
        h.update("\n".join(lines).encode())
        h.update(b"\1")
    return h.hexdigest()


def _quoted(prefix: str, path: str) -> str:
    """`prefix + path` as git writes it in a header: C-quoted when it holds a quote, backslash, control or
    non-ASCII character (git's quote_c_style with core.quotePath on)."""
    name = prefix + path
    if not any(ch in '"\\' or ord(ch) < 0x20 or ord(ch) >= 0x7f for ch in name):
        return name
    escapes = {'"': '\\"', "\\": "\\\\", "\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n",
               "\r": "\\r", "\t": "\\t", "\v": "\\v"}
    out = []
    for ch in name:
        if ch in escapes:
            out.append(escapes[ch])
        elif ord(ch) < 0x20 or ord(ch) >= 0x7f:
            out.extend(f"\\{b:03o}" for b in ch.encode("utf-8", "surrogateescape"))
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _reverse_section(fd: FileDiff) -> str:
    (pf, *_) = _unidiff(fd.text, "diff")
    src, tgt = fd.target_path, fd.source_path  # swapped
    a, b = src or tgt, tgt or src
    out = [f"diff --git {_quoted('a/', a)} {_quoted('b/', b)}\n"]
    if src is None:
        out.append(f"new file mode {pf.source_mode or '100644'}\n")
    elif tgt is None:
        out.append(f"deleted file mode {pf.target_mode or '100644'}\n")
    elif pf.source_mode and pf.target_mode and pf.source_mode != pf.target_mode:
        out.append(f"old mode {pf.target_mode}\nnew mode {pf.source_mode}\n")
    if src != tgt and src and tgt:
        out.append(f"rename from {_quoted('', src)}\nrename to {_quoted('', tgt)}\n")
    if len(pf) == 0:
        return "".join(out)
    old, new = _quoted("a/", src) if src else "/dev/null", _quoted("b/", tgt) if tgt else "/dev/null"
    out.append(f"--- {old}\n+++ {new}\n")
    for hunk in pf:
        out.append(f"@@ -{hunk.target_start},{hunk.target_length} +{hunk.source_start},{hunk.source_length} @@"
                   f"{' ' + hunk.section_header if hunk.section_header else ''}\n")
        # A change block is a run of -/+ lines; reversed, its old + lines come first as - lines.
        removed: list[str] = []
        added: list[str] = []
        last: list[str] | None = None
        for line in hunk:
            text = line.value if line.value.endswith("\n") else line.value + "\n"
            if line.is_added:
                removed.append("-" + text)
                last = removed
            elif line.is_removed:
                added.append("+" + text)
                last = added
            elif line.line_type == "\\":
                # "\ No newline at end of file" belongs to the line just before it
                if last is not None:
                    last[-1] = last[-1] + "\\ No newline at end of file\n"
                else:
                    out[-1] = out[-1] + "\\ No newline at end of file\n"
            else:
                out.extend(removed + added)
                removed, added = [], []
                out.append(" " + text)
                last = None
        out.extend(removed + added)
    return "".join(out)


def reverse_diff(text: str) -> str:
    """The diff that undoes `text` (what `git apply -R` would apply), as text."""
    sections = split_diff(text)
    out = "".join(_reverse_section(fd) for fd in sections)
    # the reversal is read back the way git reads it: it must touch exactly the paths `text` touched
    back = split_diff(out, name="reversed diff")
    if [(b.source_path, b.target_path) for b in back] != [(f.target_path, f.source_path) for f in sections]:
        raise DiffError("the reversed diff names other paths than the diff it reverses; produce the diff "
                        "with plain `git diff`")
    return out


def matches_any(path: str, patterns: tuple[str, ...] | list[str]) -> bool:
    """fnmatch `path` (and its file name) against repo test patterns."""
    name = PurePosixPath(path).name
    return any(fnmatch.fnmatch(path, p) or ("/" not in p and fnmatch.fnmatch(name, p)) for p in patterns)


def is_git_metadata(path: str) -> bool:
    """`.git/...`, `.gitattributes`, `.gitmodules`, `.gitignore` and any other `.git*` path component."""
    return any(part.startswith(".git") for part in PurePosixPath(path).parts)


def infrastructure_reason(path: str, *, new: bool = False, test_files: tuple[str, ...] = (),
                          test_patterns: tuple[str, ...] = (), script: str = "") -> str | None:
    """Why a prediction may not change `path` (it is test infrastructure), or None when it may.

    `new` marks a file the prediction creates: a new top-level module named like a stdlib or pytest
    module would shadow it for `python -m pytest` (which puts the repo first on sys.path).
    """
    p = PurePosixPath(path)
    name = p.name
    if path in test_files:
        return "oracle test file (test_files.txt)"
    if is_git_metadata(path):
        return "git metadata (changes how the grader's git sees the tree)"
    if name == "conftest.py":
        return "conftest.py (pytest hooks)"
    if len(p.parts) == 1 and name in TEST_CONFIG_FILES or name in PYTEST_CONFIG_FILES:
        return f"test configuration ({name})"
    if fnmatch.fnmatchcase(name, DOCTEST_GLOB):
        return f"doctest file ({name}: pytest collects {DOCTEST_GLOB} files and runs their examples)"
    if name in STARTUP_HOOK_FILES or name.endswith(".pth"):
        return f"interpreter start-up hook ({name})"
    if any(part.endswith((".egg-info", ".dist-info")) for part in p.parts):
        return "package metadata (can register pytest plugins)"
    if any(part in ("__pycache__", ".pytest_cache") for part in p.parts) or name.endswith((".pyc", ".pyo")):
        return "cached bytecode or pytest cache"
    top = p.parts[0].removesuffix(".py") if len(p.parts) > 1 or name.endswith(".py") else ""
    if new and top in _SHADOWABLE:
        return f"new module shadowing {top!r} at the repo root"
    if test_patterns and matches_any(path, test_patterns):
        return "matches the repo's test patterns"
    if script and re.search(rf"(^|[\s/'\"=]){re.escape(path)}($|[\s'\";:)])", script):
        return "read by test_script.sh"
    return None


@dataclass(frozen=True)
class FilteredDiff:
    """A prediction with its test-infrastructure sections removed."""

    kept: str
    """The diff text that may be applied."""
    dropped: tuple[str, ...]
    """One line per dropped file section: `path (N hunks): reason`."""


def drop_infrastructure(text: str, *, test_files: tuple[str, ...] = (), test_patterns: tuple[str, ...] = (),
                        script: str = "") -> FilteredDiff:
    """Remove the file sections of `text` that touch test infrastructure, reporting each one.

    A section is also dropped when it is binary or makes a symlink (a symlink can point an innocent
    path at a test file), since neither can be reviewed as text.
    """
    kept, dropped = [], []
    for fd in split_diff(text, name="prediction"):
        reasons = [r for r in (infrastructure_reason(p, new=fd.source_path is None, test_files=test_files,
                                                     test_patterns=test_patterns, script=script)
                               for p in (fd.source_path, fd.target_path) if p) if r]
        if fd.binary:
            reasons.append("binary change")
        if fd.symlink:
            reasons.append("symlink")
        if reasons:
            dropped.append(f"{fd.path} ({fd.hunks} hunk{'s' if fd.hunks != 1 else ''}): {reasons[0]}")
        else:
            kept.append(fd)
    kept_text = join_diff(kept)
    # Dropping a section can change how git reads the rest (apply.c guesses -p0 from the first
    # traditional section and keeps it), so the kept text must still name exactly the kept paths.
    if [fd.path for fd in split_diff(kept_text, name="prediction")] != [fd.path for fd in kept]:
        raise DiffError("prediction is not a valid diff: sections disagree with git's view once test "
                        "infrastructure is dropped; produce it with plain `git diff`")
    return FilteredDiff(kept=kept_text, dropped=tuple(dropped))
