"""Progress of one episode played from the command line (`selfplay solve`, `selfplay episode`): each turn's
action as a line, and, on a terminal, a spinner under them that says which turn is under way and for how long.

A turn on a CPU can take minutes (the model writes up to `max_new_tokens`, then the tool runs), and before
the first one the sandbox image builds and the model loads; without the spinner the screen stood still
through all of it. The spinner is drawn on the console the log handler writes to (stderr), so that log
lines print above it instead of through it; on a terminal the turn lines go there too, for the same
reason. Elsewhere (a pipe, a CI log) there is no spinner and each turn is one line on `console`, as
before.
"""

from __future__ import annotations

import logging
import time

from rich.console import Console
from rich.live import Live
from rich.spinner import Spinner


def log_console() -> Console | None:
    """The console of the root logger's rich handler (the CLI's stderr log), if there is one."""
    from rich.logging import RichHandler

    for handler in logging.getLogger().handlers:
        if isinstance(handler, RichHandler):
            return handler.console
    return None


class TurnProgress:
    """`with TurnProgress(console, max_turns) as progress: run_episode(..., on_turn=progress)`."""

    def __init__(self, console: Console, max_turns: int | None = None, *, first: str = "the model writes",
                 live: bool | None = None, status: Console | None = None) -> None:
        self.console = console
        """Where turn lines go when there is no spinner."""
        self.max_turns = max_turns
        self.first = first
        """What turn 1's spinner says happens (the caller knows what precedes the first reply)."""
        self.turns = 0
        """Turns reported so far."""
        self._status = status or log_console() or Console(stderr=True)
        use_live = (self.console.is_terminal and self._status.is_terminal) if live is None else live
        self._started = self._turn_started = time.monotonic()
        self._spinner = Spinner("dots")
        self._live = Live(get_renderable=self._render, console=self._status, refresh_per_second=4,
                          transient=True) if use_live else None

    @property
    def live(self) -> bool:
        """Whether a spinner is shown."""
        return self._live is not None

    def __enter__(self) -> TurnProgress:
        self._started = self._turn_started = time.monotonic()
        if self._live is not None:
            self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.stop()

    def __call__(self, turn: int, what: str) -> None:
        """`run_episode`'s `on_turn`: turn `turn` chose `what` (its tool now runs, then the next turn's model
        writes)."""
        self.turns = turn
        self._turn_started = time.monotonic()
        (self._status if self._live is not None else self.console).print(f"turn {turn}: {what}", highlight=False,
                                                                         markup=False)

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
