"""Errors of the curriculum store."""

from __future__ import annotations

from repos.errors import SelfPlayError


class StoreError(SelfPlayError):
    """The store cannot be opened, or a request to it is malformed."""


class TaskNotFound(StoreError, KeyError):
    """No task has the given id."""

    def __str__(self) -> str:  # KeyError quotes its message; we want it plain
        return str(self.args[0]) if self.args else ""


class ImportFormatError(StoreError, ValueError):
    """A file given to `tasks import` is not a SWE-bench jsonl export (names the line and field)."""
