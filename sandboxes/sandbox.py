"""The `Sandbox` protocol and the data it returns.

A sandbox is a repository checked out at `workdir` inside an isolated container. Everything above this
layer (agent tools, validation, grading) talks to it only through this protocol.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

BASE_TAG = "selfplay-base"
"""The git tag on the base commit of every sandbox's repo: the baseline of `diff()` (a repo image's clean
checkout, a task image's buggy state). Defined once here, the lowest layer whose scripts use it."""
BASE_MESSAGE = "initial commit"
"""The message of the one commit `Sandbox.rebase` leaves (and of the `.git` every suite job gives its run)."""
BASE_DATE = "2000-01-01T00:00:00Z"
"""The author and committer date of that commit: fixed, so that its hash follows from its tree and message
alone, and the solver's sandbox and a suite job's run of the same tree show the same commit."""
WORKDIR = "/testbed"
"""Where the repository lies in every image a sandbox starts from (repo, task and solve images; SWE-bench's
instance images use the same path)."""


@dataclass(frozen=True)
class ExecResult:
    """Outcome of one command."""

    exit_code: int
    """The command's exit status; -1 when it was killed by the timeout."""
    output: str
    """stdout and stderr interleaved, decoded as UTF-8 with replacement, capped (head and tail kept)."""
    timed_out: bool
    """True when the timeout fired and every process the command started was killed."""
    duration: float
    """Wall-clock seconds."""
    dropped_bytes: int = 0
    """Bytes of output dropped from the middle by the cap (the output also says so)."""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


@dataclass(frozen=True)
class PatchResult:
    """Outcome of applying a unified diff to the working tree."""

    applied: bool
    """True when every hunk applied; on False the tree is left unchanged."""
    files: tuple[str, ...] = ()
    """Paths the diff touches (relative to the repo root)."""
    error: str | None = None
    """Why it did not apply (git apply's message, or a parse error), None when applied."""
    binary: bool = False
    """True when the diff has binary hunks."""
    details: dict[str, str] = field(default_factory=dict)
    """Extra diagnostics (e.g. which strategy applied it)."""


@runtime_checkable
class Sandbox(Protocol):
    """A repository in an isolated container."""

    workdir: str

    def exec(self, cmd: str, timeout: float | None = None, *, workdir: str | None = None,
             env: dict[str, str] | None = None, stdin: str | bytes | None = None,
             user: str = "agent") -> ExecResult:
        """Run `cmd` with bash (non-login, so the image's PATH holds) in `workdir` (default: the repo).
        user: "agent" (unprivileged; the default, for anything a model wrote) or "root" (grader only)."""
        ...

    def read_file(self, path: str, *, max_bytes: int | None = None, user: str = "agent") -> bytes:
        """Bytes of `path` (relative to the repo root, or absolute). Raises FileNotFoundError, and
        `sandboxes.errors.FileTooLarge` past `max_bytes` before transferring anything."""
        ...

    def write_file(self, path: str, content: str | bytes, *, user: str = "agent") -> None:
        """Create or overwrite `path`, creating parent directories."""
        ...

    def apply_patch(self, diff: str | bytes, *, reverse: bool = False) -> PatchResult:
        """Apply a git/unified diff at the repo root; all-or-nothing. Grader-side: hooks off, the
        model's git configuration unused."""
        ...

    def diff(self) -> str:
        """`git diff` of the working tree against the base commit, new files included; grader-side."""
        ...

    def reset(self) -> None:
        """Return the repo (and scratch space) to the base state, verified."""
        ...

    def rebase(self, message: str = BASE_MESSAGE) -> None:
        """Make the current tree the base (one fresh commit; what `reset` returns to); no copy of the
        previous base stays readable to model code."""
        ...

    def close(self) -> None:
        """Remove the container. Idempotent."""
        ...
