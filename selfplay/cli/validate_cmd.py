"""`selfplay validate`, `selfplay grade` and `selfplay seed`.

Exit codes: validate 0 valid / 1 invalid / 2 usage or infrastructure error; grade 0 whenever grading ran
(any reward) / 2 on a usage or infrastructure error (1 is never used); seed 0 when all K were produced /
1 when fewer / 2.

Trust (docs/security.md, class 8): `grade` takes FAIL_TO_PASS/PASS_TO_PASS only from a validation it runs
itself or from the store's record of exactly this artifact, never from a file beside the artifact.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from repos.errors import RepoError
from repos.listfile import get_repo
from selfplay.artifact import load_artifact
from selfplay.cli.config_options import config_options
from selfplay.cli.failure import print_error
from selfplay.diffs.headers import split_sections
from selfplay.errors import ArtifactError
from selfplay.judge.grader import grade
from selfplay.validation import ValidationConfig, ValidationReport, validate

REPO = typer.Option(..., "--repo", help="Repo name from the repo list (`selfplay repos list`).")
JSON = typer.Option(False, "--json", help="Print one JSON object on stdout.")
NOT_A_DIFF = "prediction is not a unified diff"
"""The grade's error for a prediction with text but no `diff --git` or `---`/`+++` file section."""
STORE = typer.Option(None, "--store", help="Also record into this task store (SQLite/PostgreSQL URL).")


def _fail(message: str) -> typer.Exit:
    print_error(message)
    return typer.Exit(2)


def _spec(name: str):
    try:
        return get_repo(name)
    except RepoError as exc:
        raise _fail(str(exc)) from None


def _pool(spec, size: int):
    # lazy: keeps `selfplay --help` fast
    from sandboxes.images import repo_image
    from sandboxes.pool import SandboxPool

    return SandboxPool(repo_image(spec), size=size, workdir=spec.workdir)


def _load(directory: Path):
    """(artifact, None) or (None, format error); exits 2 when the directory does not exist."""
    try:
        return load_artifact(directory), None
    except FileNotFoundError as exc:
        raise _fail(str(exc)) from None
    except ArtifactError as exc:
        return None, str(exc)


def _open_store(store_url: str | None):
    """The store a command records into, opened before any suite runs: a store that cannot be opened must not
    cost the minutes of validation first (StoreError, exit 2)."""
    if store_url is None:
        return None
    from selfplay.store import open_store  # lazy: SQLAlchemy, off `selfplay --help`

    return open_store(store_url)


def _record(store, artifact, repo: str, report, origin: str, strategy: str | None = None):
    """Record a verdict; a store that fails on the write (a corrupt page, a full disk) is exit 2, naming it."""
    if store is None or artifact is None:
        return None
    from sqlalchemy.exc import DBAPIError

    from selfplay.store.engine import store_name
    from selfplay.store.errors import StoreError

    try:
        return store.record_validation(artifact, repo, report, origin=origin, strategy=strategy)
    except StoreError as exc:  # the store names a damaged, locked or foreign file itself
        raise _fail(f"the verdict was not recorded: {exc}") from exc
    except DBAPIError as exc:  # the database refused the write; SQLAlchemy's text repeats the whole statement
        raise _fail(f"--store {store_name(store.engine)}: the verdict was not recorded ({str(exc.orig).strip()}); "
                    "the store may be damaged or its disk full: repair it or pass another --store") from exc


def _print_report(report, as_json: bool, task_id: str | None = None) -> None:
    from rich.console import Console
    from rich.markup import escape

    if as_json:
        data = report.to_json()
        if task_id is not None:
            data["task_id"] = task_id
        typer.echo(json.dumps(data))
        return
    console = Console()
    for c in report.checks:
        console.print(f"{'[green]PASS' if c.passed else '[red]FAIL'}[/] {c.name}: {escape(c.detail)}", highlight=False)
    if report.error:
        console.print(f"[red]malformed artifact:[/] {escape(report.error)}", highlight=False)
    verdict = "[green]valid[/]" if report.valid else "[red]invalid[/]"
    console.print(f"{verdict}: {len(report.fail_to_pass)} FAIL_TO_PASS, {len(report.pass_to_pass)} PASS_TO_PASS "
                  f"({report.suite_runs} suite runs, {report.duration:.1f}s)"
                  + (f"; stored as task {task_id}" if task_id else ""))


