"""The turn progress of `selfplay solve` and `selfplay episode`: lines without a terminal, a spinner on one.

The episode itself is played by the Docker tests of those commands (tests/selfplay/solve/test_solve.py
checks its turn lines); here the display is driven with the calls `run_episode` makes (`on_turn`)."""

from __future__ import annotations

import io
import logging

from rich.console import Console
from rich.logging import RichHandler

from selfplay.cli.live_view import log_console
from selfplay.cli.turn_progress import TurnProgress


def _console(terminal: bool) -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, force_terminal=terminal, width=200, color_system=None), buf


def test_without_a_terminal_each_turn_is_a_line_and_there_is_no_spinner():
    out, out_buf = _console(False)
    status, status_buf = _console(False)
    with TurnProgress(out, 5, status=status) as progress:
        assert not progress.live
        progress(1, "bash: ls [x]")  # markup in a command is printed as written
        progress(2, "submit")
    assert out_buf.getvalue().splitlines() == ["turn 1: bash: ls [x]", "turn 2: submit"]
    assert status_buf.getvalue() == ""


def test_the_spinner_names_the_turn_under_way_and_what_happens_in_it():
    out, _ = _console(False)
    progress = TurnProgress(out, 30, first="the sandbox image builds, then the model writes", live=False)
    assert progress.describe().startswith("turn 1 of 30: the sandbox image builds, then the model writes (0 s;")
    progress(3, "bash: pytest -x")
    assert progress.describe().startswith("turn 4 of 30: turn 3's tool runs, then the model writes (0 s; ")
    assert TurnProgress(out, None, live=False).describe().startswith("turn 1: the model writes (")


def test_on_a_terminal_turn_lines_and_log_lines_print_above_the_spinner_on_the_log_console():
    out, out_buf = _console(True)
    status, status_buf = _console(True)
    logger = logging.getLogger("test_turn_progress")
    handler = RichHandler(console=status, show_path=False, show_time=False)
    logger.addHandler(handler)
    try:
        with TurnProgress(out, 5, status=status) as progress:
            assert progress.live
            progress(1, "bash: ls")
            logger.warning("a log line during the episode")
            progress(2, "submit")
    finally:
        logger.removeHandler(handler)
    assert out_buf.getvalue() == ""  # nothing on stdout's console: it would draw through the spinner
    shown = status_buf.getvalue()
    assert shown.index("turn 1: bash: ls") < shown.index("a log line during the episode") < shown.index(
        "turn 2: submit")
    assert "turn 1 of 5: the model writes (0 s; 0 s in all)" in shown  # the spinner's first frame
    assert "turn 3 of 5: turn 2's tool runs, then the model writes (0 s; " in shown  # redrawn at once


def test_the_spinner_goes_to_the_cli_log_handler_console():
    status, _ = _console(True)
    handler = RichHandler(console=status)
    root = logging.getLogger()
    saved = root.handlers[:]  # a CLI test before this one left the CLI's own handler there
    root.handlers = [handler]
    try:
        assert log_console() is status
    finally:
        root.handlers = saved
