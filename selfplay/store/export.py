"""SWE-bench jsonl export and import of stored tasks.

Each line is `Task.to_swebench` (the one SWE-bench serialiser: task image, `selfplay-base`, gold patch,
test patch, problem statement, eval_script, log_parser, eval_type; see `selfplay.task`), so the official
harness grades it unchanged once the task image exists (`selfplay eval swebench` builds it). `selfplay_*` fields
carry the repo's clean image and commit and what SWE-bench has no field for (the five artifact files, origin, order,
parent, failed prediction, status), so `tasks import` restores the task exactly. Nested values are
JSON strings, so `datasets.load_dataset("json", ...)` infers one flat schema for every row.

Departure: for a higher-order task the gold `patch` is the reverse of the failed prediction followed by
the reverse of the bug, two diffs in one file.

Import trusts nothing in the file beyond its shape: each entry's artifact passes the format check
validation runs (`selfplay.artifact.check_format`), and a higher-order entry's failed prediction must be
free of test infrastructure (`selfplay.diffs.drop_infrastructure` drops nothing from it: the store only
ever holds filtered predictions, so one that would lose sections was not written by `tasks export`).
Import is all-or-nothing per file: every entry is checked before any is written, and the first bad one
is named (file, line, instance id) with what is wrong.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from repos.errors import RepoError
from repos.listfile import get_repo
from repos.spec import DEFAULT_TEST_PATTERNS
from selfplay.artifact import ARTIFACT_FILES, BugArtifact, check_format
from selfplay.diffs import drop_infrastructure
from selfplay.errors import ArtifactError, DiffError
from selfplay.store.errors import ImportFormatError, StoreError
from selfplay.store.records import ORIGINS, STATUSES
from selfplay.task import Task

if TYPE_CHECKING:
    from selfplay.store.store import SqlStore

log = logging.getLogger(__name__)
FORMATS = ("swebench",)
REQUIRED = ("instance_id", "repo", "FAIL_TO_PASS", "PASS_TO_PASS", "selfplay_artifact")


def problem_statement(task: Task) -> str:
    """The solver's test-spec prompt text for `task` (kept for callers; see `Task.problem_statement`)."""
    return task.problem_statement


def gold_patch(task: Task) -> str:
    return task.gold_patch


def to_instance(
    task: Task, *, image: str | None, base_commit: str | None, version: str | None, created_at: str
) -> dict[str, Any]:
    """`Task.to_swebench` (the one SWE-bench serialiser) plus the `selfplay_*` fields `tasks import` needs.
    `image` and `base_commit` are the repo's (clean image, clean commit), kept as `selfplay_repo_*`: the
    instance's own `image`/`base_commit` are the task image and its buggy-state tag."""
    art = task.artifact
    files = dict(
        zip(
            ARTIFACT_FILES,
            (art.test_script, list(art.test_files), art.test_parser, art.bug_inject, art.test_weaken),
        )
    )
    meta = {k: v for k, v in task.metadata.items() if k not in ("status", "artifact_id")}
    return {
        **task.to_swebench(version=version, created_at=created_at),
        "selfplay_repo_image": image,
        "selfplay_repo_base_commit": base_commit,
        "selfplay_artifact": json.dumps(files),
        "selfplay_origin": task.origin,
        "selfplay_order": task.order,
        "selfplay_parent_id": task.parent_id,
        "selfplay_pred_patch": task.pred_patch,
        "selfplay_status": task.metadata.get("status", "active"),
        "selfplay_metadata": json.dumps(meta, sort_keys=True, default=str),
    }


