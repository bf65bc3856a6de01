"""Progress of one episode played from the command line (`selfplay solve`, `selfplay episode`): each turn's
action as a line, and, on a terminal, a spinner under them that says which turn is under way and for how long.

A turn on a CPU can take minutes (the model writes up to `max_new_tokens`, then the tool runs), and before
the first one the sandbox image may build; the spinner's clock shows that the work goes on. It is drawn on
the log's console (`live_view`), and on a terminal the turn lines go there too, so that they print above
it; elsewhere (a pipe, a CI log) there is no spinner and each turn is one line on `console`.
"""

from __future__ import annotations

import time
from typing import Self

from rich.console import Console
from rich.live import Live
from rich.spinner import Spinner

from selfplay.cli.live_view import LiveView


class TurnProgress(LiveView):
    """`with TurnProgress(console, max_turns) as progress: run_episode(..., on_turn=progress)`."""

    def __init__(self, console: Console, max_turns: int | None = None, *, first: str = "the model writes",
                 live: bool | None = None, status: Console | None = None) -> None:
        super().__init__(console, live=live, status=status)
        self.max_turns = max_turns
        self.first = first
        """What turn 1's spinner says happens (the caller knows what precedes the first reply)."""
        self.turns = 0
        """Turns reported so far."""
        self._started = self._turn_started = time.monotonic()
        self._spinner = Spinner("dots")
        if self.live:
            self.drawing = Live(get_renderable=self._render, console=self.status, refresh_per_second=4,
                                transient=True)

    def __enter__(self) -> Self:
        self._started = self._turn_started = time.monotonic()
        return super().__enter__()

    def __call__(self, turn: int, what: str) -> None:
        """`run_episode`'s `on_turn`: turn `turn` chose `what` (its tool now runs, then the next turn's model
        writes)."""
        self.turns = turn
        self._turn_started = time.monotonic()
        (self.status if self.live else self.console).print(f"turn {turn}: {what}", highlight=False, markup=False)
        if self.drawing is not None:  # the next turn's text now, not at the next tick
            self.drawing.refresh()

    def describe(self) -> str:
        """The spinner's text: the turn under way, its seconds so far, and the episode's."""
        now = time.monotonic()
        of = f" of {self.max_turns}" if self.max_turns else ""
        if self.turns == 0:
            doing = f"turn 1{of}: {self.first}"
        else:
            doing = f"turn {self.turns + 1}{of}: turn {self.turns}'s tool runs, then the model writes"
        return f"{doing} ({now - self._turn_started:.0f} s; {now - self._started:.0f} s in all)"

    def _render(self) -> Spinner:
        self._spinner.update(text=self.describe())
        return self._spinner
