"""Incrementally maintained solve statistics (`task_stats`), backfilled from existing attempts.

Revision ID: 0002
Revises: 0001
"""
from alembic import op
import sqlalchemy as sa

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None

RECENT_WINDOW = 32  # frozen copy of models.RECENT_WINDOW at this revision


def upgrade() -> None:
    stats = op.create_table('task_stats',
    sa.Column('task_id', sa.String(length=200), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('solves', sa.Integer(), nullable=False),
    sa.Column('recent', sa.String(length=RECENT_WINDOW), nullable=False),
    sa.Column('last_attempt_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['task_id'], ['tasks.task_id'], name=op.f('fk_task_stats_task_id_tasks'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('task_id', name=op.f('pk_task_stats'))
    )
    # Backfill: one row per task, from its solver attempts in id order.
    bind = op.get_bind()
    rows = {tid: [0, 0, "", None] for (tid,) in bind.execute(sa.text("SELECT task_id FROM tasks"))}
    attempts = bind.execute(sa.text(
        "SELECT task_id, solved, created_at FROM attempts WHERE role = 'solver' AND task_id IS NOT NULL "
        "ORDER BY id").columns(task_id=sa.String(), solved=sa.Boolean(), created_at=sa.DateTime(timezone=True)))
    for tid, solved, created_at in attempts:
        row = rows[tid]
        row[0] += 1
        row[1] += int(bool(solved))
        row[2] = (row[2] + ("1" if solved else "0"))[-RECENT_WINDOW:]
        row[3] = created_at
    if rows:
        op.bulk_insert(stats, [{"task_id": tid, "attempts": a, "solves": s, "recent": r, "last_attempt_at": t}
                               for tid, (a, s, r, t) in rows.items()])


def downgrade() -> None:
    op.drop_table('task_stats')
