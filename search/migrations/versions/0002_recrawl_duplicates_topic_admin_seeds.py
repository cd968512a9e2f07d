"""recrawl, duplicates, topic, admin seeds

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02 16:04:29

Columns are only added (plain ALTER TABLE ADD COLUMN on SQLite, no table copy); the
self-referencing foreign key of clone_of_id is created where ALTER TABLE can add one.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "seeds",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("server_id", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["server_id"],
            ["servers.id"],
            name=op.f("fk_seeds_server_id_servers"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_seeds")),
        sa.UniqueConstraint("url", name=op.f("uq_seeds_url")),
    )
    op.create_index(op.f("ix_seeds_server_id"), "seeds", ["server_id"], unique=False)

    op.add_column("crawls", sa.Column("job_id", sa.String(length=64), nullable=True))
    op.add_column("crawls", sa.Column("log_file", sa.Text(), nullable=True))
    op.create_index(op.f("ix_crawls_job_id"), "crawls", ["job_id"], unique=False)

    op.add_column("documents", sa.Column("change_interval", sa.Integer(), nullable=True))
    op.add_column("documents", sa.Column("gone_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("documents", sa.Column("clone_of_id", sa.Integer(), nullable=True))
    op.add_column("documents", sa.Column("simhash", sa.BigInteger(), nullable=True))
    op.add_column("documents", sa.Column("topic_score", sa.Float(), nullable=True))
    op.create_index(op.f("ix_documents_clone_of_id"), "documents", ["clone_of_id"], unique=False)
    if op.get_bind().dialect.name != "sqlite":
        op.create_foreign_key(
            op.f("fk_documents_clone_of_id_documents"),
            "documents",
            "documents",
            ["clone_of_id"],
            ["id"],
            ondelete="SET NULL",
        )


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        op.drop_constraint(
            op.f("fk_documents_clone_of_id_documents"), "documents", type_="foreignkey"
        )
    op.drop_index(op.f("ix_documents_clone_of_id"), table_name="documents")
    for column in ("topic_score", "simhash", "clone_of_id", "gone_at", "change_interval"):
        op.drop_column("documents", column)
    op.drop_index(op.f("ix_crawls_job_id"), table_name="crawls")
    op.drop_column("crawls", "log_file")
    op.drop_column("crawls", "job_id")
    op.drop_index(op.f("ix_seeds_server_id"), table_name="seeds")
    op.drop_table("seeds")
