"""`selfplay validate`, `selfplay grade` and `selfplay seed` (issue 4's CLI contract).

Exit codes: validate 0 valid / 1 invalid / 2 usage or infrastructure error; grade 0 whenever grading ran
(any reward) / 2 on a usage or infrastructure error; seed 0 when all K were produced / 1 when fewer / 2.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

REPO = typer.Option(..., "--repo", help="Repo name from the repo list (`selfplay repos list`).")
JSON = typer.Option(False, "--json", help="Print one JSON object on stdout.")
STORE = typer.Option(None, "--store", help="Also record into this task store (SQLite/PostgreSQL URL).")


def _fail(message: str) -> typer.Exit:
    from rich.console import Console

    Console(stderr=True).print(f"[red]error:[/] {message}")
    return typer.Exit(2)


def _spec(name: str):
    from repos.errors import RepoError
    from repos.listfile import get_repo

    try:
        return get_repo(name)
    except RepoError as exc:
        raise _fail(str(exc)) from None


def _pool(spec, size: int):
    from sandboxes.images import repo_image
    from sandboxes.pool import SandboxPool

    return SandboxPool(repo_image(spec), size=size, workdir=spec.workdir)


def _load(directory: Path):
    """(artifact, None) or (None, format error); exits 2 when the directory does not exist."""
    from selfplay.artifact import load_artifact
    from selfplay.errors import ArtifactError

    try:
        return load_artifact(directory), None
    except FileNotFoundError as exc:
        raise _fail(str(exc)) from None
    except ArtifactError as exc:
        return None, str(exc)


def _record(store_url: str | None, artifact, repo: str, report, origin: str, strategy: str | None = None):
    if store_url is None or artifact is None:
        return None
    from selfplay.store import open_store

    return open_store(store_url).record_validation(artifact, repo, report, origin=origin, strategy=strategy)


def _print_report(report, as_json: bool, task_id: str | None = None) -> None:
    from rich.console import Console

    if as_json:
        data = report.to_json()
        if task_id is not None:
            data["task_id"] = task_id
        typer.echo(json.dumps(data))
        return
    console = Console()
    for c in report.checks:
        console.print(f"{'[green]PASS' if c.passed else '[red]FAIL'}[/] {c.name}: {c.detail}", highlight=False)
    if report.error:
        console.print(f"[red]malformed artifact:[/] {report.error}", highlight=False)
    verdict = "[green]valid[/]" if report.valid else "[red]invalid[/]"
    console.print(f"{verdict}: {len(report.fail_to_pass)} FAIL_TO_PASS, {len(report.pass_to_pass)} PASS_TO_PASS "
                  f"({report.suite_runs} suite runs, {report.duration:.1f}s)"
                  + (f"; stored as task {task_id}" if task_id else ""))


def register(app: typer.Typer) -> None:
    """Add validate, grade and seed to `app`."""

    @app.command("validate")
    def validate_cmd(
        artifact_dir: Path = typer.Argument(..., help="Directory holding the five artifact files."),
        repo: str = REPO,
        min_passing_tests: int = typer.Option(5, "--min-passing-tests", help="Passing tests needed on the original."),
        min_changed_files: int = typer.Option(1, "--min-changed-files", help="Files bug_inject.diff must change."),
        min_failing_tests: int = typer.Option(1, "--min-failing-tests", help="Tests the bug must break."),
        parallelism: int = typer.Option(2, "--parallelism", help="Sandboxes used at once."),
        as_json: bool = JSON,
        store: str | None = STORE,
    ) -> None:
        """Run the eight consistency checks on an artifact (exit 0 valid, 1 invalid, 2 error)."""
        from selfplay.validation import ValidationConfig, ValidationReport, validate

        spec = _spec(repo)
        try:
            config = ValidationConfig(min_passing_tests=min_passing_tests, min_changed_files=min_changed_files,
                                      min_failing_tests=min_failing_tests, parallelism=parallelism)
        except ValueError as exc:
            raise _fail(str(exc)) from None
        artifact, error = _load(artifact_dir)
        if artifact is None:
            report = ValidationReport(valid=False, error=error)
        else:
            try:
                with _pool(spec, config.parallelism) as pool:
                    report = validate(artifact, spec, config, pool=pool)
            except Exception as exc:  # engine, image or sandbox failure: no verdict
                raise _fail(f"validation could not run: {exc}") from exc
        task_id = _record(store, artifact, repo, report, origin="imported")
        _print_report(report, as_json, task_id)
        raise typer.Exit(0 if report.valid else 1)

    @app.command("grade")
    def grade_cmd(
        artifact_dir: Path = typer.Argument(..., help="Directory holding the five artifact files."),
        repo: str = REPO,
        patch: Path = typer.Option(..., "--patch", help="The solver's prediction: a diff over the buggy state.",
                                   exists=False),
        as_json: bool = JSON,
    ) -> None:
        """Grade a prediction against a valid artifact (exit 0 whenever grading ran, 2 on error)."""
        from selfplay.grader import grade
        from selfplay.validation import ValidationConfig, validate

        spec = _spec(repo)
        if not patch.is_file():
            raise _fail(f"--patch {patch}: no such file")
        prediction = patch.read_bytes().decode("utf-8", "replace")
        artifact, error = _load(artifact_dir)
        if artifact is None:
            raise _fail(f"cannot grade against a malformed artifact: {error}")
        try:
            with _pool(spec, 2) as pool:
                f2p, p2p = _oracle_split(artifact_dir, artifact, spec, pool, validate, ValidationConfig())
                result = grade(artifact, prediction, f2p, p2p, spec=spec, pool=pool)
        except typer.Exit:
            raise
        except Exception as exc:
            raise _fail(f"grading could not run: {exc}") from None
        if as_json:
            typer.echo(json.dumps(result.to_json()))
        else:
            from rich.console import Console

            console = Console()
            for line in result.dropped_hunks:
                console.print(f"[yellow]dropped[/] {line}", highlight=False)
            failed = [t for t, s in result.tests.items() if s != "passed"]
            console.print(f"reward {result.reward:+d} ({'resolved' if result.resolved else 'not resolved'}; "
                          f"{len(failed)} of {len(result.tests)} tests fail)"
                          + (f": {result.error}" if result.error else ""), highlight=False)
        raise typer.Exit(0)

    @app.command("seed")
    def seed_cmd(
        repo: str = REPO,
        n: int = typer.Option(1, "-n", help="How many validated artifacts to produce."),
        out: Path = typer.Option(Path("seeds"), "--out", help="Directory receiving one folder per artifact."),
        seed: int = typer.Option(0, "--seed", help="Random seed."),
        as_json: bool = JSON,
        store: str | None = STORE,
    ) -> None:
        """Produce N validated procedural (AST-mutation) bug artifacts for a repo."""
        from selfplay.procedural.seed import SeedConfig
        from selfplay.procedural.seed import seed as run_seed

        spec = _spec(repo)
        if n < 1:
            raise _fail("-n must be at least 1")

        def record(result) -> None:
            _record(store, result.artifact, repo, result.report, origin="procedural", strategy=result.operator)

        try:
            results = run_seed(spec, n, out, config=SeedConfig(seed=seed), on_valid=record)
        except Exception as exc:
            raise _fail(f"seeding could not run: {exc}") from None
        if as_json:
            typer.echo(json.dumps({"repo": repo, "requested": n, "produced": len(results), "artifacts": [
                {"dir": str(r.directory), "operator": r.operator, "file": r.file,
                 "fail_to_pass": list(r.report.fail_to_pass)} for r in results]}))
        else:
            for r in results:
                typer.echo(f"{r.directory}  {r.operator} in {r.file}, {len(r.report.fail_to_pass)} FAIL_TO_PASS")
            typer.echo(f"{len(results)} of {n} artifacts produced for {repo}")
        raise typer.Exit(0 if len(results) == n else 1)


def _oracle_split(artifact_dir: Path, artifact, spec, pool, validate, config):
    """FAIL_TO_PASS/PASS_TO_PASS from a valid report.json next to the artifact, else by validating it."""
    cached = artifact_dir / "report.json"
    if cached.is_file():
        try:
            data = json.loads(cached.read_text())
            if data.get("valid") and data.get("fail_to_pass"):
                return tuple(data["fail_to_pass"]), tuple(data.get("pass_to_pass", ()))
        except (json.JSONDecodeError, AttributeError):
            pass
    report = validate(artifact, spec, config, pool=pool)
    if not report.valid:
        raise _fail(f"the artifact is not valid ({report.failed_check or report.error}); "
                    "grading needs a valid artifact (run `selfplay validate` for details)")
    return report.fail_to_pass, report.pass_to_pass
