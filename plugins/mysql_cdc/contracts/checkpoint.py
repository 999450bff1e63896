"""The checkpoint: one row per pipeline in the follower, written in the follower transaction
that applies the rows it covers.

Besides the last applied position it carries a *pending DDL* marker. DDL commits implicitly on
MySQL/MariaDB, so it cannot share a transaction with the checkpoint. Before running a DDL the
merge job records the DDL's position and a fingerprint of the objects it touches; after it, the
checkpoint moves past the DDL. A retry that finds the marker compares fingerprints to tell whether
the statement already ran, so it is neither lost nor run twice.

Functions here take any DB-API connection (PyMySQL on both the Airflow side and the Spark job).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from .position import BinlogPosition

CHECKPOINT_SCHEMA = "_mysql_cdc"
CHECKPOINT_TABLE = f"`{CHECKPOINT_SCHEMA}`.`checkpoint`"

CREATE_SQL = (
    f"CREATE DATABASE IF NOT EXISTS `{CHECKPOINT_SCHEMA}`",
    f"""CREATE TABLE IF NOT EXISTS {CHECKPOINT_TABLE} (
        pipeline VARCHAR(190) NOT NULL PRIMARY KEY,
        binlog_file VARCHAR(255) NOT NULL,
        binlog_pos BIGINT UNSIGNED NOT NULL,
        gtid VARCHAR(255) NULL,
        batch_id VARCHAR(255) NULL,
        pending_ddl_pos VARCHAR(300) NULL,
        pending_ddl_fingerprint VARCHAR(64) NULL,
        updated_at DATETIME(6) NOT NULL,
        gtid_set TEXT NULL,
        leader_id VARCHAR(64) NULL
    ) ENGINE=InnoDB""",
)
# columns added since the table was first created: (name, definition); ensure_checkpoint_table
# adds any that an older checkpoint table lacks
_ADDED_COLUMNS = (("gtid_set", "TEXT NULL"), ("leader_id", "VARCHAR(64) NULL"))


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


def ensure_checkpoint_table(conn) -> None:
    with conn.cursor() as cur:
        for stmt in CREATE_SQL:
            cur.execute(stmt)
        cur.execute(
            "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = 'checkpoint'",
            (CHECKPOINT_SCHEMA,),
        )
        present = {row[0] if not isinstance(row, dict) else row["COLUMN_NAME"] for row in cur.fetchall()}
        for name, definition in _ADDED_COLUMNS:
            if name not in present:
                cur.execute(f"ALTER TABLE {CHECKPOINT_TABLE} ADD COLUMN {name} {definition}")


# "No checkpoint yet" as the server says it: the row, the table or the whole schema is absent.
# MariaDB answers a query on a missing schema with 1146 (no such table), MySQL with 1049 (unknown
# database); PyMySQL raises 1146 as ProgrammingError and 1049 as OperationalError, so the test is
# on the code, never on the exception class.
_ER_BAD_DB, _ER_NO_SUCH_TABLE = 1049, 1146


def _absent(exc: Exception) -> bool:
    return bool(exc.args) and exc.args[0] in (_ER_BAD_DB, _ER_NO_SUCH_TABLE)


def rows_if_present(conn, sql: str, args: tuple = ()) -> list[tuple]:
    """The rows of a query on the ``_mysql_cdc`` tables, or [] when the table (or the schema) does
    not exist yet: the follower of a pipeline that never wrote it."""
    import pymysql

    try:
        with conn.cursor() as cur:
            cur.execute(sql, args)
            return [tuple(r.values()) if isinstance(r, dict) else r for r in cur.fetchall()]
    except pymysql.MySQLError as exc:
        if _absent(exc):
            return []
        raise


def read_checkpoint(conn, pipeline: str, *, for_update: bool = False) -> Checkpoint | None:
    """The pipeline's checkpoint, or None when it has never run on this follower (no row, no
    checkpoint table, no ``_mysql_cdc`` schema). The one reader of the checkpoint, for the
    Airflow side and the merge job alike. ``for_update`` locks the row for the rest of the
    caller's transaction, so two merges of one pipeline serialize."""
    import pymysql  # here: the contracts import nothing heavy at module level

    sql = (
        f"SELECT pipeline, binlog_file, binlog_pos, gtid, batch_id, pending_ddl_pos, "
        f"pending_ddl_fingerprint, updated_at, gtid_set, leader_id FROM {CHECKPOINT_TABLE} WHERE pipeline = %s"
    )
    if for_update:
        sql += " FOR UPDATE"
    try:
        with conn.cursor() as cur:
            cur.execute(sql, (pipeline,))
            row = cur.fetchone()
    except pymysql.MySQLError as exc:
        if _absent(exc):
            return None
        raise
    if row is None:
        return None
    row = tuple(row.values()) if isinstance(row, dict) else row
    return Checkpoint(
        pipeline=row[0],
        position=BinlogPosition(row[1], int(row[2])),
        gtid=row[3],
        batch_id=row[4],
        pending_ddl_pos=BinlogPosition.parse(row[5]) if row[5] else None,
        pending_ddl_fingerprint=row[6],
        updated_at=row[7],
        gtid_set=row[8],
        leader_id=row[9],
    )


