"""The live view of `selfplay run`: a `RunObserver` that shows the iteration, the phase, the counts of
summary.json and the latest episodes while the loop runs, and the closing table that says plainly how
many bugs were valid, how many tasks were solved and how many updates ran.

On a terminal the view is a rich `Live` panel; elsewhere (CI logs, pipes) each event is one printed line,
because a Live display only prints its last frame when the output is not a terminal.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Mapping
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from selfplay.config.run_config import RunConfig
from selfplay.orchestration.ledger import EVENTS_LOGGER, RunEvent

COUNTS = (("injector_episodes", "injector episodes"), ("valid_artifacts", "valid bugs"),
          ("solver_attempts", "solver attempts"), ("solved", "solved attempts"),
          ("learner_updates", "learner updates"), ("policy_version", "policy version"),
          ("tasks_in_store", "tasks in store"), ("infra_failures", "infra failures"))
"""summary.json keys shown, with their labels."""
OPTIONAL_COUNTS = (("seeded_tasks", "procedural seed tasks"), ("demonstrated_tasks", "demonstrated tasks (warm start)"),
                   ("higher_order_tasks", "higher-order tasks"),
                   ("skipped_batches", "updates skipped (empty batch)"),
                   ("staleness_dropped", "stale rollouts dropped"),
                   ("unreadable_tasks", "tasks retired unplayed (spec too long)"))
"""Shown in the closing table when the loop reports them and they are not 0."""


def _num(summary: Mapping[str, Any], key: str) -> int:
    value = summary.get(key, 0)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def headline(summary: Mapping[str, Any]) -> str:
    """One plain sentence of what the run did."""
    valid, injected = _num(summary, "valid_artifacts"), _num(summary, "injector_episodes")
    solved, attempts = _num(summary, "solved"), _num(summary, "solver_attempts")
    updates = _num(summary, "learner_updates")
    infra = _num(summary, "infra_failures")
    excluded = f" {infra} episode(s) lost to infrastructure failures were not trained on." if infra else ""
    budget = (" The time budget (max_hours) ended it: one more iteration, as slow as the slowest, would have "
              "ended past it." if summary.get("stopped_by") == "max_hours" else "")
    return (f"{_num(summary, 'iterations')} iteration(s): {valid} of {injected} injected bugs were valid, "
            f"{solved} of {attempts} solver attempts solved their task, {updates} learner update(s) ran "
            f"(policy version {_num(summary, 'policy_version')}).{excluded}{budget}")


def summary_table(summary: Mapping[str, Any]) -> Table:
    """The closing table: status, counts and wall time of summary.json."""
    status = str(summary.get("status", "unknown"))
    colour = {"finished": "green", "failed": "red", "running": "yellow", "interrupted": "yellow"}.get(status, "white")
    table = Table(title=f"run {summary.get('run_id', '?')}", show_header=False)
    table.add_column("", style="bold")
    table.add_column("", justify="right")
    table.add_row("status", f"[{colour}]{status}[/]")
    for key, label in COUNTS:
        table.add_row(label, str(_num(summary, key)))
    for key, label in OPTIONAL_COUNTS:
        if _num(summary, key):
            table.add_row(label, str(_num(summary, key)))
    wall = summary.get("wall_s")
    if isinstance(wall, (int, float)):
        table.add_row("wall time", f"{wall / 60:.1f} min")
    if summary.get("error"):
        table.add_row("error", Text(str(summary["error"]), style="red"))
    return table


def _without_events(record: logging.LogRecord) -> bool:
    return record.name != EVENTS_LOGGER


class RunDisplay:
    """A RunObserver: `with RunDisplay(console, config) as display: run_selfplay(..., observer=display)`."""

    def __init__(self, console: Console, config: RunConfig, *, live: bool | None = None, recent: int = 8) -> None:
        self.console = console
        self.config = config
        self.summary: dict[str, Any] = {}
        self.phase = "starting"
        self.episodes: deque[str] = deque(maxlen=recent)
        self.started = time.monotonic()
        self._lock = threading.Lock()  # events may come from worker threads; rendering runs in Live's thread
        use_live = console.is_terminal if live is None else live
        self._live = Live(get_renderable=self._render, console=console, refresh_per_second=4,
                          transient=True) if use_live else None

    def __enter__(self) -> RunDisplay:
        # The display shows the loop's events itself; the console log would print each one a second time.
        for handler in logging.getLogger().handlers:
            handler.addFilter(_without_events)
        if self._live is not None:
            self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.stop()
        for handler in logging.getLogger().handlers:
            handler.removeFilter(_without_events)

    @property
    def run_id(self) -> str | None:
        """The run id once the loop has reported it (None before the first event)."""
        run_id = self.summary.get("run_id")
        return str(run_id) if run_id else None

    @property
    def run_dir(self) -> str | None:
        """The run directory: summary's run_dir, else runs_dir/run_id (None before the first event)."""
        if self.summary.get("run_dir"):
            return str(self.summary["run_dir"])
        return f"{self.config.runs_dir}/{self.run_id}" if self.run_id else None

    def on_event(self, event: RunEvent) -> None:
        """RunObserver: remember the event; print it as a line when there is no live panel."""
        with self._lock:
            first = self.run_id is None
            if isinstance(event.summary, Mapping) and event.summary:
                self.summary = dict(event.summary)
            announce = first and self.run_id is not None
            if event.kind == "phase":
                self.phase = event.message
            elif event.kind == "episode":
                self.episodes.append(event.message)
        if announce:
            self.console.print(f"run directory: {self.run_dir}", highlight=False, soft_wrap=True)
        if self._live is None:
            style = {"iteration": "bold", "learner": "cyan", "checkpoint": "cyan", "done": "bold green"}
            # Text, not markup: messages carry repo output and model-written text with brackets.
            self.console.print(Text.assemble((f"it {event.iteration} ", "dim"), (f"{event.kind}: ", "dim"),
                                             (str(event.message), style.get(event.kind, ""))), highlight=False)

    def _render(self) -> Panel:
        with self._lock:
            total = self.config.iterations or "∞"
            done = _num(self.summary, "iterations")  # completed ones; the loop numbers from 0
            current = done + 1 if self.summary.get("status", "running") == "running" else done
            if self.config.iterations:
                current = min(current, self.config.iterations)
            elapsed = (time.monotonic() - self.started) / 60
            head = Text.assemble(("iteration ", "dim"), (f"{current}/{total}", "bold"),
                                 ("   phase ", "dim"), (self.phase, "bold cyan"),
                                 ("   elapsed ", "dim"), f"{elapsed:.1f} min")
            counts = Table.grid(padding=(0, 2))
            for _ in range(4):
                counts.add_column(justify="right", style="dim")
                counts.add_column(justify="left")
            cells = [(label, str(_num(self.summary, key))) for key, label in COUNTS]
            for row in (cells[:4], cells[4:]):
                counts.add_row(*[part for cell in row for part in cell])
            recent = Text("\n".join(self.episodes) or "no episode finished yet", style="dim")
            title = f"selfplay run {self.run_id or self.config.name}"
        return Panel(Group(head, counts, Text("latest episodes", style="bold"), recent), title=title)
