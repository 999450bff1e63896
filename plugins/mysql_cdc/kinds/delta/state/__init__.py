"""A Delta Lake follower's state: small Delta tables beside the follower's tables, read and written
with delta-rs (``deltalake``), so neither the Airflow side nor a reader starts Spark to see it.

Under ``<location>/_mysql_cdc/<pipeline>/`` (``location.STATE_PREFIX``):

- ``checkpoint``: one row, replaced by every commit of the state (``StateRow``): the pipeline's
  position, its tables' positions, and every table's Delta version at that position, the
  **consistent cut** (``cut.read_cut``). Each replacement is one Delta commit, so the table's own
  history is the history of the checkpoint, and a reader sees the old row or the new one.
- ``history``, ``failed_tries``, ``verification``: records of runs, appended (an event per
  write, folded when read), as the MySQL store's tables hold them.

The merge job moves the checkpoint after it has committed every table of a segment (``kinds.delta.sink``):
a crash between a table's commit and the checkpoint's is finished by the retry, whose table
commits Delta skips (``txnAppId``/``txnVersion``), so the checkpoint then records the same versions.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from typing import Any, Mapping

from ....contracts import (
    COPYING, DONE, BinlogPosition, ChangeBatch, Checkpoint, TablePosition, TablePositions,
)
from ....contracts.history import EXTRACTED, FAILED, MERGED, BatchRecord, FailedTry
from ....contracts.verification import VerificationResult
from ....state_store import StateStore
from .location import LakeLocation
from .tables import StateRow, StateTables


class DeltaStateStore(StateStore):
    kind = "delta"

    def __init__(self, location: LakeLocation):
        self.location = location
        self.tables = StateTables(location)

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> "DeltaStateStore":
        return cls(LakeLocation.from_json(settings["location"], "follower location"))

    def describe(self) -> str:
        return f"the Delta Lake follower at {self.location.uri}"

    # -- checkpoint and table positions -----------------------------------------------------------

    def state(self, pipeline: str) -> StateRow | None:
        """The whole state row (checkpoint, table positions, table versions), or None."""
        return self.tables.read_state(pipeline)

    def checkpoint(self, pipeline: str) -> Checkpoint | None:
        row = self.state(pipeline)
        return row.checkpoint if row is not None else None

    def table_versions(self, pipeline: str) -> dict[str, int] | None:
        row = self.state(pipeline)
        return dict(sorted(row.versions.items())) if row is not None else None

    def table_positions(self, pipeline: str) -> TablePositions:
        row = self.state(pipeline)
        return row.positions if row is not None else TablePositions()

    def initialize(self, first: Checkpoint) -> Checkpoint:
        existing = self.state(first.pipeline)
        if existing is not None:
            return existing.checkpoint
        self.tables.write_state(StateRow(first, TablePositions(), {}))
        return self.checkpoint(first.pipeline)

    def move(self, expected: Checkpoint, to: Checkpoint) -> bool:
        row = self.state(expected.pipeline)
        if row is None or not same_place(row.checkpoint, expected):
            return False
        self.tables.write_state(replace(row, checkpoint=to))
        return True

    def start_snapshot(self, batch: ChangeBatch) -> Checkpoint:
        row = self.state(batch.pipeline)
        if row is None:
            row = StateRow(Checkpoint(batch.pipeline, batch.start, None, batch.batch_id,
                                      gtid_set=batch.start_gtid_set, leader_id=batch.leader_id), TablePositions(), {})
        by_table = {} if batch.segments and all(s.full for s in batch.segments) else dict(row.positions.by_table)
        for segment in batch.segments:
            by_table[(segment.database, segment.table)] = TablePosition(
                segment.database, segment.table, segment.at, batch.batch_id, COPYING)
        self.tables.write_state(replace(row, positions=TablePositions(by_table)))
        return row.checkpoint

    def rebase(self, expected: Checkpoint, position: BinlogPosition, leader_id: str) -> list[TablePosition]:
        row = self.state(expected.pipeline)
        current = row.checkpoint if row is not None else None
        if current is None or (current.position, current.leader_id) != (expected.position, expected.leader_id):
            raise RuntimeError(
                f"the checkpoint of pipeline {expected.pipeline!r} moved while it was being rebased onto the new "
                "leader (another run of the pipeline?); run it again"
            )
        ahead = [p for p in row.positions.by_table.values() if p.state != DONE or p.position > current.position]
        self.tables.write_state(replace(row, checkpoint=replace(current, position=position, leader_id=leader_id),
                                        positions=TablePositions()))
        return ahead

    # -- records of runs --------------------------------------------------------------------------

    def record_extracted(self, record: BatchRecord) -> None:
        self.tables.append_event(record.pipeline, record.run_id, EXTRACTED, {
            "kind": record.kind, "batch_id": record.batch_id, "start_position": record.start_position,
            "end_position": record.end_position, "end_time": _iso(record.end_time), "rows_in": record.rows_in,
            "extract_seconds": record.extract_seconds})

    def record_merged(self, pipeline: str, run_id: str, net_rows: int, seconds: float) -> None:
        self.tables.append_event(pipeline, run_id, MERGED, {"net_rows": net_rows, "merge_seconds": seconds})

    def record_failed(self, pipeline: str, run_id: str, kind: str, error: str) -> None:
        self.tables.append_event(pipeline, run_id, FAILED, {"kind": kind, "error": error[:4000]})

    def record_failed_try(self, failed: FailedTry) -> None:
        self.tables.append_failed_try(failed)

    def history(self, pipeline: str, limit: int = 50) -> list[BatchRecord]:
        records = fold_history(pipeline, self.tables.read_events(pipeline))
        tries: dict[str, dict[tuple[str, int], FailedTry]] = {}
        for failed in self.tables.read_failed_tries(pipeline):  # oldest first; a try again: latest words
            tries.setdefault(failed.run_id, {})[(failed.task_id, failed.try_number)] = failed
        return [replace(r, failed_tries=tuple(tries.get(r.run_id, {}).values())) for r in records[:limit]]

    def last_applied_time(self, pipeline: str) -> dt.datetime | None:
        merged = [r for r in fold_history(pipeline, self.tables.read_events(pipeline))
                  if r.status == MERGED and r.kind == "stream" and r.end_time is not None]
        return max(merged, key=lambda r: r.merged_at).end_time if merged else None

    def record_verification(self, result: VerificationResult) -> None:
        self.tables.append_verification(result)

    def latest_verification(self, pipeline: str) -> VerificationResult | None:
        return self.tables.latest_verification(pipeline)


def same_place(current: Checkpoint, expected: Checkpoint) -> bool:
    """The compare of compare-and-set: the same position and the same DDL in flight."""
    return (current.position, current.pending_ddl_pos) == (expected.position, expected.pending_ddl_pos)


def _iso(value: dt.datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _time(value: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(value) if value else None


def fold_history(pipeline: str, events: list[tuple[str, str, dict, dt.datetime]]) -> list[BatchRecord]:
    """The history's events (run id, event, fields, when; oldest first) as one record per run,
    newest run first: the same record the MySQL store's upserts keep. An extract event starts the
    run's record afresh (a retried run overwrites its earlier attempt), a merge completes it, a
    failure marks it (and creates it when the extract never wrote one)."""
    records: dict[str, BatchRecord] = {}
    for run_id, event, body, at in events:
        naive = at.astimezone(dt.timezone.utc).replace(tzinfo=None)
        current = records.get(run_id)
        if event == EXTRACTED:
            records[run_id] = BatchRecord(
                pipeline, run_id, body["kind"], EXTRACTED, body["batch_id"], body["start_position"],
                body["end_position"], _time(body["end_time"]), body["rows_in"],
                extract_seconds=body["extract_seconds"], extracted_at=naive)
        elif event == MERGED and current is not None:
            records[run_id] = replace(current, status=MERGED, net_rows=body["net_rows"],
                                      merge_seconds=body["merge_seconds"], error=None, merged_at=naive)
        elif event == FAILED:
            records[run_id] = replace(current, status=FAILED, error=body["error"]) if current is not None else (
                BatchRecord(pipeline, run_id, body["kind"], FAILED, error=body["error"]))
    order = {run_id: i for i, (run_id, *_rest) in reversed(list(enumerate(events)))}  # first event of each run
    return sorted(records.values(), key=lambda r: order[r.run_id], reverse=True)


__all__ = ["DeltaStateStore", "LakeLocation", "StateRow", "fold_history", "same_place"]
