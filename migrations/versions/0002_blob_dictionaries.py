"""Blobs may be compressed against a preset dictionary: another blob, named in ``blobs.dictionary``.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from evalstore.store.errors import StoreError

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A nullable column with no default: both dialects add it without rewriting the table, and the
    # append-only triggers (which reject UPDATE, not ALTER) stay as they are.
    op.add_column("blobs", sa.Column("dictionary", sa.String(64), nullable=True))


def downgrade() -> None:
    # Rows that need their dictionary cannot be rewritten (blobs are append-only), so a store that has
    # them cannot go back to a revision that would not know how to read them.
    bind = op.get_bind()
    count = bind.execute(sa.text("SELECT COUNT(*) FROM blobs WHERE dictionary IS NOT NULL")).scalar()
    if count:
        raise StoreError(
            f"cannot downgrade below revision 0002: {count} blobs are compressed against a dictionary, "
            "which revision 0001 cannot read, and blobs cannot be rewritten"
        )
    op.drop_column("blobs", "dictionary")
