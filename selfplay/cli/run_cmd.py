"""`selfplay run`: the main job, one self-play run (docs/config.md for configs, presets and overrides).

    selfplay run                                   # the embedded CPU default
    selfplay run --config smoke learner.engine.lr=3e-6 'repos=[toolz, parse]'
    selfplay run --resume runs/default-20261123-103000 iterations=4
    selfplay run --config gpu-1node --print-config   # the resolved tree, nothing starts

Exit codes: 0 finished, 1 failed, 2 bad config or arguments (nothing started), 130 interrupted (the run
is resumable; the command to resume is printed). Each repo's test suite alone: `selfplay repos test`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from selfplay.config.loader import ConfigError, dump_config, load_config, load_resume_config
from selfplay.config.refs import check_references
from selfplay.errors import SelfPlayError

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

    # lazy: keeps `selfplay --help` fast
    from selfplay.cli.run_display import RunDisplay
    from selfplay.orchestration.resume import check_resumable

    console, err = Console(), Console(stderr=True)
    try:
        run_config = _resolve(config, resume, list(overrides or []))
        check_references(run_config)  # repos, repo list, store URL, model paths: before anything is made
        if resume is not None:  # state.json, the store and the checkpoint, before anything is written
            check_resumable(resume, run_config)
    except ConfigError as exc:
        err.print(Text.assemble(("config error: ", "red"), str(exc)), highlight=False)
        raise typer.Exit(EXIT_USAGE) from None
    if print_config:
        typer.echo(dump_config(run_config), nl=False)
        return
    try:
        from selfplay.orchestration.loop import run_selfplay
    except ImportError as exc:  # an optional extra the loop needs is missing; the message names it
        err.print(Text.assemble(("cannot start the run: ", "red"), str(exc)), highlight=False)
        raise typer.Exit(EXIT_FAILED) from None

    display = RunDisplay(console, run_config)
    run_dir: Path | None = Path(resume) if resume else None
    try:
        with display:
            run_dir = run_selfplay(run_config, resume=run_dir, observer=display)
    except KeyboardInterrupt:
        run_dir = _close(console, err, display, run_dir, status="interrupted")
        where = str(run_dir) if run_dir else f"{run_config.runs_dir}/<run_id>"
        err.print(Text.assemble(("interrupted. ", "yellow"), f"Resume with: selfplay run --resume {where}"),
                  highlight=False, soft_wrap=True)  # one line, so it can be copied
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except SelfPlayError as exc:
        _close(console, err, display, run_dir, status="failed", error=str(exc))
        raise typer.Exit(EXIT_FAILED) from None
    except Exception:  # a bug, not a run failure: keep the traceback, but say where the run's files are
        _close(console, err, display, run_dir, status="failed", table=False)
        raise
    run_dir = _close(console, err, display, run_dir)
    if (_read_summary(run_dir) or display.summary).get("status") != "finished":
        raise typer.Exit(EXIT_FAILED)


def _resolve(config: str | None, resume: Path | None, overrides: list[str]) -> Any:
    """The run config: a preset or file with overrides, or a resumed run's saved config."""
    if resume is not None and config is not None:
        raise ConfigError("--resume takes the run's saved config.yaml; drop --config (or start a new run "
                          "without --resume)")
    return load_resume_config(resume, overrides) if resume is not None else load_config(config, overrides)


def _close(console: Any, err: Any, display: Any, run_dir: Path | None, *, status: str | None = None,
           error: str | None = None, table: bool = True) -> Path | None:
    """Print the closing table (summary.json, else the last event's summary) and where the run lives;
    `status`/`error` replace the summary's when the run ended by an exception. Returns the run dir."""
    from rich.text import Text

    # lazy: keeps `selfplay --help` fast
    from selfplay.cli.run_display import headline, summary_table

    run_dir = run_dir or (Path(display.run_dir) if display.run_dir else None)
    summary = _read_summary(run_dir) or dict(display.summary)
    if status is not None:
        summary.update({"status": status, **({"error": error} if error else {})})
    if table and summary:
        console.print(summary_table(summary))
        if status is None:
            console.print(headline(summary), highlight=False)
    if error:
        err.print(Text.assemble(("run failed: ", "red"), error), highlight=False)
    if run_dir:
        detail = " (logs/run.log has the details)" if status == "failed" else ""
        (err if status else console).print(f"run directory: {run_dir}{detail}", highlight=False, soft_wrap=True)
    return run_dir


def register(app: typer.Typer) -> None:
    """Add this module's commands to `app`."""
    # unknown options (`--repos`) reach the overrides, whose error says how to write them
    app.command("run", context_settings={"ignore_unknown_options": True})(run)
