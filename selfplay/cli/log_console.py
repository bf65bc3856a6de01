"""The console the CLI's log handler writes to (stderr): where live progress is drawn, so that log lines
print above a spinner or a bar instead of through it."""

from __future__ import annotations

import logging

from rich.console import Console


def log_console() -> Console:
    """The console of the root logger's rich handler (`selfplay`'s callback installs one), else a new stderr
    console (a caller that set up no logging)."""
    from rich.logging import RichHandler

    for handler in logging.getLogger().handlers:
        if isinstance(handler, RichHandler):
            return handler.console
    return Console(stderr=True)
