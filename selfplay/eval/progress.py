"""What an evaluation tells a caller that shows its progress: one `EvalStep` when a phase of a run starts and
one per instance it finishes. A run of SWE-bench Verified is hours of episodes; the CLI draws these as a bar
(`selfplay.cli.eval_progress`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

log = logging.getLogger(__name__)
Phase = Literal["solve", "grade"]
VERB: dict[Phase, str] = {"solve": "solving", "grade": "grading"}


@dataclass(frozen=True)
class EvalStep:
    """A phase of run `run` started (`instance_id` None), or one of its instances finished."""

    run: int
    """The run (0-based; an evaluation has `EvalConfig.runs`)."""
    phase: Phase
    """solve: the solver episodes; grade: the tests on their predictions."""
    done: int
    """Instances of this phase finished so far, those a resumed evaluation found done included."""
    total: int
    """Instances in the phase."""
    instance_id: str | None = None
    """The instance just finished; None when the phase starts."""
    outcome: str = ""
    """How it finished, in words ("submitted after 12 turns (95 s)", "resolved", ...)."""

    def line(self) -> str:
        """A finished instance as one line: `run 0, solving 3/12: ID: outcome`."""
        return f"run {self.run}, {VERB[self.phase]} {self.done}/{self.total}: {self.instance_id}: {self.outcome}"


EvalProgress = Callable[[EvalStep], None]
"""`evaluate`'s `on_step`: called from the evaluation's worker threads, one call at a time."""


def episode_outcome(termination: str, turns: int, wall_s: float | None, error: str | None = None) -> str:
    """A solve step's outcome: how the episode ended, its turns and seconds, and an infrastructure error."""
    seconds = f" ({wall_s:.0f} s)" if wall_s is not None else ""
    failure = f"; infrastructure failure, retried on a re-run: {error}" if error else ""
    return f"{termination} after {turns} turns{seconds}{failure}"


def grade_outcome(report: dict[str, Any] | None, patch: str | None) -> str:
    """A grade step's outcome: resolved or not, or why there is no verdict (`patch` is the prediction's,
    None without one)."""
    if patch is None:
        return "no prediction (the episode failed; a re-run retries it)"
    if not patch.strip():
        return "empty patch: not resolved"
    if report is None:
        return "no report from the grader (infrastructure failure)"
    return "resolved" if report.get("resolved") else "not resolved"


def log_step(step: EvalStep) -> None:
    """An `on_step` for callers without a display of their own (a run's periodic evaluation): each finished
    instance as one log line."""
    if step.instance_id is not None:
        log.info("evaluation %s", step.line())
