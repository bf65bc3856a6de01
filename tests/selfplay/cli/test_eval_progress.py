"""The progress of `selfplay eval swebench`: the steps' words, lines without a terminal, bars on one.

`evaluate` itself emits the steps in the Docker tests of tests/selfplay/eval/test_offline_eval.py (both
graders, and a resume that solves nothing again)."""

from __future__ import annotations

import io
import logging
import re

from rich.console import Console

from selfplay.cli.eval_progress import EvalProgressDisplay
from selfplay.eval.progress import EvalStep, episode_outcome, grade_outcome, log_step


def _console(terminal: bool) -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, force_terminal=terminal, width=300, color_system=None), buf


def test_outcomes_say_how_an_instance_ended():
    assert episode_outcome("submitted", 12, 95.4) == "submitted after 12 turns (95 s)"
    assert episode_outcome("sandbox_error", 3, None, "DockerError: gone") == (
        "sandbox_error after 3 turns; infrastructure failure, retried on a re-run: DockerError: gone")
    assert grade_outcome({"resolved": True}, "diff --git a/x b/x\n") == "resolved"
    assert grade_outcome({"resolved": False}, "diff --git a/x b/x\n") == "not resolved"
    assert grade_outcome(None, "  \n") == "empty patch: not resolved"
    assert grade_outcome(None, "diff --git a/x b/x\n") == "no report from the grader (infrastructure failure)"
    assert grade_outcome(None, None).startswith("no prediction (the episode failed")


def test_without_a_terminal_each_finished_instance_is_a_line():
    out, buf = _console(False)
    bars, bars_buf = _console(False)
    with EvalProgressDisplay(out, status=bars) as show:
        assert not show.live
        show(EvalStep(0, "solve", 1, 3))  # a resumed run's start: no line
        show(EvalStep(0, "solve", 2, 3, "a__b-1", "submitted after 4 turns (9 s)"))
        show(EvalStep(0, "grade", 1, 3, "a__b-[1]", "resolved"))  # brackets are not markup
    assert buf.getvalue().splitlines() == ["run 0, solving 2/3: a__b-1: submitted after 4 turns (9 s)",
                                           "run 0, grading 1/3: a__b-[1]: resolved"]
    assert bars_buf.getvalue() == ""
    assert EvalStep(1, "grade", 3, 3, "x", "not resolved").line() == "run 1, grading 3/3: x: not resolved"


def test_a_run_s_periodic_evaluation_logs_each_finished_instance(caplog):
    with caplog.at_level(logging.INFO, logger="selfplay.eval.progress"):
        log_step(EvalStep(0, "solve", 0, 2))
        log_step(EvalStep(0, "solve", 1, 2, "a__b-1", "submitted after 4 turns (9 s)"))
    assert caplog.messages == ["evaluation run 0, solving 1/2: a__b-1: submitted after 4 turns (9 s)"]


def test_on_a_terminal_each_run_and_phase_is_a_bar_below_each_finished_instance_s_line():
    out, buf = _console(True)
    bars, bars_buf = _console(True)
    with EvalProgressDisplay(out, status=bars) as show:
        assert show.live
        show(EvalStep(0, "solve", 0, 2))
        show(EvalStep(0, "solve", 1, 2, "a__b-1", "submitted after 4 turns (9 s)"))
        show(EvalStep(0, "grade", 0, 2))
        show(EvalStep(0, "grade", 2, 2, "a__b-[2]", "resolved"))
    assert buf.getvalue() == ""  # drawn on the log console only
    final = bars_buf.getvalue()
    assert "run 0: solving" in final and "1/2" in final and "a__b-1: submitted after 4 turns (9 s)" in final
    assert "run 0: grading" in final and "2/2" in final and "a__b-[2]: resolved" in final
    # every outcome stays in the scrollback, not only the bar's last one
    lines = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", final).splitlines()  # the terminal's control codes out
    assert "run 0, solving 1/2: a__b-1: submitted after 4 turns (9 s)" in lines
    assert "run 0, grading 2/2: a__b-[2]: resolved" in lines
