"""The state tables of a Delta Lake follower, read and written with delta-rs.

Plain Arrow rows in small Delta tables (no column mapping, no deletion vectors), so any Delta
reader sees them as they are. ``StateRow`` is the one row of ``checkpoint``.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ....contracts import BinlogPosition, Checkpoint, TablePosition, TablePositions
from ....contracts.history import FailedTry
from ....contracts.verification import VerificationResult
from .location import LakeLocation, lake_retry

# Commits between two checkpoints of a table's log, the lake's tables' and the state tables'.
# Opening a table reads every commit since its last checkpoint (delta-rs: each one twice, a request
# each on object storage); delta-rs writes a checkpoint every 100 commits unless the table says
# otherwise, and a table gets a commit per run that changes it. Every 10 (Spark's own default): a
# table of 57 commits opened in 0.26 s where it took 0.92 s, for 0.26 s of checkpoint written every
# tenth commit (moto's S3, docs/performance.md).
CHECKPOINT_INTERVAL = "10"

CHECKPOINT, HISTORY, FAILED_TRIES, VERIFICATION = "checkpoint", "history", "failed_tries", "verification"

_TS = pa.timestamp("us", tz="UTC")
CHECKPOINT_SCHEMA = pa.schema([
    ("pipeline", pa.string()), ("binlog_file", pa.string()), ("binlog_pos", pa.int64()), ("gtid", pa.string()),
    ("batch_id", pa.string()), ("pending_ddl_pos", pa.string()), ("pending_ddl_fingerprint", pa.string()),
    ("updated_at", _TS), ("gtid_set", pa.string()), ("leader_id", pa.string()),
    # [{database, table, position, batch_id, state}]: where copied tables stand
    ("table_positions", pa.string()),
    # {"db.table": Delta version}: every table as of this checkpoint, the consistent cut
    ("table_versions", pa.string()),
])
EVENT_SCHEMA = pa.schema([("run_id", pa.string()), ("event", pa.string()), ("body", pa.string()), ("at", _TS)])
TRY_SCHEMA = pa.schema([("run_id", pa.string()), ("task_id", pa.string()), ("try_number", pa.int64()),
                        ("error", pa.string()), ("failed_at", _TS)])
VERIFICATION_SCHEMA = pa.schema([("started_at", _TS), ("status", pa.string()), ("result", pa.string())])


@dataclass(frozen=True)
class StateRow:
    """A pipeline's whole state, committed at once: the checkpoint, the copied tables' positions,
    and each table's Delta version at the checkpoint (tables absent from ``versions`` do not exist
    at that position: never created, or dropped)."""

    checkpoint: Checkpoint
    positions: TablePositions
    versions: dict[str, int]

    def to_arrow(self) -> pa.Table:
        c = self.checkpoint
        positions = [{"database": p.database, "table": p.table, "position": str(p.position),
                      "batch_id": p.batch_id, "state": p.state} for p in self.positions.by_table.values()]
        return pa.Table.from_pylist([{
            "pipeline": c.pipeline, "binlog_file": c.position.file, "binlog_pos": c.position.offset, "gtid": c.gtid,
            "batch_id": c.batch_id, "pending_ddl_pos": str(c.pending_ddl_pos) if c.pending_ddl_pos else None,
            "pending_ddl_fingerprint": c.pending_ddl_fingerprint, "updated_at": dt.datetime.now(dt.timezone.utc),
            "gtid_set": c.gtid_set, "leader_id": c.leader_id, "table_positions": json.dumps(positions),
            "table_versions": json.dumps(dict(sorted(self.versions.items()))),
        }], schema=CHECKPOINT_SCHEMA)

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> "StateRow":
        pending = row["pending_ddl_pos"]
        updated = row["updated_at"]
        checkpoint = Checkpoint(
            row["pipeline"], BinlogPosition(row["binlog_file"], row["binlog_pos"]), row["gtid"], row["batch_id"],
            BinlogPosition.parse(pending) if pending else None, row["pending_ddl_fingerprint"],
            updated.astimezone(dt.timezone.utc).replace(tzinfo=None) if updated else None,
            row["gtid_set"], row["leader_id"])
        positions = TablePositions({
            (p["database"], p["table"]): TablePosition(p["database"], p["table"], BinlogPosition.parse(p["position"]),
                                                       p["batch_id"], p["state"])
            for p in json.loads(row["table_positions"] or "[]")})
        return cls(checkpoint, positions, {k: int(v) for k, v in json.loads(row["table_versions"] or "{}").items()})


class StateTables:
    """A location's state tables through delta-rs; each call one read or one commit."""

    def __init__(self, location: LakeLocation):
        self.location = location

    def _table(self, pipeline: str, name: str, version: int | None = None):
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        uri = self.location.state_uri(pipeline, name)
        try:
            return lake_retry(f"open {uri}", lambda: DeltaTable(uri, version=version,
                                                                storage_options=self.location.storage_options()))
        except TableNotFoundError:
            return None

    def _rows(self, pipeline: str, name: str) -> list[dict[str, Any]]:
        table = self._table(pipeline, name)
        return table.to_pyarrow_table().to_pylist() if table is not None else []

    def _write(self, pipeline: str, name: str, rows: pa.Table, mode: str) -> None:
        from deltalake import write_deltalake

        # (the configuration is a new table's: the checkpoint table gets a commit per segment, and
        # every poll of the sensor and the trigger opens it)
        write_deltalake(self.location.state_uri(pipeline, name), rows, mode=mode,
                        storage_options=self.location.storage_options(),
                        configuration={"delta.checkpointInterval": CHECKPOINT_INTERVAL})

    # -- the checkpoint -------------------------------------------------------------------------

    def read_state(self, pipeline: str, version: int | None = None) -> StateRow | None:
        """The pipeline's state row (as of the checkpoint table's ``version``, when given)."""
        table = self._table(pipeline, CHECKPOINT, version)
        rows = lake_retry(f"read {self.location.state_uri(pipeline, CHECKPOINT)}",
                          lambda: table.to_pyarrow_table().to_pylist()) if table is not None else []
        return StateRow.from_dict(rows[0]) if rows else None

    def write_state(self, row: StateRow) -> None:
        """Replace the state row: one Delta commit (retried: a second commit of the same row changes
        nothing)."""
        pipeline = row.checkpoint.pipeline
        lake_retry(f"commit {self.location.state_uri(pipeline, CHECKPOINT)}",
                   lambda: self._write(pipeline, CHECKPOINT, row.to_arrow(), "overwrite"))

    # -- records of runs --------------------------------------------------------------------------

    def append_event(self, pipeline: str, run_id: str, event: str, body: dict) -> None:
        self._write(pipeline, HISTORY, pa.Table.from_pylist([{
            "run_id": run_id, "event": event, "body": json.dumps(body), "at": dt.datetime.now(dt.timezone.utc)}],
            schema=EVENT_SCHEMA), "append")

    def read_events(self, pipeline: str) -> list[tuple[str, str, dict, dt.datetime]]:
        """The history's events, oldest first."""
        rows = sorted(self._rows(pipeline, HISTORY), key=lambda r: r["at"])
        return [(r["run_id"], r["event"], json.loads(r["body"]), r["at"]) for r in rows]

    def append_failed_try(self, failed: FailedTry) -> None:
        self._write(failed.pipeline, FAILED_TRIES, pa.Table.from_pylist([{
            "run_id": failed.run_id, "task_id": failed.task_id, "try_number": failed.try_number,
            "error": failed.error[:4000], "failed_at": dt.datetime.now(dt.timezone.utc)}], schema=TRY_SCHEMA), "append")

    def read_failed_tries(self, pipeline: str) -> list[FailedTry]:
        rows = sorted(self._rows(pipeline, FAILED_TRIES), key=lambda r: r["failed_at"])
        return [FailedTry(pipeline, r["run_id"], r["task_id"], r["try_number"], r["error"],
                          r["failed_at"].astimezone(dt.timezone.utc).replace(tzinfo=None)) for r in rows]

    def append_verification(self, result: VerificationResult) -> None:
        self._write(result.pipeline, VERIFICATION, pa.Table.from_pylist([{
            "started_at": result.started_at, "status": result.status, "result": json.dumps(result.to_json())}],
            schema=VERIFICATION_SCHEMA), "append")

    def latest_verification(self, pipeline: str) -> VerificationResult | None:
        rows = self._rows(pipeline, VERIFICATION)
        if not rows:
            return None
        return VerificationResult.from_json(json.loads(max(rows, key=lambda r: r["started_at"])["result"]))
