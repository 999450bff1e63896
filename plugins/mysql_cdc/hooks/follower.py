"""The follower: the pipeline's checkpoint row, read and created from the Airflow side.

Only the merge job writes follower data. The Airflow side creates the checkpoint before the first
merge (the job requires it) and moves it across batches that captured nothing.
"""

from __future__ import annotations

from ..contracts import (
    TablePosition,
    TablePositions,
    rebase_checkpoint,
    read_table_positions,
    start_snapshot,
    BinlogPosition,
    ChangeBatch,
    Checkpoint,
    ensure_checkpoint_table,
    read_checkpoint,
    write_checkpoint,
)
from ..contracts import history
from ..settings import MySQLSettings
from .connections import MySQLConnectionHook


def checkpoint_of(settings: MySQLSettings, pipeline: str) -> Checkpoint | None:
    """The pipeline's checkpoint on the follower; None before the first run created it.

    A plain function of settings (not a hook method) so the trigger can call it in a worker
    thread without touching Airflow's connection machinery there.
    """
    conn = connect_follower(settings)
    try:
        return read_checkpoint(conn, pipeline)
    finally:
        conn.close()


def table_positions_of(settings: MySQLSettings, pipeline: str) -> TablePositions:
    """The pipeline's per-table positions on the follower (none before any snapshot)."""
    conn = connect_follower(settings)
    try:
        return read_table_positions(conn, pipeline)
    finally:
        conn.close()


def connect_follower(settings: MySQLSettings):
    """A follower session; a connection failure says it is the follower."""
    import pymysql

    try:
        return settings.connect()
    except pymysql.err.OperationalError as exc:
        raise ConnectionError(
            f"cannot connect to {settings.describe('follower')}: {exc.args[-1]}"
        ) from None


class FollowerHook(MySQLConnectionHook):
    """The pipeline's checkpoint row in the follower."""

    default_conn_name = "mysql_follower"
    hook_name = "MySQL CDC follower"
    role = "follower"

    def read_checkpoint(self, pipeline: str) -> Checkpoint | None:
        return checkpoint_of(self.settings, pipeline)

    def initialize_checkpoint(self, pipeline: str, position: BinlogPosition, gtid_set: str | None = None,
                              leader_id: str | None = None) -> Checkpoint:
        """Create the checkpoint at ``position`` unless one exists; returns the one in force.

        Insert-if-absent under a row lock: two first runs racing (a manual trigger beside the
        scheduled one) must not let the later one move a checkpoint the earlier merge advanced.
        """
        conn = connect_follower(self.settings)
        try:
            ensure_checkpoint_table(conn)
            conn.begin()
            existing = read_checkpoint(conn, pipeline, for_update=True)
            if existing is None:
                write_checkpoint(conn, Checkpoint(pipeline=pipeline, position=position, gtid_set=gtid_set,
                                                  leader_id=leader_id))
            conn.commit()
        finally:
            conn.close()
        if existing is not None:
            self.log.info("pipeline %s already has checkpoint %s; keeping it", pipeline, existing.position)
            return existing
        self.log.info("pipeline %s starts at %s (checkpoint created)", pipeline, position)
        return self.read_checkpoint(pipeline)

    def advance_over_empty_batch(self, batch: ChangeBatch) -> bool:
        """Move the checkpoint across a batch that captured nothing, without starting Spark.

        A batch with no segments changes no follower row, so "checkpoint in the same transaction
        as the rows it covers" holds trivially. Compare-and-set: only when the checkpoint sits
        exactly at the batch start with no DDL in flight; otherwise False and the merge job decides.
        """
        conn = connect_follower(self.settings)
        try:
            conn.begin()
            current = read_checkpoint(conn, batch.pipeline, for_update=True)
            if (
                batch.segments
                or current is None
                or current.position != batch.start
                or current.pending_ddl_pos is not None
            ):
                conn.rollback()
                return False
            write_checkpoint(
                conn,
                Checkpoint(
                    pipeline=batch.pipeline,
                    position=batch.end,
                    gtid=batch.end_gtid or current.gtid,
                    batch_id=batch.batch_id,
                    gtid_set=batch.end_gtid_set,
                    leader_id=batch.leader_id,
                ),
            )
            conn.commit()
            return True
        finally:
            conn.close()

    def table_positions(self, pipeline: str) -> TablePositions:
        return table_positions_of(self.settings, pipeline)

    def start_snapshot(self, batch: ChangeBatch) -> Checkpoint:
        """Record a snapshot batch as unfinished (and a first checkpoint at its position)."""
        conn = connect_follower(self.settings)
        try:
            return start_snapshot(conn, batch)
        finally:
            conn.close()

    def rebase(self, checkpoint: Checkpoint, position: BinlogPosition, leader_id: str) -> list[TablePosition]:
        """Move the checkpoint onto a new leader's binlog (``contracts.rebase_checkpoint``);
        returns the tables whose copies must be made again there."""
        conn = connect_follower(self.settings)
        try:
            return rebase_checkpoint(conn, checkpoint, position, leader_id)
        finally:
            conn.close()

    # -- the batch history (contracts.history) ------------------------------------------------

    def _history(self, write, *args) -> None:
        conn = connect_follower(self.settings)
        try:
            write(conn, *args)
        finally:
            conn.close()

    def record_extracted(self, record: history.BatchRecord) -> None:
        self._history(history.record_extracted, record)

    def record_merged(self, pipeline: str, run_id: str, net_rows: int, seconds: float) -> None:
        self._history(history.record_merged, pipeline, run_id, net_rows, seconds)

    def record_failed(self, pipeline: str, run_id: str, kind: str, error: str) -> None:
        self._history(history.record_failed, pipeline, run_id, kind, error)

    def record_failed_try(self, failed: history.FailedTry) -> None:
        self._history(history.record_failed_try, failed)
