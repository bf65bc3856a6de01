"""An index on tasks.parent_id: `TaskStore.used_failed_patches(parent)` reads a task's higher-order
children once per failed attempt, which without it is a full scan of tasks (44 ms at 100k tasks on
SQLite, growing with the store).

Revision ID: 0004
Revises: 0003
"""

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_tasks_parent_id", "tasks", ["parent_id"])


def downgrade() -> None:
    op.drop_index("ix_tasks_parent_id", table_name="tasks")
