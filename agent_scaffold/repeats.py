"""`RepeatCounter`: how many turns in a row repeated the turn before them (pure Python).

A turn repeats the previous one when its parsed action equals the previous turn's (the thought before the
block may differ) and the sandbox answered it with the same observation. Such a turn left the sandbox and
what the policy knows as they were, so a policy that repeats is in a loop (`EpisodeLimits.max_repeats`).
A malformed reply breaks the run: the turn after it is compared with nothing.
"""

from __future__ import annotations

from agent_scaffold.actions import Action


class RepeatCounter:
    """Counts consecutive repeats over an episode's turns, in order."""

    def __init__(self) -> None:
        self._last: tuple[Action, str] | None = None
        self.run = 0
        """Turns in a row, up to the last one seen, that repeated the turn before them."""

    def see(self, action: Action, observation: str) -> int:
        """Record a parsed turn and its observation; returns the run of repeats it ends."""
        self.run = self.run + 1 if self._last == (action, observation) else 0
        self._last = (action, observation)
        return self.run

    def malformed(self) -> None:
        """Record a reply that did not parse."""
        self._last, self.run = None, 0
