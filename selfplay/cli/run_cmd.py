"""`selfplay run`: the main job, one self-play run (docs/config.md for configs, presets and overrides).

    selfplay run                                   # the embedded CPU default
    selfplay run --config smoke learner.engine.lr=3e-6 'repos=[toolz, parse]'
    selfplay run --resume runs/default-20261123-103000 iterations=4
    selfplay run --config gpu-1node --print-config   # the resolved tree, nothing starts

Exit codes: 0 finished, 1 failed, 2 bad config or arguments (nothing started), 130 interrupted (the run
is resumable; the command to resume is printed). The old suite check is `selfplay repos test`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from selfplay.cli.suites_cmd import pytest_counts  # noqa: F401 - re-exported: tests import it from here

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def _read_summary(run_dir: Path | None) -> dict[str, Any]:
    try:
        return json.loads((run_dir / "summary.json").read_text()) if run_dir else {}
    except (OSError, ValueError):
        return {}


def run(overrides: list[str] = typer.Argument(None, metavar="[KEY=VALUE]...",
                                              help="Dotted overrides, YAML-typed: learner.engine.lr=3e-6 "
                                                   "'repos=\\[toolz, parse]' policy.model_dir=null."),
        config: str = typer.Option(None, "--config", "-c", metavar="NAME|FILE.yaml",
                                   help="A preset (default, smoke, gpu-1node, multi-node) or a YAML file; "
                                        "default: default."),
        resume: Path = typer.Option(None, "--resume", metavar="RUN_DIR",
                                    help="Continue runs/<run_id> from its saved config, last checkpoint and "
                                         "store (only iterations, max_hours and a few other safe keys may "
                                         "be overridden)."),
        print_config: bool = typer.Option(False, "--print-config",
                                          help="Print the resolved config as YAML and exit (nothing starts).")
        ) -> None:
    """Run self-play: inject bugs, validate them, solve them, grade, learn; repeat."""
    from rich.console import Console
    from rich.text import Text

    from selfplay.cli.run_display import RunDisplay, headline, summary_table
    from selfplay.errors import SelfPlayError
    from selfplay.orchestration.config_loader import ConfigError, load_config, load_resume_config

    console, err = Console(), Console(stderr=True)
    overrides = list(overrides or [])
    try:
        if resume is not None and config is not None:
            raise ConfigError("--resume takes the run's saved config.yaml; drop --config (or start a new run "
                              "without --resume)")
        run_config = load_resume_config(resume, overrides) if resume else load_config(config, overrides)
    except ConfigError as exc:
        err.print(Text.assemble(("config error: ", "red"), str(exc)), highlight=False)
        raise typer.Exit(EXIT_USAGE) from None
    if print_config:
        from selfplay.orchestration.config_loader import dump_config

        typer.echo(dump_config(run_config), nl=False)
        return
    try:
        from selfplay.orchestration.loop import run_selfplay
    except ImportError as exc:  # the loop needs the `learn` extra's torch only when the learner is on
        err.print(Text.assemble(("cannot start the run: ", "red"), str(exc)), highlight=False)
        raise typer.Exit(EXIT_FAILED) from None

    display = RunDisplay(console, run_config)
    run_dir: Path | None = Path(resume) if resume else None
    try:
        with display:
            run_dir = run_selfplay(run_config, resume=Path(resume) if resume else None, observer=display)
    except KeyboardInterrupt:
        run_dir = run_dir or _known_dir(display)
        summary = _read_summary(run_dir) or display.summary
        if summary:
            console.print(summary_table({**summary, "status": "interrupted"}))
        where = str(run_dir) if run_dir else f"{run_config.runs_dir}/<run_id>"
        err.print(Text.assemble(("interrupted. ", "yellow"), f"Resume with: selfplay run --resume {where}"),
                  highlight=False, soft_wrap=True)  # one line, so it can be copied
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except SelfPlayError as exc:
        run_dir = run_dir or _known_dir(display)
        summary = _read_summary(run_dir) or display.summary
        if summary:
            console.print(summary_table({**summary, "status": "failed", "error": str(exc)}))
        err.print(Text.assemble(("run failed: ", "red"), str(exc)), highlight=False)
        if run_dir:
            err.print(f"run directory: {run_dir} (logs/run.log has the details)", highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_FAILED) from None
    except Exception:  # a bug, not a run failure: keep the traceback, but say where the run's files are
        run_dir = run_dir or _known_dir(display)
        if run_dir:
            err.print(f"run directory: {run_dir} (logs/run.log has the details)", highlight=False, soft_wrap=True)
        raise
    summary = _read_summary(run_dir) or display.summary
    console.print(summary_table(summary))
    console.print(headline(summary), highlight=False)
    console.print(f"run directory: {run_dir}", highlight=False, soft_wrap=True)
    if summary.get("status") != "finished":
        raise typer.Exit(EXIT_FAILED)


def _known_dir(display: Any) -> Path | None:
    return Path(display.run_dir) if display.run_dir else None


def register(app: typer.Typer) -> None:
    """Add this module's commands to `app`."""
    app.command("run")(run)
