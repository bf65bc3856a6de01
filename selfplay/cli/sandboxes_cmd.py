"""`selfplay setup` (Docker engine + base image) and `selfplay sandboxes gc|ls`."""

from __future__ import annotations

import typer

from sandboxes.engine import docker_client, ensure_engine
from sandboxes.reaper import gc as reap
from sandboxes.reaper import list_sandboxes

sandboxes_app = typer.Typer(help="Inspect and clean up sandbox containers.", no_args_is_help=True)


def setup(yes: bool = typer.Option(False, "--yes", "-y", help="Install and start without asking.")) -> None:
    """Make this machine ready: a Docker engine that answers, and the base image."""
    from rich.console import Console

    console = Console()
    if not ensure_engine(yes, ask=lambda q: typer.confirm(q, default=True), say=console.print):
        raise typer.Exit(1)
    # lazy: keeps `selfplay --help` fast
    from sandboxes.images import ensure_base_image  # builds with debootstrap when missing (minutes)

    tag = ensure_base_image()
    console.print(f"[green]Ready:[/] engine answers, base image {tag}.")


@sandboxes_app.command("ls")
def ls() -> None:
    """List labelled sandbox containers and whether their owner process is alive."""
    from rich.console import Console
    from rich.table import Table

    rows = list_sandboxes(docker_client())
    table = Table("id", "name", "image", "status", "run", "owner", "owner alive")
    for s in rows:
        alive = "other host" if s.owner_alive is None else ("yes" if s.owner_alive else "[red]no[/]")
        table.add_row(s.id, s.name, s.image, s.status, s.run_id, s.owner, alive)
    Console().print(table if rows else "No sandbox containers.")


@sandboxes_app.command("gc")
def gc(other_hosts: bool = typer.Option(False, "--other-hosts",
                                        help="Also remove containers owned from other hosts (cannot tell "
                                             "whether those owners live)."),
       dry_run: bool = typer.Option(False, "--dry-run", help="Only show what would be removed.")) -> None:
    """Remove labelled containers whose owner process is gone."""
    from rich.console import Console

    removed = reap(docker_client(), other_hosts=other_hosts, dry_run=dry_run)
    verb = "Would remove" if dry_run else "Removed"
    Console().print(f"{verb} {len(removed)} orphaned sandbox container(s)"
                    + (": " + ", ".join(s.id for s in removed) if removed else "."))


def register(app: typer.Typer) -> None:
    """Add this module's commands to `app`."""
    app.command("setup")(setup)
    app.add_typer(sandboxes_app, name="sandboxes")
