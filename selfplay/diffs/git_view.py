"""What `git apply` itself reads from a patch: the file paths it would touch, in order, asked of git.

`selfplay.diffs.patch` parses patches in Python (`selfplay.diffs.headers`) and refuses any patch whose parse
disagrees with this view, so the infrastructure filter judges exactly the paths git will write. git runs
in an empty throwaway directory, outside any repository, with no system or user configuration (the
model's git config cannot reach it); `--numstat` and `--summary` only read the patch, never the files.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from functools import lru_cache

from selfplay.errors import DiffError, SelfPlayError

TIMEOUT_S = 20.0
"""A patch git cannot read in this long is refused (git reads megabytes in milliseconds)."""


class GitUnavailableError(SelfPlayError, RuntimeError):
    """The host has no working `git`: install git (the grader's diff filter asks it for patch paths)."""


@dataclass(frozen=True)
class GitView:
    """One patch as `git apply --numstat --summary` reports it."""

    paths: tuple[str, ...]
    """Per file patch, in order: the new path, or the old one for a deletion."""
    binary: tuple[bool, ...]
    """Per file patch: git reports it as binary."""
    summary: tuple[str, ...]
    """The --summary lines (create/delete/mode change/rename/copy), stripped."""


def _run(args: list[str], text: bytes, cwd: str) -> bytes:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": cwd, "LC_ALL": "C",
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CEILING_DIRECTORIES": cwd}
    try:
        done = subprocess.run(["git", *args], input=text, cwd=cwd, env=env, capture_output=True,
                              timeout=TIMEOUT_S, check=False)
    except FileNotFoundError:
        raise GitUnavailableError("`git` is not on PATH; install git on the host that filters predictions") from None
    except subprocess.TimeoutExpired:
        raise DiffError(f"git could not read the patch within {TIMEOUT_S:.0f}s") from None
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip()[:400]
        if "No valid patches in input" in message:  # git's own hint (--allow-empty) is no remedy here
            message = "it holds no file section git can read (a `diff --git` or `---`/`+++` header with its hunks)"
        raise DiffError(f"git apply refuses it: {message or f'exit {done.returncode}'}")
    return done.stdout


@lru_cache(maxsize=256)
def git_view(text: str) -> GitView:
    """The file patches git reads from `text`; raises DiffError when git cannot read it as a patch."""
    data = text.encode("utf-8", "surrogateescape")
    with tempfile.TemporaryDirectory(prefix="selfplay-gitview-") as tmp:
        cwd = os.path.join(tmp, "empty")
        os.mkdir(cwd)
        numstat = _run(["apply", "--numstat", "-z", "-"], data, cwd)
        summary = _run(["apply", "--summary", "-"], data, cwd)
    paths, binary = [], []
    fields = numstat.split(b"\0")
    i = 0
    while i < len(fields):
        head = fields[i]
        i += 1
        if not head:
            continue
        cols = head.split(b"\t", 2)
        if len(cols) != 3:
            raise DiffError(f"unexpected `git apply --numstat` output {head[:80]!r}")
        name = cols[2]
        if not name:  # older git: a rename's old and new names follow as their own fields
            name, i = fields[i + 1], i + 2
        paths.append(name.decode("utf-8", "surrogateescape"))
        binary.append(cols[0] == b"-")
    lines = tuple(ln.strip() for ln in summary.decode("utf-8", "surrogateescape").splitlines() if ln.strip())
    return GitView(tuple(paths), tuple(binary), lines)


def rename_summary(kind: str, old: str, new: str) -> str:
    """The --summary line git prints for a rename or copy, score left out (apply.c show_rename_copy)."""
    o, n = old, new
    while "/" in o and "/" in n and o.index("/") == n.index("/") and o[:o.index("/")] == n[:n.index("/")]:
        cut = o.index("/") + 1
        o, n = o[cut:], n[cut:]
    common = old[:len(old) - len(o)]
    return f"{kind} {common}{{{o} => {n}}}" if common else f"{kind} {old} => {new}"


def strip_score(line: str) -> str:
    return re.sub(r" \(\d+%\)$", "", line)
