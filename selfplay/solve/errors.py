"""Errors of `selfplay solve`, rooted in the project's `SelfPlayError`."""

from repos.errors import SelfPlayError


class SolveError(SelfPlayError):
    """`selfplay solve` cannot proceed (repo does not install, issue cannot be fetched, dirty tree with
    --branch, ...); the message names the problem and what to do."""