@config_options(ValidationConfig, exclude=("tamper", "bug_screen"))
def validate_cmd(
    artifact_dir: Path = typer.Argument(..., help="Directory holding the five artifact files."),
    repo: str = REPO,
    as_json: bool = JSON,
    store: str | None = STORE,
    *,
    config: ValidationConfig,
) -> None:
    """Run the eight consistency checks on an artifact (exit 0 valid, 1 invalid, 2 error)."""
    spec = _spec(repo)
    artifact, error = _load(artifact_dir)
    recorder = _open_store(store)
    if artifact is None:
        report = ValidationReport(valid=False, error=error)
    else:
        try:
            with _pool(spec, config.parallelism) as pool:
                report = validate(artifact, spec, config, pool=pool)
        except Exception as exc:  # engine, image or sandbox failure: no verdict
            raise _fail(f"validation could not run: {exc}") from exc
    try:
        task_id = _record(recorder, artifact, repo, report, origin="imported")
    except typer.Exit:
        _print_report(report, as_json)  # the verdict still stands; only its record is missing
        raise
    _print_report(report, as_json, task_id)
    raise typer.Exit(0 if report.valid else 1)

def grade_cmd(
    artifact_dir: Path = typer.Argument(..., help="Directory holding the five artifact files."),
    repo: str = REPO,
    patch: list[Path] = typer.Option(..., "--patch", help="A solver prediction (a diff over the buggy state); "
                                     "repeat to grade several in order through one pooled sandbox."),
    as_json: bool = JSON,
    store: str | None = typer.Option(None, "--store", help="Take FAIL_TO_PASS/PASS_TO_PASS from this store "
                                     "when it validated exactly this artifact; otherwise it is validated."),
) -> None:
    """Grade predictions against a valid artifact (exit 0 whenever grading ran, 2 when it could not)."""
    spec = _spec(repo)
    folders = [str(p) for p in patch if p.is_dir()]
    if folders:
        raise _fail(f"--patch {', '.join(folders)}: a directory; name the prediction's diff file")
    absent = [str(p) for p in patch if not p.is_file()]
    if absent:
        raise _fail(f"--patch {', '.join(absent)}: no such file")
    predictions = [(p, p.read_bytes().decode("utf-8", "replace")) for p in patch]
    artifact, error = _load(artifact_dir)
    if artifact is None:
        raise _fail(f"cannot grade against a malformed artifact: {error}")
    # A prediction with text but no file section is -1 without a run: its tests never ran, so none is listed
    # Results go by position: the same file given twice is graded twice (a flaky task shows it), each verdict
    # in its own place.
    diffs = [i for i, (_, text) in enumerate(predictions) if not text.strip() or split_sections(text)]
    objects = [_not_a_diff(p) for p, _ in predictions]
    if diffs:
        f2p, p2p = _oracle_split(artifact, repo, spec, store)
        for i, graded in zip(diffs, _grade_all(artifact, [predictions[i] for i in diffs], f2p, p2p, spec),
                             strict=True):
            objects[i] = graded
    if as_json:  # one --patch: the single object without its path, as it always was
        typer.echo(json.dumps(objects if len(objects) > 1
                              else {k: v for k, v in objects[0].items() if k != "patch"}))
    else:
        _print_grades(objects)
    broken = [o for o in objects if o["reward"] is None]
    if broken:
        raise _fail(f"grading could not run for {len(broken)} of {len(objects)} prediction(s): "
                    + "; ".join(f"{o['patch']}: {o['error']}" for o in broken))
    raise typer.Exit(0)

def seed_cmd(
    repo: str = REPO,
    n: int = typer.Option(1, "-n", help="How many validated artifacts to produce."),
    out: Path = typer.Option(Path("seeds"), "--out", help="Directory receiving one folder per artifact."),
    seed: int = typer.Option(0, "--seed", help="Random seed."),
    as_json: bool = JSON,
    store: str | None = STORE,
) -> None:
    """Produce N validated procedural (AST-mutation) bug artifacts for a repo."""
    # lazy: keeps `selfplay --help` fast
    from selfplay.procedural.seed import SeedConfig
    from selfplay.procedural.seed import seed as run_seed

    spec = _spec(repo)
    if n < 1:
        raise _fail("-n must be at least 1")
    if out.exists() and not out.is_dir():
        raise _fail(f"--out {out} is a file; name a directory (one folder per artifact goes in it)")
    recorder = _open_store(store)

    def record(result) -> None:
        _record(recorder, result.artifact, repo, result.report, origin="procedural", strategy=result.operator)

    try:
        results = run_seed(spec, n, out, config=SeedConfig(seed=seed), on_valid=record)
    except typer.Exit:
        raise
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


