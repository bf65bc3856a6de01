"""The progress of `selfplay eval swebench`: one line per finished instance, and on a terminal one bar per run
and phase (solving, grading) below those lines, with the last instance's outcome. Elsewhere (a pipe, a CI
log) only the lines: a bar would print only its last frame there. The bars are drawn on the log handler's
console (`live_view`), so that log lines print above them."""

from __future__ import annotations

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from selfplay.cli.live_view import LiveView
from selfplay.eval.progress import VERB, EvalStep


class EvalProgressDisplay(LiveView):
    """`with EvalProgressDisplay(console) as show: evaluate(..., on_step=show)`."""

    def __init__(self, console: Console, *, live: bool | None = None, status: Console | None = None) -> None:
        super().__init__(console, live=live, status=status)
        self._progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                                  MofNCompleteColumn(), TimeElapsedColumn(),
                                  TextColumn("{task.fields[last]}", markup=False), console=self.status)
        if self.live:
            self.drawing = self._progress
        self._tasks: dict[tuple[int, str], TaskID] = {}

    def __call__(self, step: EvalStep) -> None:
        """`evaluate`'s `on_step`."""
        if not self.live:
            if step.instance_id is not None:
                self.console.print(step.line(), highlight=False, markup=False)
            return
        key = (step.run, step.phase)
        last = f"{step.instance_id}: {step.outcome}" if step.instance_id else ""
        if key not in self._tasks:
            self._tasks[key] = self._progress.add_task(f"run {step.run}: {VERB[step.phase]}", total=step.total,
                                                       last=last)
        self._progress.update(self._tasks[key], completed=step.done, last=last)
        if step.instance_id is not None:  # above the bars, so a scrollback keeps every outcome
            self._progress.console.print(step.line(), highlight=False, markup=False)