def from_instance(rec: dict[str, Any], where: str) -> tuple[Task, str]:
    """(task, status) from one exported line; `where` ("FILE:LINE") goes into error messages."""
    if not isinstance(rec, dict):
        raise ImportFormatError(f"{where}: a JSON {type(rec).__name__}, not an object; `tasks import` reads files "
                                "written by `selfplay tasks export --format swebench`")
    missing = [k for k in REQUIRED if k not in rec]
    if missing:
        raise ImportFormatError(
            f"{where}: missing field(s) {', '.join(missing)}; `tasks import` reads files "
            "written by `selfplay tasks export --format swebench`"
        )
    where = f"{where} ({rec['instance_id']})"
    _check_fields(rec, where)
    try:
        files = json.loads(rec["selfplay_artifact"])
        meta = json.loads(rec.get("selfplay_metadata") or "{}")
        f2p, p2p = json.loads(rec["FAIL_TO_PASS"]), json.loads(rec["PASS_TO_PASS"])
    except (json.JSONDecodeError, TypeError) as exc:
        raise ImportFormatError(f"{where}: malformed selfplay_artifact/metadata/test lists ({exc!r})") from exc
    artifact = _artifact(files, where)
    for name, tests in (("FAIL_TO_PASS", f2p), ("PASS_TO_PASS", p2p)):
        if not isinstance(tests, list) or not all(isinstance(t, str) for t in tests):
            raise ImportFormatError(f"{where}: {name} must be a JSON list of test ids")
    if not f2p:
        raise ImportFormatError(f"{where}: FAIL_TO_PASS is empty; a task needs at least one test the bug breaks")
    if not isinstance(meta, dict):
        raise ImportFormatError(f"{where}: selfplay_metadata must be a JSON object")
    _check_prediction(rec.get("selfplay_pred_patch"), artifact, rec["repo"], where)
    # Files from before the one serialiser carried the repo's image and commit in `image`/`base_commit`.
    old = "selfplay_repo_image" not in rec
    for key, field in (("image", "image" if old else "selfplay_repo_image"),
                       ("base_commit", "base_commit" if old else "selfplay_repo_base_commit"),
                       ("version", "version")):
        if rec.get(field) and rec.get(field) != "selfplay":
            meta[key] = rec[field]
    origin = rec.get("selfplay_origin") or "imported"
    task = Task(
        task_id=rec["instance_id"],
        repo=rec["repo"],
        artifact=artifact,
        fail_to_pass=tuple(f2p),
        pass_to_pass=tuple(p2p),
        origin=origin,
        order=rec.get("selfplay_order") or 1,
        parent_id=rec.get("selfplay_parent_id"),
        pred_patch=rec.get("selfplay_pred_patch"),
        metadata=meta,
    )
    return task, rec.get("selfplay_status") or "active"


def _check_fields(rec: dict[str, Any], where: str) -> None:
    """ImportFormatError naming the first scalar field whose type or value a stored task cannot have (checked
    here, so that a bad entry rejects the whole file rather than failing half-way through the writes)."""
    for name in ("instance_id", "repo"):
        if not isinstance(rec[name], str) or not rec[name].strip():
            raise ImportFormatError(f"{where}: {name} must be a non-empty string, not {rec[name]!r}")
    order = rec.get("selfplay_order")
    if order is not None and (type(order) is not int or order < 1):  # bool is an int: refused too
        raise ImportFormatError(f"{where}: selfplay_order must be a whole number from 1 (1 for a first-order "
                                f"task), not {order!r}")
    for name, allowed in (("selfplay_origin", ORIGINS), ("selfplay_status", STATUSES)):
        value = rec.get(name)
        if value is not None and value not in allowed:
            raise ImportFormatError(f"{where}: {name} must be one of {', '.join(allowed)}, not {value!r}")
    for name in ("selfplay_parent_id", "image", "base_commit", "version", "selfplay_repo_image",
                 "selfplay_repo_base_commit"):
        if rec.get(name) is not None and not isinstance(rec[name], str):
            raise ImportFormatError(f"{where}: {name} must be a string or null, not {rec[name]!r}")


def _artifact(files: Any, where: str) -> BugArtifact:
    """The entry's five files as an artifact that passes validation's format check, else ImportFormatError."""
    if not isinstance(files, dict):
        raise ImportFormatError(f"{where}: selfplay_artifact must be a JSON object of the five files")
    test_files = files.get("test_files.txt")
    # The export keeps test_files.txt as a JSON list; the artifact's own format is one path a line.
    if isinstance(test_files, list) and all(isinstance(p, str) for p in test_files):
        files = {**files, "test_files.txt": "\n".join(test_files)}
    wrong = [n for n in ARTIFACT_FILES if n in files and not isinstance(files[n], str)]
    if wrong:
        raise ImportFormatError(f"{where}: {', '.join(wrong)} in selfplay_artifact must be text "
                                "(test_files.txt: a list of paths)")
    try:
        artifact = BugArtifact.from_files(files)
        check_format(artifact)
    except ArtifactError as exc:
        raise ImportFormatError(f"{where}: the artifact fails validation's format check: {exc}") from None
    return artifact