def write_checkpoint(conn, checkpoint: Checkpoint) -> None:
    """Upsert the checkpoint inside the caller's transaction (the caller commits)."""
    with conn.cursor() as cur:
        cur.execute(
            f"INSERT INTO {CHECKPOINT_TABLE} (pipeline, binlog_file, binlog_pos, gtid, batch_id, "
            "pending_ddl_pos, pending_ddl_fingerprint, updated_at, gtid_set, leader_id) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, UTC_TIMESTAMP(6), %s, %s) "
            "ON DUPLICATE KEY UPDATE binlog_file = VALUES(binlog_file), binlog_pos = VALUES(binlog_pos), "
            "gtid = VALUES(gtid), batch_id = VALUES(batch_id), pending_ddl_pos = VALUES(pending_ddl_pos), "
            "pending_ddl_fingerprint = VALUES(pending_ddl_fingerprint), updated_at = VALUES(updated_at), "
            "gtid_set = VALUES(gtid_set), leader_id = VALUES(leader_id)",
            (
                checkpoint.pipeline,
                checkpoint.position.file,
                checkpoint.position.offset,
                checkpoint.gtid,
                checkpoint.batch_id,
                str(checkpoint.pending_ddl_pos) if checkpoint.pending_ddl_pos else None,
                checkpoint.pending_ddl_fingerprint,
                checkpoint.gtid_set,
                checkpoint.leader_id,
            ),
        )


# -- per-table positions ------------------------------------------------------------------------

TABLE_POSITION_TABLE = f"`{CHECKPOINT_SCHEMA}`.`table_position`"
# A table position's states. ``copying``: the snapshot batch that copies the table is not applied
# yet. ``swapping``: its copy is complete in the follower's shadow table, and the shadow is being
# (or has been) renamed into the table's place; if the shadow is gone, the swap happened
# (``apply.follower``). ``done``: the follower's table holds the copy.
COPYING, SWAPPING, DONE = "copying", "swapping", "done"

CREATE_SQL = CREATE_SQL + (
    f"""CREATE TABLE IF NOT EXISTS {TABLE_POSITION_TABLE} (
        pipeline VARCHAR(190) NOT NULL,
        db_name VARCHAR(64) NOT NULL,
        table_name VARCHAR(64) NOT NULL,
        binlog_file VARCHAR(255) NOT NULL,
        binlog_pos BIGINT UNSIGNED NOT NULL,
        batch_id VARCHAR(255) NOT NULL,
        state VARCHAR(16) NOT NULL,
        updated_at DATETIME(6) NOT NULL,
        PRIMARY KEY (pipeline, db_name, table_name)
    ) ENGINE=InnoDB""",
)


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


