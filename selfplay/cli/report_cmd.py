"""`selfplay report RUN_DIR`: write the run's self-contained HTML report (plots and a trajectory viewer)."""

from __future__ import annotations

from pathlib import Path

import typer

from selfplay.cli.failure import print_error


def report(
    run_dir: Path = typer.Argument(..., help="A run directory, runs/<run_id>/."),
    max_episodes: int = typer.Option(200, "--max-episodes", min=0,
                                     help="Episodes the viewer embeds (the newest); the plots count all."),
    max_text_chars: int = typer.Option(4000, "--max-text-chars", min=100,
                                       help="Characters kept of each message, file or grading text."),
) -> None:
    """Write RUN_DIR/report/index.html: solve rates, injector validity, rewards, curriculum difficulty,
    episode lengths, and a trajectory viewer (open #episode=<id> to jump to one). No network needed."""
    from rich.console import Console

    # lazy: keeps `selfplay --help` fast
    from selfplay.report import EpisodeLimits, ReportError, build_report

    try:
        page = build_report(run_dir, EpisodeLimits(max_episodes=max_episodes, max_text_chars=max_text_chars))
    except ReportError as exc:
        print_error(str(exc))
        raise typer.Exit(2) from None
    size = page.stat().st_size
    Console().print(f"report written to {page} ({size / 1024:,.0f} KiB); open file://{page.resolve()}")


def register(app: typer.Typer) -> None:
    """Add this module's commands to `app`."""
    app.command("report")(report)
