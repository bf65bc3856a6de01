"""Errors of the agent scaffold."""

from repos.errors import SelfPlayError


class ScaffoldError(SelfPlayError):
    """Root of the scaffold's errors."""


class PolicyError(ScaffoldError):
    """A policy backend failed (server unreachable after retries, bad response); infrastructure, not agent."""
