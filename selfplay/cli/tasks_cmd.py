"""`selfplay tasks ...`: look into the curriculum store, and export/import it as SWE-bench jsonl."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import typer

from selfplay.store import ImportFormatError, TaskNotFound
from selfplay.store.export import FORMATS, export_swebench, import_swebench, parse_export
from selfplay.store.records import STATUSES

STORE_HELP = "Store URL or SQLite path (default: $SELFPLAY_STORE, else ./selfplay.db)."
tasks_app = typer.Typer(help="Inspect, export and import the curriculum store.", no_args_is_help=True)


def _open(url: str | None, *, create: bool = False):
    """The store to read (a missing SQLite file is an error, never made empty), or with `create` to write."""
    from selfplay.store import open_store  # lazy: SQLAlchemy, off `selfplay --help`

    return open_store(url, create=create)


def _check_status(status: str | None) -> None:
    if status is not None and status not in STATUSES:
        raise typer.BadParameter(
            f"unknown status {status!r}; use one of {', '.join(STATUSES)}", param_hint="--status"
        )


def _rate(solves: int, attempts: int) -> str:
    return f"{solves / attempts:.2f}" if attempts else "-"


@tasks_app.command("list")
def list_tasks(
    status: str = typer.Option(None, "--status", help="active, retired or invalid."),
    repo: str = typer.Option(None, "--repo", help="Only this repo."),
    limit: int = typer.Option(200, "--limit", min=1, help="At most this many rows (1 or more)."),
    store: str = typer.Option(None, "--store", help=STORE_HELP),
) -> None:
    """One row per task: origin, order, status, attempts and solve rates."""
    from rich.console import Console
    from rich.table import Table

    _check_status(status)
    with _open(store) as st:
        rows = st.task_stats(status=status, repo=repo, limit=limit)
    table = Table(title=f"tasks ({len(rows)} shown)")
    # Ids are what users copy into `tasks show`: never truncate them.
    table.add_column("task", no_wrap=True, min_width=max((len(s.task_id) for s in rows), default=4))
    for col in ("repo", "origin", "order", "status", "attempts", "solve rate", "recent rate"):
        table.add_column(
            col, justify="right" if col in ("order", "attempts", "solve rate", "recent rate") else "left"
        )
    for s in rows:
        recent = s.recent_rate
        table.add_row(
            s.task_id,
            s.repo,
            s.origin,
            str(s.order),
            s.status,
            str(s.attempts),
            _rate(s.solves, s.attempts),
            "-" if recent is None else f"{recent:.2f}",
        )
    Console().print(table)


@tasks_app.command("show")
def show(task_id: str, store: str = typer.Option(None, "--store", help=STORE_HELP)) -> None:
    """One task: its tests, statistics, validation checks and the bug diff."""
    from rich.console import Console
    from rich.syntax import Syntax
    from rich.table import Table

    with _open(store) as st:
        try:
            task = st.get_task(task_id)
        except TaskNotFound as exc:
            raise typer.BadParameter(str(exc), param_hint="TASK_ID") from exc
        (stats,) = st.task_stats([task_id])
        record = st.get_artifact(task.metadata["artifact_id"])
        attempts = st.attempts(task_id=task_id, limit=20)
    console = Console()
    info = Table(title=task.task_id, show_header=False)
    for key, value in (
        ("repo", task.repo),
        ("status", stats.status + (f" ({task.metadata['retired_reason']})"
                                   if task.metadata.get("retired_reason") else "")),
        ("origin", task.origin),
        ("order", task.order),
        ("parent", task.parent_id or "-"),
        ("strategy", record.strategy or "-"),
        ("artifact", record.artifact_id),
        ("attempts", stats.attempts),
        ("solves", stats.solves),
        ("recent", stats.recent or "-"),
        ("FAIL_TO_PASS", "\n".join(task.fail_to_pass)),
        ("PASS_TO_PASS", len(task.pass_to_pass)),
    ):
        info.add_row(key, str(value))
    console.print(info)
    checks = Table(title="validation checks")
    for col in ("check", "passed", "detail"):
        checks.add_column(col)
    for c in record.checks:
        checks.add_row(c.name, "yes" if c.passed else "NO", c.detail)
    console.print(checks)
    if attempts:
        att = Table(title="attempts (first 20)")
        for col in ("id", "role", "policy", "reward", "turns", "tokens", "termination"):
            att.add_column(col)
        for a in attempts:
            att.add_row(
                str(a.id),
                a.role,
                str(a.policy_version),
                f"{a.reward:g}",
                str(a.turns),
                str(a.tokens),
                a.termination,
            )
        console.print(att)
    console.print(Syntax(task.artifact.bug_inject, "diff", theme="ansi_dark"))


def _bucket(attempts: int, solves: int) -> str:
    if not attempts:
        return "unseen"
    rate = solves / attempts
    if rate == 0:
        return "0"
    if rate == 1:
        return "1"
    low = min(int(rate * 5), 4) / 5
    return f"({low:.1f}, {low + 0.2:.1f}]" if low else "(0, 0.2]"


@tasks_app.command("stats")
def stats(store: str = typer.Option(None, "--store", help=STORE_HELP)) -> None:
    """Task counts by origin, order, status and solve-rate bucket."""
    from rich.console import Console
    from rich.table import Table

    with _open(store) as st:
        rows = st.task_stats()
    console = Console()
    for title, key in (
        ("origin", lambda s: s.origin),
        ("order", lambda s: str(s.order)),
        ("status", lambda s: s.status),
        ("solve rate", lambda s: _bucket(s.attempts, s.solves)),
    ):
        counts = Counter(key(s) for s in rows)
        table = Table(title=f"tasks by {title}")
        table.add_column(title)
        table.add_column("tasks", justify="right")
        for value, count in sorted(counts.items()):
            table.add_row(value, str(count))
        console.print(table)
    console.print(f"{len(rows)} tasks, {sum(s.attempts for s in rows)} solver attempts")


@tasks_app.command("export")
def export(
    out: Path = typer.Argument(..., help="Output .jsonl file."),
    fmt: str = typer.Option("swebench", "--format", help="Only 'swebench'."),
    status: str = typer.Option(None, "--status", help="Only tasks with this status."),
    repo: str = typer.Option(None, "--repo", help="Only this repo."),
    store: str = typer.Option(None, "--store", help=STORE_HELP),
) -> None:
    """Write tasks as SWE-bench instances (one JSON object a line)."""
    from rich.console import Console

    if fmt not in FORMATS:
        raise typer.BadParameter(
            f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}", param_hint="--format"
        )
    _check_status(status)
    with _open(store) as st:
        count = export_swebench(st, out, status=status, repo=repo)
    # An empty selection writes an empty file only where there was none (export_swebench refuses to
    # replace one); say so, since an empty file is rarely what was wanted.
    Console().print(f"wrote {count} tasks to {out}" + ("" if count else " (no stored task matches the selection)"))


@tasks_app.command("import")
def import_(
    path: Path = typer.Argument(..., exists=True, dir_okay=False, help="A `tasks export` .jsonl file."),
    store: str = typer.Option(None, "--store", help=STORE_HELP),
) -> None:
    """Read a SWE-bench jsonl export into the store (tasks already there are kept as they are).

    Every entry passes validation's format check and a higher-order entry's failed prediction must pass the
    test-infrastructure filter untouched; one bad entry rejects the whole file (nothing is written)."""
    from rich.console import Console

    try:  # all-or-nothing per file: every entry is checked before the store is even opened
        if not parse_export(path):
            # Most likely a truncated copy or the wrong file; an error, not "imported 0", and no store made.
            raise ImportFormatError(f"{path} holds no tasks (it is empty or blank lines only)")
        with _open(store, create=True) as st:
            summary = import_swebench(st, path)
    except ImportFormatError as exc:
        raise typer.BadParameter(f"{exc}; nothing from {path} was imported", param_hint="PATH") from exc
    Console().print(f"imported {summary.added} new tasks ({summary.existing} already stored) from {path}")


def register(app: typer.Typer) -> None:
    """Add this module's commands to `app`."""
    app.add_typer(tasks_app, name="tasks")
