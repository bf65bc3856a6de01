"""The progress of `selfplay eval swebench`: one bar per run and phase (solving, grading) with the last
instance's outcome on a terminal, one line per finished instance elsewhere (a pipe, a CI log), where a bar
would print only its last frame. The bar is drawn on the log handler's console (`log_console`), so that log
lines print above it."""

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

from selfplay.cli.log_console import log_console
from selfplay.eval.progress import VERB, EvalStep


class EvalProgressDisplay:
    """`with EvalProgressDisplay(console) as show: evaluate(..., on_step=show)`."""

    def __init__(self, console: Console, *, live: bool | None = None, status: Console | None = None) -> None:
        self.console = console
        """Where the lines go when there is no bar."""
        bar_console = status or log_console()
        use_live = (console.is_terminal and bar_console.is_terminal) if live is None else live
        self._progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                                  MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("{task.fields[last]}", markup=False),
                                  console=bar_console) if use_live else None
        self._tasks: dict[tuple[int, str], TaskID] = {}

    @property
    def live(self) -> bool:
        """Whether bars are drawn."""
        return self._progress is not None

    def __enter__(self) -> EvalProgressDisplay:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def __call__(self, step: EvalStep) -> None:
        """`evaluate`'s `on_step`."""
        if self._progress is None:
            if step.instance_id is not None:
                self.console.print(step.line(), highlight=False, markup=False)
            return
        key = (step.run, step.phase)
        last = f"{step.instance_id}: {step.outcome}" if step.instance_id else ""
        if key not in self._tasks:
            self._tasks[key] = self._progress.add_task(f"run {step.run}: {VERB[step.phase]}", total=step.total,
                                                       last=last)
        self._progress.update(self._tasks[key], completed=step.done, last=last)

