"""The checkpoint and the per-table positions as rows of ``_mysql_cdc`` (``schema``).

Functions of a DB-API connection (PyMySQL), so the merge job writes them inside the transaction
that applies the rows they cover, and the Airflow side reads them through ``MySQLStateStore``.
"""

from __future__ import annotations

from ..contracts import COPYING, DONE, BinlogPosition, Checkpoint, TablePosition, TablePositions
from .schema import CHECKPOINT_TABLE, TABLE_POSITION_TABLE, ensure_state_tables, is_absent  # noqa: F401 (ensure_state_tables: for callers)


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
        if is_absent(exc):
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
        if is_absent(exc):
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
    ensure_state_tables(conn)
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
    ensure_state_tables(conn)
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


def initialize_checkpoint(conn, first: Checkpoint) -> Checkpoint:
    """Insert ``first`` unless the pipeline has a checkpoint, under the row's lock (two first runs
    racing, a manual trigger beside the scheduled one, must not let the later one move a checkpoint
    the earlier merge advanced); returns the one in force."""
    ensure_state_tables(conn)
    conn.begin()
    try:
        existing = read_checkpoint(conn, first.pipeline, for_update=True)
        if existing is None:
            write_checkpoint(conn, first)
        conn.commit()
    except BaseException:
        conn.rollback()
        raise
    return existing or read_checkpoint(conn, first.pipeline)


def move_checkpoint(conn, expected: Checkpoint, to: Checkpoint) -> bool:
    """Compare-and-set under the row's lock: ``to`` if the checkpoint is still ``expected``."""
    conn.begin()
    try:
        current = read_checkpoint(conn, expected.pipeline, for_update=True)
        if current is None or (current.position, current.pending_ddl_pos) != (
                expected.position, expected.pending_ddl_pos):
            conn.rollback()
            return False
        write_checkpoint(conn, to)
        conn.commit()
        return True
    except BaseException:
        conn.rollback()
        raise
