"""Errors of SWE-bench evaluation, rooted in the project's `SelfPlayError`."""

from repos.errors import SelfPlayError


class EvalError(SelfPlayError, ValueError):
    """Bad evaluation input (unknown instance id, missing dataset file, instance without an eval script,
    ...); the message names the input and what to do."""
