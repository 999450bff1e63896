"""The checkpoint: where a follower stands (one per pipeline), and where its copied tables stand.

The merge job moves it in the same commit as the follower rows it covers; where it is kept is the
state store's business (``mysql_cdc.state_store``), this module says what it is.

Besides the last applied position it carries a *pending DDL* marker. DDL commits implicitly on
MySQL/MariaDB, so it cannot share a transaction with the checkpoint. Before running a DDL the
merge job records the DDL's position and a fingerprint of the objects it touches; after it, the
checkpoint moves past the DDL. A retry that finds the marker compares fingerprints to tell whether
the statement already ran, so it is neither lost nor run twice.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from .position import BinlogPosition

# The project's own schema on a MySQL server: a MySQL follower's state, the leader's heartbeat
# table. Capture never mirrors it.
RESERVED_SCHEMA = "_mysql_cdc"


@dataclass(frozen=True)
class Checkpoint:
    pipeline: str
    position: BinlogPosition
    gtid: str | None = None
    batch_id: str | None = None
    pending_ddl_pos: BinlogPosition | None = None
    pending_ddl_fingerprint: str | None = None
    updated_at: dt.datetime | None = None
    # the leader's executed GTID set at ``position`` and the server ``position`` is on: after a
    # failover, the set finds the same place on the new leader (capture.failover)
    gtid_set: str | None = None
    leader_id: str | None = None


# -- per-table positions ------------------------------------------------------------------------

# A table position's states. ``copying``: the snapshot batch that copies the table is not applied
# yet. ``swapping``: its copy is complete in the follower's shadow table, and the shadow is being
# (or has been) renamed into the table's place; if the shadow is gone, the swap happened
# (``mysql_cdc.kinds.mysql.sink``). ``done``: the follower's table holds the copy.
COPYING, SWAPPING, DONE = "copying", "swapping", "done"


@dataclass(frozen=True)
class TablePosition:
    """A table copied (``done``) or being copied (``copying``, ``swapping``) by a snapshot at
    ``position``: once done, the follower's rows of it equal the leader's as of ``position``, so
    its changes before ``position`` are not applied again."""

    database: str
    table: str
    position: BinlogPosition
    batch_id: str
    state: str = DONE


@dataclass(frozen=True)
class TablePositions:
    """The per-table positions of one pipeline."""

    by_table: dict = None  # (database, table) -> TablePosition

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_table", dict(self.by_table or {}))

    def of(self, database: str, table: str) -> TablePosition | None:
        return self.by_table.get((database, table))

    def copied_at(self, database: str, table: str) -> BinlogPosition | None:
        """Where a finished copy of the table stands, or None (the pipeline's position rules)."""
        found = self.of(database, table)
        return found.position if found is not None and found.state == DONE else None

    def pending_batch(self) -> str | None:
        """The snapshot batch whose copy has not finished, if any."""
        return next((p.batch_id for p in self.by_table.values() if p.state != DONE), None)

    def with_copies(self, batch) -> "TablePositions":
        """The positions as they stand once the snapshot ``batch`` (``contracts.ChangeBatch``) is
        applied: each of its tables done at its copy's position."""
        copied = {(s.database, s.table): TablePosition(s.database, s.table, s.at, batch.batch_id, DONE)
                  for s in batch.segments}
        return TablePositions({**self.by_table, **copied})
