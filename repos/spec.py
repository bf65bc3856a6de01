"""`RepoSpec`: one entry of a repo list, i.e. where a real repository comes from and how to test it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Source = Literal["pypi", "git", "local", "image"]
SOURCES: tuple[str, ...] = ("pypi", "git", "local", "image")

# Paths (fnmatch patterns, relative to the repo root) treated as test infrastructure by default.
DEFAULT_TEST_PATTERNS: tuple[str, ...] = (
    "test_*.py",
    "*_test.py",
    "tests/*",
    "test/*",
    "*/tests/*",
    "*/test/*",
    "testing/*",
    "conftest.py",
    "*/conftest.py",
)


@dataclass(frozen=True)
class RepoSpec:
    """One real repository: its source, its image layout and how its tests run."""

    name: str
    """Short unique name used on the command line (`--repo NAME`)."""
    source: Source
    """Where the code comes from: a PyPI sdist, a git URL, a local path or a pre-built image."""
    version: str | None = None
    """pypi: the exact release, e.g. "1.2.0"."""
    package: str | None = None
    """pypi: the distribution name when it differs from `name`."""
    url: str | None = None
    """git: clone URL."""
    commit: str | None = None
    """git: commit to check out (full history is kept)."""
    path: str | None = None
    """local: a directory on this machine."""
    image: str | None = None
    """image: a pre-built image holding the repo (e.g. a SWE-bench or SWE-smith environment image)."""
    workdir: str = "/testbed"
    """Where the repo lives inside the container."""
    history: int = 0
    """pypi: build a real git history from this many releases' sdists (0: one commit)."""
    install: tuple[str, ...] = ()
    """Extra pip requirements installed into the repo's virtualenv (test dependencies)."""
    test_command: str = "python -m pytest -rA -p no:cacheprovider"
    """Command that runs the whole suite from the workdir; used by procedural seeds and checks."""
    test_patterns: tuple[str, ...] = DEFAULT_TEST_PATTERNS
    """fnmatch patterns of test files; bug patches may not touch them, solver edits to them are dropped."""
    python: str = "python3"
    """Interpreter used to create the repo's virtualenv inside the image."""
    env: tuple[tuple[str, str], ...] = field(default=())
    """Extra environment variables set in the sandbox."""

    @property
    def distribution(self) -> str:
        return self.package or self.name
