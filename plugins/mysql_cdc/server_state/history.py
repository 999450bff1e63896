"""The batch history, the failed tries and the verification results as rows of ``_mysql_cdc``.

Records of runs, not state the merge decides by (the checkpoint alone decides), so each write is
its own short transaction, committed at once; the tables are created on first write.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import fields, replace

from ..contracts.history import EXTRACTED, FAILED, MERGED, BatchRecord, FailedTry
from ..contracts.verification import VerificationResult
from .schema import HISTORY_TABLE, TRIES_TABLE, VERIFICATION_TABLE, ensure_state_tables, rows_if_present

_COLUMNS = tuple(f.name for f in fields(BatchRecord) if f.name != "failed_tries")
_TRY_COLUMNS = tuple(f.name for f in fields(FailedTry))


def _write(conn, sql: str, args: tuple) -> None:
    """One write to the history (its table created on first use), committed at once."""
    ensure_state_tables(conn)
    with conn.cursor() as cur:
        cur.execute(sql, args)
    conn.commit()


def record_extracted(conn, record: BatchRecord) -> None:
    """The extract task's row; a retried run (same run id) overwrites its earlier attempt."""
    _write(
        conn,
        f"INSERT INTO {HISTORY_TABLE} (pipeline, run_id, batch_id, kind, start_position, end_position, end_time, "
            "rows_in, extract_seconds, status, extracted_at) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, UTC_TIMESTAMP(6)) "
            "ON DUPLICATE KEY UPDATE batch_id = VALUES(batch_id), kind = VALUES(kind), "
            "start_position = VALUES(start_position), end_position = VALUES(end_position), "
            "end_time = VALUES(end_time), rows_in = VALUES(rows_in), extract_seconds = VALUES(extract_seconds), "
            "status = VALUES(status), error = NULL, extracted_at = VALUES(extracted_at), net_rows = NULL, "
            "merge_seconds = NULL, merged_at = NULL",
        (record.pipeline, record.run_id, record.batch_id, record.kind, record.start_position,
         record.end_position, record.end_time, record.rows_in, record.extract_seconds, EXTRACTED),
    )


def record_merged(conn, pipeline: str, run_id: str, net_rows: int, merge_seconds: float) -> None:
    _write(conn, f"UPDATE {HISTORY_TABLE} SET status = %s, net_rows = %s, merge_seconds = %s, error = NULL, "
           "merged_at = UTC_TIMESTAMP(6) WHERE pipeline = %s AND run_id = %s",
           (MERGED, net_rows, merge_seconds, pipeline, run_id))


def record_failed(conn, pipeline: str, run_id: str, kind: str, error: str) -> None:
    """A task of the run failed: its row (created if the extract never wrote one) says why."""
    _write(conn, f"INSERT INTO {HISTORY_TABLE} (pipeline, run_id, kind, status, error) VALUES (%s, %s, %s, %s, %s) "
           "ON DUPLICATE KEY UPDATE status = VALUES(status), error = VALUES(error)",
           (pipeline, run_id, kind, FAILED, error[:4000]))


def record_failed_try(conn, failed: FailedTry) -> None:
    """A try of a run's task failed (retried or not); the same try recorded again keeps the
    latest words."""
    _write(conn, f"INSERT INTO {TRIES_TABLE} (pipeline, run_id, task_id, try_number, error, failed_at) "
           "VALUES (%s, %s, %s, %s, %s, UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE error = VALUES(error)",
           (failed.pipeline, failed.run_id, failed.task_id, failed.try_number, failed.error[:4000]))


def read_failed_tries(conn, pipeline: str, run_ids: tuple[str, ...] | None = None) -> list[FailedTry]:
    """The pipeline's failed tries (of ``run_ids`` only, when given), oldest first."""
    where, args = "pipeline = %s", [pipeline]
    if run_ids is not None:
        if not run_ids:
            return []
        where += f" AND run_id IN ({', '.join(['%s'] * len(run_ids))})"
        args.extend(run_ids)
    rows = rows_if_present(conn, f"SELECT {', '.join(_TRY_COLUMNS)} FROM {TRIES_TABLE} WHERE {where} ORDER BY id",
                           tuple(args))
    return [FailedTry(**dict(zip(_TRY_COLUMNS, row))) for row in rows]


def read_history(conn, pipeline: str, limit: int = 50) -> list[BatchRecord]:
    """The pipeline's latest runs, newest first ([] before its first), each with its failed
    tries."""
    rows = rows_if_present(conn, f"SELECT {', '.join(_COLUMNS)} FROM {HISTORY_TABLE} WHERE pipeline = %s "
                           "ORDER BY id DESC LIMIT %s", (pipeline, limit))
    records = [BatchRecord(**dict(zip(_COLUMNS, row))) for row in rows]
    tries: dict[str, list[FailedTry]] = {}
    for failed in read_failed_tries(conn, pipeline, tuple(r.run_id for r in records)):
        tries.setdefault(failed.run_id, []).append(failed)
    return [replace(r, failed_tries=tuple(tries.get(r.run_id, ()))) for r in records]


def last_applied_time(conn, pipeline: str) -> dt.datetime | None:
    """The leader's commit time (UTC) of the last transaction the follower applied, as far as the
    history knows it: the ``end_time`` of the latest merged batch of the stream. Replays (ranges
    at or before the checkpoint) are left out, and so are copies, which have no commit time."""
    rows = rows_if_present(conn, f"SELECT end_time FROM {HISTORY_TABLE} WHERE pipeline = %s AND status = %s AND "
                           "kind = 'stream' AND end_time IS NOT NULL ORDER BY merged_at DESC, id DESC LIMIT 1",
                           (pipeline, MERGED))
    return rows[0][0] if rows else None


def record_verification(conn, result: VerificationResult) -> None:
    ensure_state_tables(conn)
    with conn.cursor() as cur:
        cur.execute(
            f"INSERT INTO {VERIFICATION_TABLE} (pipeline, started_at, finished_at, status, result) "
            "VALUES (%s, %s, %s, %s, %s)",
            (result.pipeline, result.started_at.replace(tzinfo=None), result.finished_at.replace(tzinfo=None),
             result.status, json.dumps(result.to_json())),
        )
    conn.commit()


def latest_verification(conn, pipeline: str) -> VerificationResult | None:
    rows = rows_if_present(conn, f"SELECT result FROM {VERIFICATION_TABLE} WHERE pipeline = %s ORDER BY id DESC "
                           "LIMIT 1", (pipeline,))
    return VerificationResult.from_json(json.loads(rows[0][0])) if rows else None
