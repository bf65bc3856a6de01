"""`selfplay demos`: scripted-expert demonstrations on procedural tasks, graded, stored as `demo` attempts."""

from __future__ import annotations

from pathlib import Path

import typer

from repos.listfile import get_repo

STORE_HELP = "Store URL or SQLite path (default: $SELFPLAY_STORE, else ./selfplay.db)."


def demos(
    repo: str = typer.Option(..., "--repo", help="Name in the repo list (selfplay repos list)."),
    # the counts are range-checked by typer, before the store is opened (so a bad one creates no store)
    n: int = typer.Option(8, "-n", min=1, help="Tasks to seed and demonstrate."),
    store: str | None = typer.Option(None, "--store", help=STORE_HELP),
    out: Path = typer.Option(Path("runs/demos"), "--out", help="Directory for seeds and trajectory files."),
    seed: int = typer.Option(0, "--seed", help="Seeds the procedural bugs and the expert's choices."),
    per_task: int = typer.Option(1, "--per-task", min=1, help="Demonstrations per task (each varied)."),
    max_context: int = typer.Option(2048, "--max-context", min=1, help="Token budget of one demonstration."),
    injector: bool = typer.Option(False, "--injector/--no-injector",
                                  help="Also up to -n injector demonstrations (direct strategy), one per seeded "
                                       "artifact that fits --max-context."),
    seed_cache: bool = typer.Option(True, "--seed-cache/--no-seed-cache",
                                    help="Reuse validated seeds of the same repo image and seed configs from "
                                         "<selfplay cache>/seeds (--no-seed-cache validates afresh into --out)."),
) -> None:
    """Seed procedural bugs on REPO, let the scripted expert solve each through the real tools, grade the
    final diff with the real grader and store the +1 demonstrations (attempt source "demo")."""
    from rich.console import Console

    # lazy: keeps `selfplay --help` fast
    from selfplay.demos.collect import make_demos
    from selfplay.store import open_store

    console = Console()
    spec = get_repo(repo)
    with open_store(store) as st:
        rep = make_demos(spec, n, st, out / repo, seed=seed, per_task=per_task, max_context_tokens=max_context,
                         injector=n if injector else 0, injector_max_context_tokens=max_context,
                         seed_cache=seed_cache, on_demo=lambda d: console.print(
                             f"{d.task_id}: reward {d.reward:+.0f} ({d.reason}), {len(d.trajectory.input_ids)} "
                             f"tokens, {d.wall_time:.1f} s"))
        url = st.url
    mean = sum(rep.tokens) / len(rep.tokens) if rep.tokens else 0
    console.print(f"[bold]{repo}[/]: {len(rep.kept)} demonstrations kept of {len(rep.tasks) * per_task} "
                  f"({len(rep.dropped)} dropped, {rep.skipped_long} tasks skipped as too long), mean {mean:.0f} "
                  f"tokens, {len(rep.injector_kept)} injector demonstrations, {rep.wall_time:.0f} s (seeding "
                  f"{rep.seed_time:.0f} s, {rep.seed_rounds_cached} rounds from the seed cache); stored in {url}")
    for line in rep.dropped:
        console.print(f"  dropped {line}")
    if not rep.tasks:
        console.print("[yellow]no seeded task had a spec short enough for a demonstration; raise -n (more bugs "
                      "are seeded per round), try another --seed, or raise --max-context[/]")
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("demos")(demos)
