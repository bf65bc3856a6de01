"""The base of the CLI's progress views for one command's long work (`TurnProgress`, `EvalProgressDisplay`):
a rich `Live` or `Progress` drawn only when the output and the log are terminals, on the console the log
handler writes to (stderr), so that log lines print above it instead of through it. Elsewhere (a pipe, a CI
log) a view prints lines instead, since a live display prints only its last frame there."""

from __future__ import annotations

import logging
from typing import Protocol, Self

from rich.console import Console


class Drawing(Protocol):
    """What a view draws with: rich's `Live` and `Progress` both have these."""

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def refresh(self) -> None: ...


def log_console() -> Console:
    """The console of the root logger's rich handler (`selfplay`'s callback installs one), else a new stderr
    console (a caller that set up no logging)."""
    from rich.logging import RichHandler

    for handler in logging.getLogger().handlers:
        if isinstance(handler, RichHandler):
            return handler.console
    return Console(stderr=True)


class LiveView:
    """`with view:` starts and stops the drawing a subclass sets (`self.drawing`), when it draws live."""

    def __init__(self, console: Console, *, live: bool | None = None, status: Console | None = None) -> None:
        self.console = console
        """Where a view's lines go when it does not draw live."""
        self.status = status or log_console()
        """Where it draws (the log's console)."""
        self.live = (console.is_terminal and self.status.is_terminal) if live is None else live
        """Whether it draws live; None asks the two consoles."""
        self.drawing: Drawing | None = None

    def __enter__(self) -> Self:
        if self.live and self.drawing is not None:
            self.drawing.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live and self.drawing is not None:
            self.drawing.stop()
