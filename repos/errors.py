"""Errors of the repos package, and the project's root exception.

`repos` sits at the bottom of the import graph (sandboxes and selfplay both use it), so the one
exception every package roots its errors in lives here.
"""


class SelfPlayError(Exception):
    """Root of every error this project raises on purpose."""


class RepoError(SelfPlayError):
    """A repo list entry is malformed or its source cannot be fetched."""


class RepoNotFound(RepoError, KeyError):
    """A repo name is not in the repo list."""

    def __str__(self) -> str:  # KeyError quotes its message; we want it plain
        return str(self.args[0]) if self.args else ""
