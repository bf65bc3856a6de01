"""Attempts get a `source`: "policy" (an episode of the trained policy) or "demo" (a scripted expert's
demonstration, `selfplay demos`). Existing attempts are policy attempts.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("attempts") as batch:
        batch.add_column(sa.Column("source", sa.String(length=20), nullable=False, server_default="policy"))


def downgrade() -> None:
    with op.batch_alter_table("attempts") as batch:
        batch.drop_column("source")
