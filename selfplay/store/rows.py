"""Write-side helpers of the store: each takes the open `Session` of the caller's transaction."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from selfplay.artifact import ARTIFACT_FILES, BugArtifact
from selfplay.store.errors import StoreError
from selfplay.store.models import ArtifactRow, CheckResultRow, TaskRow, TaskStatsRow, utcnow
from selfplay.store.records import ORIGINS, STATUSES, CheckRecord


def check_origin(origin: str) -> None:
    if origin not in ORIGINS:
        raise StoreError(f"unknown origin {origin!r}; use one of {', '.join(ORIGINS)}")


def check_status(status: str) -> None:
    if status not in STATUSES:
        raise StoreError(f"unknown task status {status!r}; use one of {', '.join(STATUSES)}")


def rand_key(task_id: str) -> float:
    """The task's fixed sampling key, uniform in [0, 1) and a function of its id alone: two stores holding the
    same tasks (the learning experiment's two arms, a rebuilt store) draw the same tasks from the same seeded
    rng, which a key drawn at insertion would not give."""
    digest = hashlib.sha256(task_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def artifact_files(artifact: BugArtifact) -> tuple[str, ...]:
    test_files = "".join(f"{p}\n" for p in artifact.test_files)
    return (artifact.test_script, test_files, artifact.test_parser, artifact.bug_inject, artifact.test_weaken)


def artifact_id_for(repo: str, artifact: BugArtifact) -> str:
    """Content address of an artifact within a repo."""
    h = hashlib.sha256(repo.encode())
    for name, text in zip(ARTIFACT_FILES, artifact_files(artifact)):
        h.update(b"\0" + name.encode() + b"\0" + text.encode())
    return h.hexdigest()[:32]


def put_artifact(
    s: Session,
    repo: str,
    artifact: BugArtifact,
    *,
    origin: str,
    diff_hash: str,
    order: int = 1,
    strategy: str | None = None,
    parent_id: str | None = None,
    episode_id: str | None = None,
    valid: bool | None = None,
    error: str | None = None,
    checks: Sequence[CheckRecord] | None = None,
) -> str:
    """Insert the artifact, or (same content already stored) refresh its validation outcome."""
    check_origin(origin)
    artifact_id = artifact_id_for(repo, artifact)
    # Row lock: concurrent re-validations of one artifact take turns replacing its check results.
    row = s.get(ArtifactRow, artifact_id, with_for_update=True)
    files = artifact_files(artifact)
    if row is None:
        row = ArtifactRow(
            artifact_id=artifact_id,
            repo=repo,
            test_script=files[0],
            test_files=files[1],
            test_parser=files[2],
            bug_inject=files[3],
            test_weaken=files[4],
            hashes=json.dumps(
                {n: hashlib.sha256(t.encode()).hexdigest() for n, t in zip(ARTIFACT_FILES, files)}
            ),
            diff_hash=diff_hash,
            origin=origin,
            order=order,
            strategy=strategy,
            parent_id=parent_id,
            episode_id=episode_id,
            valid=valid,
            error=error,
            created_at=utcnow(),
        )
        s.add(row)
        s.flush()
    elif checks is not None:
        row.valid, row.error = valid, error
        for old in s.scalars(select(CheckResultRow).where(CheckResultRow.artifact_id == artifact_id)):
            s.delete(old)
        s.flush()
    for position, check in enumerate(checks or ()):
        s.add(
            CheckResultRow(
                artifact_id=artifact_id,
                position=position,
                name=check.name,
                passed=check.passed,
                detail=check.detail,
            )
        )
    return artifact_id


def find_task(s: Session, repo: str, diff_hash: str) -> str | None:
    return s.scalar(select(TaskRow.task_id).where(TaskRow.repo == repo, TaskRow.diff_hash == diff_hash))


def _bug_text(s: Session, artifact_id: str) -> str | None:
    """The normalised hash of an artifact's bug diff (what it writes, wherever it is)."""
    row = s.get(ArtifactRow, artifact_id)
    return None if row is None else row.diff_hash


def put_task(
    s: Session,
    *,
    task_id: str,
    repo: str,
    artifact_id: str,
    diff_hash: str,
    fail_to_pass: Sequence[str],
    pass_to_pass: Sequence[str],
    origin: str,
    order: int,
    parent_id: str | None,
    pred_patch: str | None,
    meta: dict,
    status: str = "active",
    family: str | None = None,
) -> tuple[str, bool]:
    """Insert a task and its (empty) statistics; returns (task id, created). An existing task with the
    same hash of the buggy state (`diff_hash`) in the same repo wins: its id comes back with created=False.

    A task id is derived from the diffs' text (`selfplay.task.make_task_id`), so a bug writing the same
    text as a stored one on other lines (a different `diff_hash`) arrives with the stored task's id: it
    gets that id with its hash's first 8 digits appended. An id taken by a task whose bug writes other
    text is a caller's mistake (an import reusing an id) and raises."""
    check_origin(origin)
    check_status(status)
    existing = find_task(s, repo, diff_hash)
    if existing is not None:
        return existing, False
    taken = s.get(TaskRow, task_id)
    if taken is not None and _bug_text(s, taken.artifact_id) == _bug_text(s, artifact_id):
        task_id = f"{task_id}-{diff_hash[:8]}"
        taken = s.get(TaskRow, task_id)
    if taken is not None:
        raise StoreError(
            f"task id {task_id!r} is already used by a different task; give the imported task a new id"
        )
    s.add(
        TaskRow(
            task_id=task_id,
            repo=repo,
            artifact_id=artifact_id,
            fail_to_pass=json.dumps(list(fail_to_pass)),
            pass_to_pass=json.dumps(list(pass_to_pass)),
            status=status,
            origin=origin,
            order=order,
            parent_id=parent_id,
            pred_patch=pred_patch,
            diff_hash=diff_hash,
            family=family or task_id,
            meta=json.dumps(meta, sort_keys=True, default=str),
            created_at=utcnow(),
        )
    )
    s.flush()
    s.add(
        TaskStatsRow(
            task_id=task_id,
            status=status,
            rand_key=rand_key(task_id),
            repo=repo,
            family=family or task_id,
            diff_hash=diff_hash,
            attempts=0,
            solves=0,
            recent="",
        )
    )
    s.flush()
    return task_id, True


def family_of(s: Session, parent_task: str | None, parent_artifact: str | None) -> str | None:
    """Root of a higher-order chain (the parent task's family), else the parent artifact, else None."""
    if parent_task is not None:
        return s.scalar(select(TaskRow.family).where(TaskRow.task_id == parent_task))
    return parent_artifact


def resolve_parent(s: Session, parent_id: str | None) -> tuple[str | None, str | None]:
    """(parent task id, parent artifact id) for a parent given as either a task id or an artifact id."""
    if parent_id is None:
        return None, None
    task = s.get(TaskRow, parent_id)
    if task is not None:
        return task.task_id, task.artifact_id
    if s.get(ArtifactRow, parent_id) is not None:
        return None, parent_id
    raise StoreError(
        f"parent {parent_id!r} is neither a stored task nor a stored artifact; record the parent first"
    )
