"""`selfplay solve`: the trained agent on a real issue in a real repository (placeholder until solve lands)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this module's commands to `app`."""
