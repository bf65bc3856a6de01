"""`selfplay repos build [NAME...]` and `selfplay repos list`: repo images from a repo list file."""

from __future__ import annotations

from pathlib import Path

import typer

from repos.errors import RepoError
from repos.listfile import get_repo, load_repo_list
from selfplay.cli.failure import print_error

repos_app = typer.Typer(help="Build and list repo images (see docs/repos.md for the list format).",
                        no_args_is_help=True)

LIST_OPTION = typer.Option(None, "--list", "-l", help="Repo list TOML file (default: the bundled list).",
                           dir_okay=False)


def select_specs(names: list[str] | None, list_file: Path | None):
    """The named entries of the list (all of them when no names), exiting with the error on bad input."""
    try:
        return [get_repo(n, list_file) for n in names] if names else load_repo_list(list_file)
    except RepoError as exc:
        print_error(str(exc))
        raise typer.Exit(2) from None


def build_with_progress(specs, *, rebuild: bool = False):
    """Build every spec's image behind a rich progress bar; returns the BuildResults."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    # lazy: keeps `selfplay --help` fast
    from sandboxes.images import build_repo_images, ensure_base_image

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn()) as progress:
        task = progress.add_task("base image", total=len(specs))
        ensure_base_image()  # once, before the loop, so its minutes are not billed to the first repo
        names = iter([s.name for s in specs[1:]] + [""])
        progress.update(task, description=f"building {specs[0].name}" if specs else "")

        def done(result) -> None:
            nxt = next(names)
            progress.update(task, advance=1, description=f"building {nxt}" if nxt else "done")

        return build_repo_images(specs, rebuild=rebuild, on_done=done)


@repos_app.command("build")
def build(names: list[str] = typer.Argument(None, help="Repo names (default: every entry of the list)."),
          list_file: Path = LIST_OPTION,
          rebuild: bool = typer.Option(False, "--rebuild", help="Build even when an image with the same "
                                                                "content hash exists.")) -> None:
    """Build one image per repo; unchanged repos are reused by content hash, a broken one fails alone."""
    from rich.console import Console
    from rich.table import Table

    specs = select_specs(names, list_file)
    results = build_with_progress(specs, rebuild=rebuild)
    table = Table("repo", "result", "seconds")
    table.add_column("image", overflow="fold")
    table.add_column("log / error", overflow="fold")
    for r in results:
        state = "[red]failed[/]" if not r.ok else ("built" if r.built else "reused")
        table.add_row(r.name, state, f"{r.seconds:.1f}", r.image or "-", r.error or str(r.log_path or ""))
    console = Console()
    console.print(table)
    failed = [r.name for r in results if not r.ok]
    console.print(f"{len(results) - len(failed)}/{len(results)} repo images ready"
                  + (f"; failed: {', '.join(failed)}" if failed else "."))
    if failed:
        raise typer.Exit(1)


@repos_app.command("list")
def list_repos(list_file: Path = LIST_OPTION) -> None:
    """Show each repo's name, source, image tag and whether the image is built (nothing is built)."""
    from rich.console import Console
    from rich.table import Table

    # lazy: keeps `selfplay --help` fast
    from sandboxes.images import image_status

    table = Table("name", "source", "what")
    table.add_column("image", overflow="fold")
    table.add_column("status", no_wrap=True)
    for spec in select_specs(None, list_file):
        what = {"pypi": f"{spec.distribution}=={spec.version}"
                        + (f" (history {spec.history})" if spec.history else ""),
                "git": f"{spec.url}@{spec.commit}", "local": str(spec.path), "image": ""}[spec.source]
        tag, status = image_status(spec)
        color = {"built": "green", "missing": "yellow"}.get(status, "dim")
        table.add_row(spec.name, spec.source, what, tag or "-", f"[{color}]{status}[/]")
    Console().print(table)


def register(app: typer.Typer) -> None:
    """Add this module's commands to `app`."""
    app.add_typer(repos_app, name="repos")
