"""A task's `diff_hash` is what its bug diff writes and where (`selfplay.diffs.site_hash`), no longer what it
writes alone: two bugs writing the same text on different lines were filed as one task, and the second
one's injector was rewarded for a duplicate. Every task's hash (and its copy in `task_stats`) is worked
out again from its artifact's bug diff and its failed prediction.

Revision ID: 0005
Revises: 0004
"""

import hashlib

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def _sited(diff: str) -> str:
    """A frozen copy of `site_hash` at this revision."""
    from selfplay.diffs import bug_site, normalised_hash

    site = ",".join(f"{path}\0{at}" for path, at in sorted(bug_site(diff)))
    return hashlib.sha256(f"{normalised_hash(diff)}\1{site}".encode()).hexdigest()


def _text(diff: str) -> str:
    from selfplay.diffs import normalised_hash

    return normalised_hash(diff)


def _rehash(of) -> None:
    """Set every task's hash to `of(diff)` of its bug diff (and prediction); a task whose diffs do not
    parse, or whose new hash another task of its repo already has, keeps the one it has."""
    from selfplay.errors import DiffError

    bind = op.get_bind()
    tasks = bind.execute(sa.text("SELECT t.task_id, t.repo, t.diff_hash, t.pred_patch, a.bug_inject FROM tasks t "
                                 "JOIN artifacts a ON a.artifact_id = t.artifact_id "
                                 "ORDER BY t.created_at, t.task_id")).all()  # the older task of a pair goes first
    used = {(repo, old) for _, repo, old, _, _ in tasks}
    for task_id, repo, old, pred, bug in tasks:
        try:
            new = of(bug) if not pred else hashlib.sha256(f"{of(bug)}+{of(pred)}".encode()).hexdigest()
        except DiffError:
            continue
        if new == old or (repo, new) in used:
            continue
        used.discard((repo, old))
        used.add((repo, new))
        for table in ("tasks", "task_stats"):
            bind.execute(sa.text(f"UPDATE {table} SET diff_hash = :new WHERE task_id = :id"), {"new": new, "id": task_id})


def upgrade() -> None:
    _rehash(_sited)


def downgrade() -> None:
    # two tasks writing the same text on other lines cannot share a text-only hash: the later keeps its own
    _rehash(_text)
