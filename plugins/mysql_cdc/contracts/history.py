"""The batch history: one row per pipeline run that read a batch, beside the checkpoint.

The extract task writes the row (range, rows, seconds, the commit time of the range's last
transaction); the merge task completes it (rows written, seconds); a failed task marks it. It is
what the CDC page charts and what ``GET /cdc/api/pipelines`` reports as ``last_batch``; the lag
figures take the commit time of the last applied transaction from it (``monitor.lag``).

Every failed try of a run's tasks is kept beside it (``failed_tries``), the ones Airflow retried
as well as the last, so a run that succeeded on its third try still shows why the first two
failed; ``read_history`` attaches them to their run's record.

The history is a record of runs, not a part of the follower's state: nothing reads it to decide
what to apply (the checkpoint alone does), so it is written in its own short transactions.
Functions take any DB-API connection (PyMySQL) in autocommit or not; each commits its write.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, fields, replace

from .checkpoint import CHECKPOINT_SCHEMA, rows_if_present

HISTORY_TABLE = f"`{CHECKPOINT_SCHEMA}`.`batch_history`"
TRIES_TABLE = f"`{CHECKPOINT_SCHEMA}`.`failed_tries`"
EXTRACTED, MERGED, FAILED = "extracted", "merged", "failed"

CREATE_SQL = (
    f"CREATE DATABASE IF NOT EXISTS `{CHECKPOINT_SCHEMA}`",
    f"""CREATE TABLE IF NOT EXISTS {HISTORY_TABLE} (
        id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
        pipeline VARCHAR(190) NOT NULL,
        run_id VARCHAR(250) NOT NULL,
        batch_id VARCHAR(255) NULL,
        kind VARCHAR(16) NOT NULL,
        start_position VARCHAR(300) NULL,
        end_position VARCHAR(300) NULL,
        end_time DATETIME(6) NULL,
        rows_in BIGINT NOT NULL DEFAULT 0,
        net_rows BIGINT NULL,
        extract_seconds DOUBLE NULL,
        merge_seconds DOUBLE NULL,
        status VARCHAR(16) NOT NULL,
        error TEXT NULL,
        extracted_at DATETIME(6) NULL,
        merged_at DATETIME(6) NULL,
        UNIQUE KEY run (pipeline, run_id),
        KEY recent (pipeline, id)
    ) ENGINE=InnoDB""",
    f"""CREATE TABLE IF NOT EXISTS {TRIES_TABLE} (
        id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
        pipeline VARCHAR(190) NOT NULL,
        run_id VARCHAR(250) NOT NULL,
        task_id VARCHAR(250) NOT NULL,
        try_number INT NOT NULL,
        error TEXT NOT NULL,
        failed_at DATETIME(6) NOT NULL,
        UNIQUE KEY one_try (pipeline, run_id, task_id, try_number)
    ) ENGINE=InnoDB""",
)


@dataclass(frozen=True)
class FailedTry:
    """One failed try of a run's task: ``error`` starts with the cause."""

    pipeline: str
    run_id: str
    task_id: str
    try_number: int
    error: str
    failed_at: dt.datetime | None = None

    def to_json(self) -> dict:
        body = {f.name: getattr(self, f.name) for f in fields(self)}
        body["failed_at"] = _iso(self.failed_at)
        return body


def _iso(value: dt.datetime | None) -> str | None:
    return value.replace(tzinfo=dt.timezone.utc).isoformat() if value else None


@dataclass(frozen=True)
class BatchRecord:
    """One run's batch. ``kind``: ``stream`` (the next range), ``replay`` (a range given by the
    run) or ``snapshot`` (a copy). ``end_time``: the leader's commit time of the range's last
    transaction, UTC (None for a copy or an empty range). ``net_rows``: the rows the merge
    inserted, updated and deleted after netting the changes per key."""

    pipeline: str
    run_id: str
    kind: str
    status: str
    batch_id: str | None = None
    start_position: str | None = None
    end_position: str | None = None
    end_time: dt.datetime | None = None
    rows_in: int = 0
    net_rows: int | None = None
    extract_seconds: float | None = None
    merge_seconds: float | None = None
    error: str | None = None
    extracted_at: dt.datetime | None = None
    merged_at: dt.datetime | None = None
    failed_tries: tuple[FailedTry, ...] = ()  # oldest first

    def rate(self, seconds: float | None) -> float | None:
        """Rows per second of one step, when it took measurable time."""
        return round(self.rows_in / seconds, 1) if seconds else None

    def to_json(self) -> dict:
        body = {f.name: getattr(self, f.name) for f in fields(self)}
        for name in ("end_time", "extracted_at", "merged_at"):
            body[name] = _iso(body[name])
        body["failed_tries"] = [t.to_json() for t in self.failed_tries]
        body["extract_rows_per_second"] = self.rate(self.extract_seconds)
        body["merge_rows_per_second"] = self.rate(self.merge_seconds)
        return body


_COLUMNS = tuple(f.name for f in fields(BatchRecord) if f.name != "failed_tries")
_TRY_COLUMNS = tuple(f.name for f in fields(FailedTry))


def ensure_history_table(conn) -> None:
    with conn.cursor() as cur:
        for stmt in CREATE_SQL:
            cur.execute(stmt)


def _write(conn, sql: str, args: tuple) -> None:
    """One write to the history (its table created on first use), committed at once."""
    ensure_history_table(conn)
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
