"""The batch history: one row per pipeline run that read a batch, beside the checkpoint.

The extract task writes the row (range, rows, seconds, the commit time of the range's last
transaction); the merge task completes it (rows written, seconds); a failed task marks it. It is
what the CDC page charts and what ``GET /cdc/api/pipelines`` reports as ``last_batch``; the lag
figures take the commit time of the last applied transaction from it (``monitor.lag``).

Every failed try of a run's tasks is kept beside it (``failed_tries``), the ones Airflow retried
as well as the last, so a run that succeeded on its third try still shows why the first two
failed; ``read_history`` attaches them to their run's record.

The history is a record of runs, not a part of the follower's state: nothing reads it to decide
what to apply (the checkpoint alone does). The state store keeps it (``mysql_cdc.state_store``).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, fields

EXTRACTED, MERGED, FAILED = "extracted", "merged", "failed"


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
