"""Procedural seed bugs (beyond SSR): AST mutants turned into five-file artifacts and validated.

For each attempt: pick a code file that has a same-named test file (`itertoolz.py` ->
`test_itertoolz.py`), pick an operator and a site at random, mutate, and run the related test files once
with the mutant (a cheap pre-screen). If some originally-passing tests fail, the weakening deletes those
test functions, and the artifact (the repo's test command restricted to the related files, the built-in
pytest parser) goes through the same `validate` as injector artifacts. Valid ones are saved as
directories, with the validation report as `report.json`.
"""

from __future__ import annotations

import ast
import difflib
import json
import logging
import random
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath

from agent_scaffold.mutation_operators import OPERATORS, OPERATORS_BY_NAME, mutate
from repos.spec import RepoSpec
from sandboxes.images import repo_image
from sandboxes.pool import SandboxPool
from sandboxes.users import RUNNER_UID, drop_privileges
from selfplay.artifact import BugArtifact, save_artifact
from selfplay.diffs import matches_any
from selfplay.errors import DiffError
from selfplay.jobs import NO_BYTECODE, SCRATCH
from selfplay.procedural import PARSER_SOURCE
from selfplay.procedural.pytest_parser import parse
from selfplay.task import make_task_id
from selfplay.validation import ValidationConfig, ValidationReport, validate

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SeedConfig:
    """How procedural seeds are drawn."""

    operators: tuple[str, ...] = tuple(op.name for op in OPERATORS)
    """Names of the mutation operators to draw from."""
    attempts_per_bug: int = 12
    """Give up after k * attempts_per_bug mutants."""
    seed: int = 0
    """Random seed: the same seed on the same repo draws the same mutants."""
    suite_timeout: float = 120.0
    """Seconds the pre-screen run of a mutant may take."""


@dataclass(frozen=True)
class SeedResult:
    """One saved, validated seed artifact."""

    directory: Path
    artifact: BugArtifact
    report: ValidationReport
    operator: str
    file: str
    extra: dict[str, str] = field(default_factory=dict)


def file_diff(path: str, old: str, new: str) -> str:
    body = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                f"a/{path}", f"b/{path}", n=3)
    return f"diff --git a/{path} b/{path}\n" + "".join(body)


def mutable_files(files: list[str], test_patterns: tuple[str, ...]) -> list[tuple[str, list[str]]]:
    """The code files of `files` (a repo's `git ls-files '*.py'`) that seeding mutates, each with its
    related test files (`test_<stem>.py` or `<stem>_test.py`); a file with none is never mutated."""
    tests = [f for f in files if matches_any(f, test_patterns)]
    code = [f for f in files if f not in tests and PurePosixPath(f).name not in ("setup.py", "conf.py")
            and not f.startswith(("docs/", "doc/", "examples/", "benchmarks/"))]
    pairs = []
    for f in sorted(code):
        p = PurePosixPath(f)
        # a package's __init__.py is tested by test_<package>.py (e.g. inflection)
        stem = (p.parent.name if p.name == "__init__.py" else p.stem).lstrip("_")
        if not stem:
            continue
        related = [t for t in tests if PurePosixPath(t).name in (f"test_{stem}.py", f"{stem}_test.py")]
        if related:
            pairs.append((f, related))
    return pairs


def restricted_command(test_command: str, test_files: list[str]) -> str:
    """`test_command` with its path arguments replaced by `test_files` (options and their values kept).

    A word after `pytest` counts as a path when it has a slash, ends in .py, or is a folder above one of
    `test_files`; e.g. "python -m pytest -rA -p no:cacheprovider toolz/tests" + ["a/test_x.py"] gives
    "python -m pytest -rA -p no:cacheprovider a/test_x.py".
    """
    words = shlex.split(test_command)
    at = next((i for i, w in enumerate(words) if w == "pytest" or w.endswith("/pytest")), len(words) - 1)

    def is_path(w: str) -> bool:
        return not w.startswith("-") and ("/" in w or w.endswith(".py") or any(
            f.startswith(w.rstrip("/") + "/") for f in test_files))

    kept = words[:at + 1] + [w for w in words[at + 1:] if not is_path(w)]
    return " ".join(shlex.quote(w) for w in kept + test_files)


