"""Initial schema: repos, runs, checkpoints, artifacts, check results, tasks, attempts.

Revision ID: 0001
Revises: (none)
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "repos",
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("image", sa.String(length=400), nullable=True),
        sa.Column("base_commit", sa.String(length=80), nullable=True),
        sa.Column("version", sa.String(length=80), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_repos")),
    )
    op.create_table(
        "runs",
        sa.Column("run_id", sa.String(length=100), nullable=False),
        sa.Column("config", sa.Text(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("note", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("run_id", name=op.f("pk_runs")),
    )
    op.create_table(
        "artifacts",
        sa.Column("artifact_id", sa.String(length=100), nullable=False),
        sa.Column("repo", sa.String(length=200), nullable=False),
        sa.Column("test_script", sa.Text(), nullable=False),
        sa.Column("test_files", sa.Text(), nullable=False),
        sa.Column("test_parser", sa.Text(), nullable=False),
        sa.Column("bug_inject", sa.Text(), nullable=False),
        sa.Column("test_weaken", sa.Text(), nullable=False),
        sa.Column("hashes", sa.Text(), nullable=False),
        sa.Column("diff_hash", sa.String(length=64), nullable=False),
        sa.Column("origin", sa.String(length=20), nullable=False),
        sa.Column("order", sa.Integer(), nullable=False),
        sa.Column("strategy", sa.String(length=100), nullable=True),
        sa.Column("parent_id", sa.String(length=100), nullable=True),
        sa.Column("episode_id", sa.String(length=100), nullable=True),
        sa.Column("valid", sa.Boolean(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["parent_id"], ["artifacts.artifact_id"], name=op.f("fk_artifacts_parent_id_artifacts")
        ),
        sa.ForeignKeyConstraint(["repo"], ["repos.name"], name=op.f("fk_artifacts_repo_repos")),
        sa.PrimaryKeyConstraint("artifact_id", name=op.f("pk_artifacts")),
    )
    with op.batch_alter_table("artifacts", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_artifacts_repo_diff_hash"), ["repo", "diff_hash"], unique=False)

    op.create_table(
        "checkpoints",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.String(length=100), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.run_id"], name=op.f("fk_checkpoints_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_checkpoints")),
        sa.UniqueConstraint("run_id", "version", name=op.f("uq_checkpoints_run_id_version")),
    )
    op.create_table(
        "check_results",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("artifact_id", sa.String(length=100), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("passed", sa.Boolean(), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["artifact_id"],
            ["artifacts.artifact_id"],
            name=op.f("fk_check_results_artifact_id_artifacts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_check_results")),
    )
    with op.batch_alter_table("check_results", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_check_results_artifact_id"), ["artifact_id"], unique=False)

    op.create_table(
        "tasks",
        sa.Column("task_id", sa.String(length=200), nullable=False),
        sa.Column("repo", sa.String(length=200), nullable=False),
        sa.Column("artifact_id", sa.String(length=100), nullable=False),
        sa.Column("fail_to_pass", sa.Text(), nullable=False),
        sa.Column("pass_to_pass", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=10), nullable=False),
        sa.Column("origin", sa.String(length=20), nullable=False),
        sa.Column("order", sa.Integer(), nullable=False),
        sa.Column("parent_id", sa.String(length=200), nullable=True),
        sa.Column("pred_patch", sa.Text(), nullable=True),
        sa.Column("diff_hash", sa.String(length=64), nullable=False),
        sa.Column("family", sa.String(length=200), nullable=False),
        sa.Column("meta", sa.Text(), nullable=False),
        sa.Column("retired_reason", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["artifact_id"], ["artifacts.artifact_id"], name=op.f("fk_tasks_artifact_id_artifacts")
        ),
        sa.ForeignKeyConstraint(["parent_id"], ["tasks.task_id"], name=op.f("fk_tasks_parent_id_tasks")),
        sa.ForeignKeyConstraint(["repo"], ["repos.name"], name=op.f("fk_tasks_repo_repos")),
        sa.PrimaryKeyConstraint("task_id", name=op.f("pk_tasks")),
        sa.UniqueConstraint("repo", "diff_hash", name=op.f("uq_tasks_repo_diff_hash")),
    )
    with op.batch_alter_table("tasks", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_tasks_status_repo"), ["status", "repo"], unique=False)

    op.create_table(
        "attempts",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("task_id", sa.String(length=200), nullable=True),
        sa.Column("artifact_id", sa.String(length=100), nullable=True),
        sa.Column("run_id", sa.String(length=100), nullable=True),
        sa.Column("role", sa.String(length=20), nullable=False),
        sa.Column("policy_version", sa.Integer(), nullable=False),
        sa.Column("reward", sa.Float(), nullable=False),
        sa.Column("solved", sa.Boolean(), nullable=False),
        sa.Column("turns", sa.Integer(), nullable=False),
        sa.Column("tokens", sa.Integer(), nullable=False),
        sa.Column("termination", sa.String(length=40), nullable=False),
        sa.Column("trajectory_path", sa.Text(), nullable=True),
        sa.Column("wall_time", sa.Float(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["artifact_id"], ["artifacts.artifact_id"], name=op.f("fk_attempts_artifact_id_artifacts")
        ),
        sa.ForeignKeyConstraint(["run_id"], ["runs.run_id"], name=op.f("fk_attempts_run_id_runs")),
        sa.ForeignKeyConstraint(
            ["task_id"], ["tasks.task_id"], name=op.f("fk_attempts_task_id_tasks"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_attempts")),
    )
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_attempts_run_id_role"), ["run_id", "role"], unique=False)
        batch_op.create_index(batch_op.f("ix_attempts_task_id_id"), ["task_id", "id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_attempts_task_id_id"))
        batch_op.drop_index(batch_op.f("ix_attempts_run_id_role"))

    op.drop_table("attempts")
    with op.batch_alter_table("tasks", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_tasks_status_repo"))

    op.drop_table("tasks")
    with op.batch_alter_table("check_results", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_check_results_artifact_id"))

    op.drop_table("check_results")
    op.drop_table("checkpoints")
    with op.batch_alter_table("artifacts", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_artifacts_repo_diff_hash"))

    op.drop_table("artifacts")
    op.drop_table("runs")
    op.drop_table("repos")
