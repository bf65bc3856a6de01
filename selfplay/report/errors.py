"""Errors of `selfplay report`."""

from repos.errors import SelfPlayError


class ReportError(SelfPlayError, ValueError):
    """The directory is not a run directory, or nothing in it can be read; the message names the path."""
