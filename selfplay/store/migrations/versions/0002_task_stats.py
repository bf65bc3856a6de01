"""Incrementally maintained solve statistics (`task_stats`) with the covering sampling index, backfilled
from existing tasks and attempts.

Revision ID: 0002
Revises: 0001
"""

import random

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

RECENT_WINDOW = 32
UNSEEN_SQL = "status = 'active' AND attempts = 0"  # frozen copies of the models' values at this revision


def upgrade() -> None:
    stats = op.create_table(
        "task_stats",
        sa.Column("task_id", sa.String(length=200), nullable=False),
        sa.Column("status", sa.String(length=10), nullable=False),
        sa.Column("rand_key", sa.Float(), nullable=False),
        sa.Column("repo", sa.String(length=200), nullable=False),
        sa.Column("family", sa.String(length=200), nullable=False),
        sa.Column("diff_hash", sa.String(length=64), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("solves", sa.Integer(), nullable=False),
        sa.Column("recent", sa.String(length=RECENT_WINDOW), nullable=False),
        sa.Column("last_attempt_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["task_id"], ["tasks.task_id"], name=op.f("fk_task_stats_task_id_tasks"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("task_id", name=op.f("pk_task_stats")),
    )
    op.create_index(
        "ix_task_stats_sampling",
        "task_stats",
        ["status", "rand_key", "attempts", "solves", "recent", "repo", "family", "diff_hash", "task_id"],
        unique=False,
    )
    op.create_index(
        "ix_task_stats_unseen",
        "task_stats",
        ["rand_key", "status", "attempts", "solves", "recent", "repo", "family", "diff_hash", "task_id"],
        unique=False,
        sqlite_where=sa.text(UNSEEN_SQL),
        postgresql_where=sa.text(UNSEEN_SQL),
    )
    # Backfill: one row per task, from its solver attempts in id order.
    bind = op.get_bind()
    tasks = bind.execute(sa.text("SELECT task_id, status, repo, family, diff_hash FROM tasks")).all()
    rows = {t[0]: [0, 0, "", None] for t in tasks}
    attempts = bind.execute(
        sa.text(
            "SELECT task_id, solved, created_at FROM attempts WHERE role = 'solver' AND task_id IS NOT NULL "
            "ORDER BY id"
        ).columns(task_id=sa.String(), solved=sa.Boolean(), created_at=sa.DateTime(timezone=True))
    )
    for tid, solved, created_at in attempts:
        row = rows[tid]
        row[0] += 1
        row[1] += int(bool(solved))
        row[2] = (row[2] + ("1" if solved else "0"))[-RECENT_WINDOW:]
        row[3] = created_at
    if rows:
        op.bulk_insert(
            stats,
            [
                {
                    "task_id": tid,
                    "status": status,
                    "rand_key": random.random(),
                    "repo": repo,
                    "family": family,
                    "diff_hash": diff_hash,
                    "attempts": rows[tid][0],
                    "solves": rows[tid][1],
                    "recent": rows[tid][2],
                    "last_attempt_at": rows[tid][3],
                }
                for tid, status, repo, family, diff_hash in tasks
            ],
        )


def downgrade() -> None:
    op.drop_index("ix_task_stats_unseen", table_name="task_stats")
    op.drop_index("ix_task_stats_sampling", table_name="task_stats")
    op.drop_table("task_stats")