def _find_defs(tree: ast.Module, names: list[str]) -> list[ast.AST]:
    """The def for a test id's names (`Class`, `method`), falling back to any class defining the method
    (pytest reports inherited tests under the subclass)."""
    fn = names[-1]
    scope: list[ast.stmt] = tree.body
    for cls in names[:-1]:
        found = [n for n in scope if isinstance(n, ast.ClassDef) and n.name == cls]
        scope = found[0].body if found else []
    hits = [n for n in scope if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == fn]
    if not hits and len(names) > 1:
        hits = [m for c in ast.walk(tree) if isinstance(c, ast.ClassDef) for m in c.body
                if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and m.name == fn]
    return hits


def delete_tests(source: str, test_names: list[list[str]]) -> str | None:
    """`source` without the test functions named (each a [Class..., function] path); None if one is missing."""
    tree = ast.parse(source)
    spans = set()
    for names in test_names:
        defs = _find_defs(tree, names)
        if not defs:
            return None
        for d in defs:
            first = min([d.lineno] + [x.lineno for x in d.decorator_list])
            spans.add((first, d.end_lineno, d.col_offset))
    lines = source.splitlines(keepends=True)
    for first, last, _col in sorted(spans, reverse=True):
        lines[first - 1:last] = []
    out = "".join(lines)
    try:
        ast.parse(out)
    except SyntaxError:  # a class lost its only method
        return None
    return out


def _test_names(test_id: str) -> tuple[str, list[str]]:
    path, *names = test_id.split("::")
    return path, [n.split("[", 1)[0] for n in names]


class _Seeder:
    def __init__(self, spec: RepoSpec, pool, config: SeedConfig, vconfig: ValidationConfig):
        self.spec, self.pool, self.config, self.vconfig = spec, pool, config, vconfig
        self.rng = random.Random(config.seed)
        self.baselines: dict[tuple[str, ...], dict[str, str]] = {}
        self.last_operator = ""
        self.durations: dict[tuple[str, ...], float] = {}

    def prescreen_timeout(self, key: tuple[str, ...]) -> float:
        return min(self.config.suite_timeout, max(10.0, 4 * self.durations[key]))

    def inventory(self) -> list[tuple[str, list[str]]]:
        """(code file, related test files) pairs."""
        with self.pool.checkout() as sb:
            files = sb.exec("git ls-files '*.py'", timeout=60).output.split()
        return mutable_files(files, self.spec.test_patterns)

    def run(self, sb, script: str, diff: str | None, timeout: float) -> dict[str, str] | None:
        if diff and not sb.apply_patch(diff).applied:
            return None
        sb.write_file(f"{SCRATCH}/test_script.sh", script, user="root")
        # no bytecode caches: a same-size mutant within the same second would run the cached original;
        # the mutant runs as the runner uid, as in validation
        res = sb.exec(f"{NO_BYTECODE}; {drop_privileges(RUNNER_UID)} bash /dev/fd/3 3<{SCRATCH}/test_script.sh",
                      timeout=timeout, user="root")
        return None if res.timed_out else parse(res.output)

    def attempt(self, code_file: str, tests: list[str]) -> BugArtifact | None:
        op = OPERATORS_BY_NAME[self.rng.choice(self.config.operators)]
        self.last_operator = op.name
        script = "#!/bin/bash\n" + restricted_command(self.spec.test_command, tests) + "\n"
        with self.pool.checkout() as sb:
            source = sb.read_file(code_file).decode()
            sites = op.sites(ast.parse(source))
            if not sites:
                return None
            try:
                mutant = mutate(source, op, self.rng.randrange(len(sites)))
            except ValueError as exc:
                log.debug("seed: %s", exc)
                return None
            bug = file_diff(code_file, source, mutant)
            key = tuple(tests)
            if key not in self.baselines:
                start = time.monotonic()
                self.baselines[key] = self.run(sb, script, None, self.config.suite_timeout) or {}
                self.durations[key] = time.monotonic() - start
                sb.reset()
            base = self.baselines[key].values()
            if sum(s == "passed" for s in base) < self.vconfig.min_passing_tests or "failed" in base:
                return None  # validation's test_script check would reject every mutant tested by these files
            # A mutant that loops forever must not cost a full suite timeout: allow a few baselines.
            statuses = self.run(sb, script, bug, self.prescreen_timeout(key))
            if statuses is None:
                return None
            original = self.baselines[key]
            failing = [t for t, s in original.items() if s == "passed" and statuses.get(t) != "passed"]
            if not failing:
                return None
            by_file: dict[str, list[list[str]]] = {}
            for t in failing:
                path, names = _test_names(t)
                if path not in tests or not names:
                    return None
                by_file.setdefault(path, []).append(names)
            weaken = ""
            for path, names in by_file.items():
                text = sb.read_file(path).decode()
                new = delete_tests(text, names)
                if new is None:
                    return None
                weaken += file_diff(path, text, new)
        return BugArtifact(test_script=script, test_files=tuple(tests), test_parser=PARSER_SOURCE,
                           bug_inject=bug, test_weaken=weaken)


