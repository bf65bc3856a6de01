"""`RepeatCounter`: how many turns in a row repeated the turn before them (pure Python).

A turn repeats the previous one when its parsed action equals the previous turn's (the thought before the
block may differ) and the sandbox answered it with the same observation. Such a turn left the sandbox and
what the policy knows as they were, so a policy that repeats is in a loop (`EpisodeLimits.max_repeats`).
A malformed reply breaks the run: the turn after it is compared with nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from agent_scaffold.actions import Action, FormatError, parse_action


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


def cut_turn(messages: Sequence[Mapping[str, str]], max_repeats: int) -> int | None:
    """The 0-based turn at which a limit of `max_repeats` would have ended an episode played without it, from
    its messages (system, task, then each reply and its observation), or None. The last reply has no
    observation in the messages when the episode ended after it, so it is never a cut."""
    turns = messages[2:]
    counter = RepeatCounter()
    for i in range(0, len(turns), 2):
        try:
            action = parse_action(turns[i]["content"])
        except FormatError:
            counter.malformed()
            continue
        if i + 1 < len(turns) and counter.see(action, turns[i + 1]["content"]) >= max_repeats:
            return i // 2
    return None
