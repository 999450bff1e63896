"""The change row: one Parquet row per changed leader row.

A change row holds the table's own columns (the after-image of inserts and updates, the
before-image of deletes), typed natively, followed by the metadata columns below. Ordering by
``(_binlog_seq, _binlog_pos, _row_index)`` is the total order of the changes in a batch.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import pyarrow as pa

OP = "_op"  # 'I' insert, 'U' update, 'D' delete
BINLOG_FILE = "_binlog_file"  # file of the rows event
BINLOG_SEQ = "_binlog_seq"  # numeric sequence of that file, so ordering needs no string parsing
BINLOG_POS = "_binlog_pos"  # start offset of the rows event inside the file
ROW_INDEX = "_row_index"  # index of the row inside its event
COMMIT_TS = "_commit_ts"  # time the transaction was written to the binlog (UTC, second precision)
GTID = "_gtid"  # GTID of the transaction where the server has them
TXN = "_txn"  # FILE:OFFSET where the transaction begins: identifies it on any server, GTIDs or not
BEFORE = "_before"  # struct of the before-image, set for updates only

# The values of ``_op``. The merge's net rows reuse them: INSERT (the key is new to the follower),
# UPDATE (replace the follower's row), DELETE.
INSERT, UPDATE, DELETE = "I", "U", "D"
ORDER_COLUMNS = (BINLOG_SEQ, BINLOG_POS, ROW_INDEX)

# A *net row* (``merge.transforms.net_changes``, what every sink applies): the table's columns,
# then NET_OP (INSERT, UPDATE or DELETE, as above) and NET_COUNT (copies of the row it stands for:
# a keyless table's duplicates). The merge job's working columns all start with RESERVED_PREFIX,
# which no table column may.
RESERVED_PREFIX = "__mcdc_"
NET_OP = "__mcdc_op"
NET_COUNT = "__mcdc_n"

METADATA_FIELDS: tuple[pa.Field, ...] = (
    pa.field(OP, pa.string(), nullable=False),
    pa.field(BINLOG_FILE, pa.string(), nullable=False),
    pa.field(BINLOG_SEQ, pa.int64(), nullable=False),
    pa.field(BINLOG_POS, pa.int64(), nullable=False),
    pa.field(ROW_INDEX, pa.int32(), nullable=False),
    pa.field(COMMIT_TS, pa.timestamp("s", tz="UTC"), nullable=True),
    pa.field(GTID, pa.string(), nullable=True),
    pa.field(TXN, pa.string(), nullable=False),
)
METADATA_NAMES = frozenset(f.name for f in METADATA_FIELDS) | {BEFORE}


def refuse_metadata_names(table_fields: Sequence[pa.Field]) -> None:
    """A clear error if a table's column has a change-row metadata name."""
    clash = [f.name for f in table_fields if f.name in METADATA_NAMES]
    if clash:
        raise ValueError(
            f"column(s) {clash} collide with change-row metadata names; "
            "rename them on the leader or exclude the table"
        )


def before_field(table_fields: Iterable[pa.Field]) -> pa.Field:
    """The ``_before`` struct of these columns of a table. Its children are nullable: under a NULL
    struct (inserts, deletes) they hold nulls."""
    return pa.field(BEFORE, pa.struct([f.with_nullable(True) for f in table_fields]), nullable=True)


def change_row_schema(table_fields: Iterable[pa.Field]) -> pa.Schema:
    """The Arrow schema of a table's change rows: its columns, the metadata, the before struct."""
    table_fields = list(table_fields)
    refuse_metadata_names(table_fields)
    return pa.schema([*table_fields, *METADATA_FIELDS, before_field(table_fields)])