def seed(spec: RepoSpec, k: int, out_dir: str | Path, *, pool=None, config: SeedConfig = SeedConfig(),
         validation: ValidationConfig = ValidationConfig(),
         on_valid: Callable[[SeedResult], None] | None = None,
         accept: Callable[[BugArtifact], bool] | None = None) -> list[SeedResult]:
    """Produce up to `k` validated procedural artifacts of `spec` under `out_dir`, one directory each.

    Returns the saved ones (fewer than `k` when `k * attempts_per_bug` mutants did not yield enough).
    `accept`, when given, is asked about each pre-screened artifact before validation; a rejected one
    costs no suite run (demonstrations reject specs too long for their token budget this way).
    """
    if pool is None:
        with SandboxPool(repo_image(spec), size=validation.parallelism, workdir=spec.workdir) as owned:
            return seed(spec, k, out_dir, pool=owned, config=config, validation=validation, on_valid=on_valid,
                        accept=accept)
    seeder = _Seeder(spec, pool, config, validation)
    pairs = seeder.inventory()
    if not pairs:
        raise ValueError(f"repo {spec.name!r}: no code file has a same-named test file "
                         "(test_<module>.py); procedural seeding needs one")
    results: list[SeedResult] = []
    seen: set[str] = set()
    for attempt in range(k * config.attempts_per_bug):
        if len(results) >= k:
            break
        code_file, tests = seeder.rng.choice(pairs)
        artifact = seeder.attempt(code_file, tests)
        try:
            digest = None if artifact is None else artifact.digest()
        except DiffError as exc:  # a generated diff git refuses (seen: a corrupt weakening of a boltons mutant)
            log.info("seed %s attempt %d on %s: its diffs do not parse (%s); skipped", spec.name, attempt,
                     code_file, exc)
            continue
        if digest is None or digest in seen:
            continue
        seen.add(digest)
        if accept is not None and not accept(artifact):
            log.info("seed %s attempt %d on %s: not accepted before validation", spec.name, attempt, code_file)
            continue
        # The mutant passed a pre-screen, so a generous multiple of that run bounds every validation run.
        budget = min(validation.suite_timeout, max(20.0, 6 * max(seeder.durations.values())))
        report = validate(artifact, spec, replace(validation, suite_timeout=budget), pool=pool)
        log.info("seed %s attempt %d on %s: %s", spec.name, attempt, code_file,
                 "valid" if report.valid else f"invalid ({report.failed_check})")
        if not report.valid:
            continue
        directory = save_artifact(artifact, Path(out_dir) / make_task_id(spec.name, artifact))
        (directory / "report.json").write_text(json.dumps(report.to_json(), indent=1) + "\n")
        result = SeedResult(directory, artifact, report, operator=seeder.last_operator, file=code_file)
        results.append(result)
        if on_valid is not None:
            on_valid(result)
    return results
