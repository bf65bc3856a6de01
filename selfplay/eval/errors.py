"""Errors of SWE-bench evaluation and `selfplay solve`, rooted in the project's `SelfPlayError`."""

from repos.errors import SelfPlayError


class EvalError(SelfPlayError, ValueError):
    """Bad evaluation input (unknown instance id, missing dataset file, instance without an eval script,
    ...); the message names the input and what to do."""


class SolveError(SelfPlayError):
    """`selfplay solve` cannot proceed (repo does not install, issue cannot be fetched, dirty tree with
    --branch, ...); the message names the problem and what to do."""
