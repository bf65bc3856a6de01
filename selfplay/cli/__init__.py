"""The `selfplay` command line. Only this package sets up output (rich logging, progress bars).

Each command group lives in its own module exposing `register(app)`; modules import nothing heavy at
module level so `selfplay --help` stays fast and works without the optional extras.
"""

from __future__ import annotations

import logging

import typer

from selfplay.cli import (
    demos_cmd,
    episode_cmd,
    eval_cmd,
    failure,
    learn_cmd,
    report_cmd,
    repos_cmd,
    rft_cmd,
    run_cmd,
    sandboxes_cmd,
    serve_cmd,
    solve_cmd,
    suites_cmd,
    tasks_cmd,
    validate_cmd,
)
from selfplay.cli.third_party import route_third_party

app = typer.Typer(help="Self-play SWE-RL: train one policy to inject and to fix bugs in real repositories.",
                  no_args_is_help=True, pretty_exceptions_enable=False)


_debug = False
"""Set by --debug/-v: an exception keeps its traceback (see `failure`)."""


@app.callback()
def _configure(verbose: bool = typer.Option(False, "--verbose", "-v", help="Debug logging (and tracebacks)."),
               debug: bool = typer.Option(False, "--debug", help="Show the traceback of an error.")) -> None:
    from rich.console import Console
    from rich.logging import RichHandler

    global _debug
    _debug = verbose or debug
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, format="%(message)s",
                        handlers=[RichHandler(console=Console(stderr=True), show_path=False,
                                              rich_tracebacks=True)], force=True)
    route_third_party(verbose)


for _module in (sandboxes_cmd, repos_cmd, validate_cmd, tasks_cmd, serve_cmd, episode_cmd, learn_cmd, run_cmd,
                eval_cmd, solve_cmd, demos_cmd, rft_cmd, report_cmd, suites_cmd):
    _module.register(app)


def main() -> None:
    """The `selfplay` entry point: a project error ends as one `error:` line and exit 2, not a traceback
    (`failure`); --debug keeps tracebacks. A SIGTERM or Ctrl-C removes the sandboxes the command created,
    including those its worker threads created (they cannot install the handler themselves)."""
    from sandboxes.reaper import registry

    registry.install_signal_cleanup()
    try:
        app()
    except (Exception, KeyboardInterrupt) as exc:
        if _debug:
            raise
        failure.fail(exc)
