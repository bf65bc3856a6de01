"""`selfplay repos test`: build the repos of a list and run each repo's test suite in a sandbox, with a
summary table (what `selfplay run` did before the self-play loop existed; a quick health check of the
images and the Docker engine)."""

from __future__ import annotations

import re
from pathlib import Path

import typer

from sandboxes.errors import SandboxError
from selfplay.cli.repos_cmd import LIST_OPTION, build_with_progress, repos_app, select_specs

_COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped)\b")


def pytest_counts(output: str) -> dict[str, int]:
    """Counts from pytest's final summary line ('3 failed, 10 passed, 1 error in 0.2s'); {} if none."""
    for line in reversed(output.strip().splitlines()):
        found = _COUNT.findall(line)
        if found and (" in " in line or line.startswith("=")):
            counts: dict[str, int] = {}
            for number, word in found:
                key = "errors" if word.startswith("error") else word
                counts[key] = counts.get(key, 0) + int(number)
            return counts
    return {}


def run_suites(list_file: Path = LIST_OPTION,
                names: list[str] = typer.Option(None, "--repo", "-r", help="Only these repos (repeatable)."),
                timeout: float = typer.Option(900.0, help="Seconds each suite may run.")) -> None:
    """Build the repo images (reused when unchanged) and run every repo's suite in a sandbox."""
    from rich.console import Console
    from rich.table import Table

    # lazy: keeps `selfplay --help` fast
    from sandboxes.docker import DockerSandbox

    console = Console()
    specs = select_specs(names, list_file)
    builds = {r.name: r for r in build_with_progress(specs)}
    table = Table("repo", "passed", "failed", "seconds", "result")
    table.add_column("image", overflow="fold")
    bad = 0
    for spec in specs:
        build = builds[spec.name]
        if not build.ok:
            bad += 1
            table.add_row(spec.name, "-", "-", f"{build.seconds:.1f}", "[red]build failed[/]", build.error)
            continue
        with console.status(f"running the {spec.name} suite"):
            try:
                with DockerSandbox.create(build.image, workdir=spec.workdir, run_id="selfplay-repos-test") as sb:
                    result = sb.exec(spec.test_command, timeout=timeout)
            except SandboxError as exc:  # keep the other repos going; report this one
                bad += 1
                table.add_row(spec.name, "-", "-", "-", "[red]sandbox error[/]", str(exc))
                continue
        counts = pytest_counts(result.output)
        failed = counts.get("failed", 0) + counts.get("errors", 0)
        verdict = ("[red]timed out[/]" if result.timed_out else
                   "[green]ok[/]" if result.ok else f"[red]exit {result.exit_code}[/]")
        bad += not result.ok
        table.add_row(spec.name, str(counts.get("passed", 0)), str(failed), f"{result.duration:.1f}", verdict,
                      build.image)
    console.print(table)
    console.print(f"{len(specs) - bad}/{len(specs)} repo suites passed in their sandboxes.")
    if bad:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add `test` to the `repos` group (repos_cmd owns the group; this module owns the command)."""
    repos_app.command("test")(run_suites)