def read_table_positions(conn, pipeline: str) -> TablePositions:
    import pymysql

    try:
        with conn.cursor() as cur:
            cur.execute(
                f"SELECT db_name, table_name, binlog_file, binlog_pos, batch_id, state FROM {TABLE_POSITION_TABLE} "
                "WHERE pipeline = %s", (pipeline,),
            )
            rows = cur.fetchall()
    except pymysql.MySQLError as exc:
        if _absent(exc):
            return TablePositions()
        raise
    return TablePositions({
        (r[0], r[1]): TablePosition(r[0], r[1], BinlogPosition(r[2], int(r[3])), r[4], r[5]) for r in rows
    })


def write_table_position(conn, pipeline: str, position: TablePosition) -> None:
    """Upsert one table's position inside the caller's transaction (the caller commits)."""
    with conn.cursor() as cur:
        cur.execute(
            f"INSERT INTO {TABLE_POSITION_TABLE} (pipeline, db_name, table_name, binlog_file, binlog_pos, batch_id, "
            "state, updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s, UTC_TIMESTAMP(6)) "
            "ON DUPLICATE KEY UPDATE binlog_file = VALUES(binlog_file), binlog_pos = VALUES(binlog_pos), "
            "batch_id = VALUES(batch_id), state = VALUES(state), updated_at = VALUES(updated_at)",
            (pipeline, position.database, position.table, position.position.file, position.position.offset,
             position.batch_id, position.state),
        )


def _drop_table_positions(conn, pipeline: str) -> None:
    with conn.cursor() as cur:
        cur.execute(f"DELETE FROM {TABLE_POSITION_TABLE} WHERE pipeline = %s", (pipeline,))


def rebase_checkpoint(conn, expected: Checkpoint, position: BinlogPosition, leader_id: str) -> list[TablePosition]:
    """Express the checkpoint in another leader's binlog (a failover: ``position`` is where its
    GTID set is on that leader), in one transaction, if it is still ``expected``. The follower's
    rows do not change, only the coordinates of the place they stand at. Table positions are
    positions on the old leader: they are removed; those a copy had put ahead of the checkpoint
    (or whose copy was unfinished) are returned: their tables must be copied again."""
    ensure_checkpoint_table(conn)
    conn.begin()
    try:
        current = read_checkpoint(conn, expected.pipeline, for_update=True)
        if current is None or (current.position, current.leader_id) != (expected.position, expected.leader_id):
            raise RuntimeError(
                f"the checkpoint of pipeline {expected.pipeline!r} moved while it was being rebased onto the new "
                "leader (another run of the pipeline?); run it again"
            )
        ahead = [p for p in read_table_positions(conn, expected.pipeline).by_table.values()
                 if p.state != DONE or p.position > current.position]
        _drop_table_positions(conn, expected.pipeline)
        write_checkpoint(conn, Checkpoint(
            current.pipeline, position, current.gtid, current.batch_id, gtid_set=current.gtid_set,
            leader_id=leader_id,
        ))
        conn.commit()
    except BaseException:
        conn.rollback()
        raise
    return ahead


def start_snapshot(conn, batch) -> Checkpoint:
    """Record that a snapshot batch (``contracts.ChangeBatch`` of snapshot segments) is to be
    applied, in one transaction: the pipeline's checkpoint at the snapshot's position when it has
    none yet (a pipeline whose first run is a snapshot), and each copied table's position marked
    ``copying``, which holds back every stream batch until the merge has applied the copy.
    Returns the checkpoint in force."""
    ensure_checkpoint_table(conn)
    conn.begin()
    try:
        checkpoint = read_checkpoint(conn, batch.pipeline, for_update=True)
        if checkpoint is None:
            checkpoint = Checkpoint(batch.pipeline, batch.start, None, batch.batch_id,
                                    gtid_set=batch.start_gtid_set, leader_id=batch.leader_id)
            write_checkpoint(conn, checkpoint)
        if batch.segments and all(s.full for s in batch.segments):
            # a copy of every table gives every table its position: none of before stays
            _drop_table_positions(conn, batch.pipeline)
        for segment in batch.segments:
            write_table_position(conn, batch.pipeline, TablePosition(
                segment.database, segment.table, segment.at, batch.batch_id, COPYING))
        conn.commit()
    except BaseException:
        conn.rollback()
        raise
    return checkpoint