def register(app: typer.Typer) -> None:
    """Add validate, grade and seed to `app`."""
    app.command("validate")(validate_cmd)
    app.command("grade")(grade_cmd)
    app.command("seed")(seed_cmd)


def _oracle_split(artifact, repo: str, spec, store_url: str | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """FAIL_TO_PASS/PASS_TO_PASS from the store that validated exactly this artifact, else by validating it.

    Never from a file beside the artifact (a report.json there may be the model's own writing): the grade
    is only as honest as these lists, so they come from a validation this process ran or one the store
    recorded under the artifact's content address (all five files)."""
    from rich.console import Console

    note = Console(stderr=True)
    if store_url is not None:
        from selfplay.store import open_store  # lazy: SQLAlchemy, off `selfplay --help`

        with open_store(store_url, create=False) as st:  # grade only reads the store
            stored = st.validated_tests(repo, artifact)
        if stored is not None and stored[0]:
            note.print(f"oracle tests: {len(stored[0])} FAIL_TO_PASS, {len(stored[1])} PASS_TO_PASS from the "
                       f"store's validation of this artifact", highlight=False)
            return stored
        note.print("oracle tests: the store has no valid validation of this exact artifact; validating it",
                   highlight=False)
    config = ValidationConfig()
    try:
        with _pool(spec, config.parallelism) as pool:
            report = validate(artifact, spec, config, pool=pool)
    except Exception as exc:  # engine, image or sandbox failure: no verdict
        raise _fail(f"grading could not run: validating the artifact failed: {exc}") from exc
    if not report.valid:
        raise _fail(f"the artifact is not valid ({report.failed_check or report.error}); "
                    "grading needs a valid artifact (run `selfplay validate` for details)")
    note.print(f"oracle tests: {len(report.fail_to_pass)} FAIL_TO_PASS, {len(report.pass_to_pass)} PASS_TO_PASS "
               f"from validating the artifact ({report.suite_runs} suite runs)", highlight=False)
    return report.fail_to_pass, report.pass_to_pass


def _not_a_diff(path: Path) -> dict:
    return {"patch": str(path), "reward": -1, "resolved": False, "tests": {}, "dropped_hunks": [],
            "error": NOT_A_DIFF, "tamper": None, "integrity": None, "verification": None}


def _grade_all(artifact, predictions, f2p, p2p, spec) -> list[dict]:
    """Grade each (path, text) in order through ONE pooled sandbox, as the run loop does: the pool resets
    it between attempts, so whatever one attempt leaves behind meets the next. An attempt whose grading
    could not run gets reward None and the reason; the others are still graded."""
    objects = []
    try:
        pool = _pool(spec, 1)
    except Exception as exc:
        raise _fail(f"grading could not run: no sandbox of {spec.name}: {exc}") from exc
    with pool:
        for path, prediction in predictions:
            try:
                result = grade(artifact, prediction, f2p, p2p, spec=spec, pool=pool)
            except Exception as exc:  # sandbox or broken task: no verdict on the prediction
                objects.append({"patch": str(path), "reward": None, "resolved": None, "tests": {},
                                "dropped_hunks": [], "error": f"grading could not run: {exc}"})
                continue
            objects.append({"patch": str(path), **result.to_json()})
    return objects


def _print_grades(objects: list[dict]) -> None:
    from rich.console import Console
    from rich.markup import escape

    console = Console()
    for o in objects:
        head = escape(f"{o['patch']}: ") if len(objects) > 1 else ""
        for line in o["dropped_hunks"]:
            console.print(f"{head}[yellow]dropped[/] {escape(line)}", highlight=False)
        if o["reward"] is None:
            console.print(f"{head}[red]not graded[/]: {escape(o['error'])}", highlight=False)
            continue
        if o["error"]:  # the tests did not run as a verdict on it: counting them "failed" would mislead
            console.print(f"{head}reward {o['reward']:+d} (not resolved): {escape(o['error'])}", highlight=False)
            continue
        failed = [t for t, s in o["tests"].items() if s != "passed"]
        console.print(f"{head}reward {o['reward']:+d} ({'resolved' if o['resolved'] else 'not resolved'}; "
                      f"{len(failed)} of {len(o['tests'])} tests fail)", highlight=False)