def _check_prediction(pred: str | None, artifact: BugArtifact, repo: str, where: str) -> None:
    """Reject a higher-order entry whose failed prediction is not a diff or touches test infrastructure."""
    if pred is None or pred == "":
        return
    if not isinstance(pred, str):
        raise ImportFormatError(f"{where}: selfplay_pred_patch must be a diff as text, or null")

    try:
        patterns = get_repo(repo).test_patterns
    except RepoError:  # a repo this checkout does not list: the default patterns still apply
        patterns = DEFAULT_TEST_PATTERNS
    try:
        filtered = drop_infrastructure(pred, test_files=artifact.test_files, test_patterns=patterns,
                                       script=artifact.test_script)
    except DiffError as exc:
        raise ImportFormatError(f"{where}: selfplay_pred_patch is not a valid diff: {exc}") from None
    if filtered.dropped or not filtered.kept.strip():
        why = "; ".join(filtered.dropped) or "no file section"
        raise ImportFormatError(f"{where}: selfplay_pred_patch would lose sections to the test-infrastructure "
                                f"filter ({why}); stored predictions are always filtered, so this entry was not "
                                "written by `selfplay tasks export`")


def export_swebench(
    store: SqlStore, out: str | Path, *, status: str | None = None, repo: str | None = None
) -> int:
    """Write the selected tasks to `out` (jsonl); returns how many. Parents come before their children.

    `out` is replaced only once every line is written (a failing store leaves it as it was), and never by an
    empty export: a selection of no task leaves an existing `out` alone (StoreError) and writes an empty
    file only where there was none."""
    out = Path(out)
    stats = sorted(store.task_stats(status=status, repo=repo), key=lambda s: s.order)
    if not stats and out.exists():
        chosen = " and ".join(f"{k} {v!r}" for k, v in (("status", status), ("repo", repo)) if v) or "the export"
        raise StoreError(f"no task in {store.url} matches {chosen}; {out} was left as it was (an export never "
                         "replaces a file with an empty one)")
    created = {s.task_id: s.created_at for s in stats}
    repos: dict[str, Any] = {}
    count = 0
    with _replacing(out) as fh:
        for i in range(0, len(stats), 500):
            for task in store.get_tasks([s.task_id for s in stats[i : i + 500]]):
                if task.repo not in repos:
                    repos[task.repo] = store.get_repo(task.repo)
                r = repos[task.repo]
                line = to_instance(
                    task,
                    image=r.image if r else None,
                    base_commit=r.base_commit if r else None,
                    version=r.version if r else None,
                    created_at=created[task.task_id].isoformat(),
                )
                fh.write(json.dumps(line, sort_keys=True) + "\n")
                count += 1
    return count


@contextmanager
def _replacing(out: Path) -> Iterator[TextIO]:
    """A text file that becomes `out` when the block ends without an exception (else it is removed): a
    sibling of `out`, so the rename is atomic."""
    out = out.resolve() if out.is_symlink() else out  # write through a link, as `open(out, "w")` would
    tmp = out.with_name(f".{out.name}.{secrets.token_hex(4)}.tmp")
    # os.open with 0o666 honours the umask, as `open(out, "w")` would (mkstemp would make it 0o600).
    fh = os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), "w", encoding="utf-8")
    try:
        with fh:
            yield fh
        if out.exists():
            shutil.copymode(out, tmp)
        os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@dataclass(frozen=True)
class ImportSummary:
    added: int
    """Tasks new to the store."""
    existing: int
    """Tasks already stored (same id, or same normalised diff hash)."""


def parse_export(path: str | Path) -> list[tuple[Task, str]]:
    """Every entry of an export as (task, status), each line checked; ImportFormatError names the first bad
    line (not UTF-8, not JSON, or not a task) before anything is written anywhere."""
    parsed: list[tuple[Task, str]] = []
    with Path(path).open("rb") as fh:
        for n, raw in enumerate(fh, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ImportFormatError(f"{path}:{n}: not UTF-8 text (byte {exc.start} of the line); an "
                                        "export is UTF-8 JSON lines") from None
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ImportFormatError(f"{path}:{n}: not JSON ({exc.msg})") from exc
            parsed.append(from_instance(rec, f"{path}:{n}"))
    return parsed


def import_swebench(store: SqlStore, path: str | Path) -> ImportSummary:
    """Read an export back into `store`; every line is checked before anything is written."""
    parsed = parse_export(path)
    added = existing = 0
    for task, status in sorted(parsed, key=lambda p: p[0].order):
        known = store.has_task(task.task_id)
        stored = store.add_task(task, status=status)
        if known or stored != task.task_id:
            existing += 1
        else:
            added += 1
    return ImportSummary(added, existing)
