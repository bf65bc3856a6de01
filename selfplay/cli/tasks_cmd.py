"""Commands of this group are added by the issue that builds them."""

import typer


def register(app: typer.Typer) -> None:
    """Add this module's commands to `app`."""
