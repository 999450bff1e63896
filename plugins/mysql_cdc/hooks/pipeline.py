"""One pipeline seen whole: its leader, its follower checkpoint and its batch storage.

The sensor asks it whether the leader moved past the checkpoint; the extract operator asks it for
the next batch (or a backfill's). The rules of which range to read live here, once.
"""

from __future__ import annotations

import datetime as dt
import glob
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Sequence

from airflow.sdk import BaseHook

from ..capture.filters import TableFilter
from ..capture.leader import Leader
from ..contracts import (
    BinlogPosition, ChangeBatch, Checkpoint, PositionRange, already_applied, checkpoint_after_copies,
)
from ..contracts.history import EXTRACTED, BatchRecord
from ..monitor.heartbeat import write_heartbeat
from ..monitor.lag import PipelineFigures, pipeline_figures
from ..monitor.verify import VerificationResult, verify_pipeline
from ..settings import ExtractOptions, MySQLSettings, SnapshotOptions, VerifyOptions
from .follower import FollowerHook, checkpoint_of, table_positions_of
from .leader import LeaderHook
from .storage import BatchStorageHook


@dataclass(frozen=True)
class ChangeStatus:
    leader: BinlogPosition
    checkpoint: BinlogPosition | None  # None: the pipeline never ran
    pending_snapshot: str | None = None  # an unfinished copy's batch id: the next run finishes it
    leader_changed: bool = False  # the checkpoint is a position on another server (a failover)

    @property
    def has_changes(self) -> bool:
        return (self.checkpoint is None or self.leader_changed or self.checkpoint < self.leader
                or self.pending_snapshot is not None)

    def describe(self) -> str:
        if self.leader_changed:
            return (f"the leader is another server than the one checkpoint {self.checkpoint} was taken on: this run "
                    "finds the checkpoint's place on it by GTID")
        if self.pending_snapshot is not None:
            return f"the snapshot {self.pending_snapshot} is unfinished: this run finishes it"
        if self.checkpoint is None:
            return f"no checkpoint yet (leader at {self.leader}): the first run initializes it"
        if self.has_changes:
            return f"leader at {self.leader} is past checkpoint {self.checkpoint}"
        return f"leader at {self.leader}, checkpoint {self.checkpoint}: nothing new"

    def to_json(self) -> dict[str, Any]:
        return {"leader": str(self.leader), "checkpoint": str(self.checkpoint) if self.checkpoint else None,
                "leader_changed": self.leader_changed}


def change_status(leader: MySQLSettings, follower: MySQLSettings, pipeline: str) -> ChangeStatus:
    """Blocking I/O on plain settings: the trigger runs it in a worker thread."""
    checkpoint = checkpoint_of(follower, pipeline)
    pending = table_positions_of(follower, pipeline).pending_batch()
    with Leader(leader) as server:
        position, leader_id = server.current_position(), server.leader_id
    changed = checkpoint is not None and checkpoint.leader_id is not None and checkpoint.leader_id != leader_id
    return ChangeStatus(position, checkpoint.position if checkpoint else None, pending, changed)


@dataclass(frozen=True)
class ExtractResult:
    """What a run extracted. A run that copies tables has two batches, applied by one merge in
    this order: the copy, then its catch-up (``catch_up``), the stream that brings every other
    table from the checkpoint to the copy's end position, so that the run ends with every table
    at one transaction boundary."""

    range: PositionRange
    batch: ChangeBatch | None  # None: the range was empty, nothing was written
    manifest_uri: str | None
    backfill: bool
    catch_up: ChangeBatch | None = None
    catch_up_uri: str | None = None

    @property
    def manifest_uris(self) -> list[str]:
        """The manifests the merge applies, in order (the extract task's XCom)."""
        return [uri for uri in (self.manifest_uri, self.catch_up_uri) if uri]

    def asset_extra(self) -> dict[str, Any]:
        """JSON-safe facts about the batch for its asset event (no secrets: URIs and positions)."""
        assert self.batch is not None
        return {
            "pipeline": self.batch.pipeline,
            "batch_id": self.batch.batch_id,
            "start": str(self.batch.start),
            "end": str(self.batch.end),
            "row_count": self.batch.row_count,
            "segments": len(self.batch.segments),
            "manifest_uri": self.manifest_uri,
            "catch_up": self.catch_up.batch_id if self.catch_up is not None else None,
            "backfill": self.backfill,
            "kind": self.kind,
        }

    @property
    def kind(self) -> str:
        """``snapshot`` (a copy), ``replay`` (a range the run gave) or ``stream`` (the next range)."""
        if self.batch is not None and self.batch.is_snapshot:
            return "snapshot"
        return "replay" if self.backfill else "stream"

    def record(self, run_id: str, seconds: float) -> BatchRecord:
        """The run's row of the batch history."""
        batch, catch_up = self.batch, self.catch_up
        end_time = (catch_up or batch).end_time if batch is not None else None
        return BatchRecord(
            pipeline=batch.pipeline, run_id=run_id, kind=self.kind, status=EXTRACTED, batch_id=batch.batch_id,
            start_position=str(self.range.start), end_position=str(self.range.end),
            end_time=dt.datetime.fromtimestamp(end_time, dt.timezone.utc).replace(tzinfo=None) if end_time else None,
            rows_in=batch.row_count + (catch_up.row_count if catch_up else 0), extract_seconds=round(seconds, 3),
        )


class CdcPipelineHook(BaseHook):
    """A pipeline's leader, follower and storage hooks, and the rules that tie them together."""

    hook_name = "MySQL CDC pipeline"

    def __init__(
        self,
        pipeline: str,
        leader_conn_id: str = LeaderHook.default_conn_name,
        follower_conn_id: str = FollowerHook.default_conn_name,
        storage_uri: str | None = None,
        aws_conn_id: str | None = BatchStorageHook.default_conn_name,
        table_filter: TableFilter = TableFilter(),
        start_position: str = "snapshot",
        on_purged: str = "fail",
        snapshot_options: SnapshotOptions = SnapshotOptions(),
        extract_options: ExtractOptions = ExtractOptions(),
    ):
        super().__init__()
        self.pipeline = pipeline
        self.leader_conn_id = leader_conn_id
        self.follower_conn_id = follower_conn_id
        self.storage_uri = storage_uri
        self.aws_conn_id = aws_conn_id
        self.table_filter = table_filter
        self.start_position = start_position
        self.on_purged = on_purged
        self.snapshot_options = snapshot_options
        self.extract_options = extract_options

    @cached_property
    def leader(self) -> LeaderHook:
        return LeaderHook(self.leader_conn_id)

    @cached_property
    def follower(self) -> FollowerHook:
        return FollowerHook(self.follower_conn_id)

    @cached_property
    def storage(self) -> BatchStorageHook:
        if not self.storage_uri:
            raise ValueError(f"pipeline {self.pipeline!r}: no storage_uri given")
        return BatchStorageHook(self.storage_uri, self.aws_conn_id)

    def change_status(self) -> ChangeStatus:
        return change_status(self.leader.settings, self.follower.settings, self.pipeline)

    # -- operating it (monitor) ---------------------------------------------------------------

    def write_heartbeat(self) -> None:
        write_heartbeat(self.leader.settings, self.pipeline)

    def figures(self, heartbeat: bool = False) -> PipelineFigures:
        """Lag and history, read live from the leader and the follower (``monitor.lag``)."""
        return pipeline_figures(self.pipeline, self.leader.settings, self.follower.settings, heartbeat=heartbeat)

    def verify(self, options: VerifyOptions) -> VerificationResult:
        """Checksum every captured table on both sides (``monitor.verify``); the result is kept."""
        return verify_pipeline(self.pipeline, self.leader.settings, self.follower.settings, self.table_filter,
                               options, log=self.log.info)

    def record_extract(self, result: ExtractResult, run_id: str, seconds: float) -> None:
        if result.batch is not None:
            self.follower.record_extracted(result.record(run_id, seconds))

    def _snapshot(self, only: Sequence[str] | None) -> ExtractResult:
        """Copy the tables (all, or those matching ``only``) and record the copy as unfinished on
        the follower, so no stream batch is applied before it."""
        batch = self.leader.snapshot(self.storage.spec(), self.storage.store, self.pipeline, self.table_filter, only,
                                     self.snapshot_options)
        self.follower.start_snapshot(batch)
        self.log.info("pipeline %s: copied %d tables (%d rows) at %s", self.pipeline, len(batch.segments),
                      batch.row_count, batch.start)
        return self._with_catch_up(batch)

    def _with_catch_up(self, copy: ChangeBatch) -> ExtractResult:
        """The copy, and the stream from where the checkpoint will stand once the copy is applied
        to the copy's end: every other table (and a copied table past its own position) caught
        up, so the run ends with every table at ``copy.end``. Without it, the copied tables
        would stand at the leader's position of the copy and the others at the old checkpoint
        until the next run: a state the leader never had."""
        checkpoint = checkpoint_after_copies(copy, self.follower.read_checkpoint(self.pipeline))
        range_ = PositionRange(checkpoint.position, copy.end)
        catch_up = None
        if not range_.empty:
            self.log.info("pipeline %s: catching up every other table from %s to the copy's %s in this run",
                          self.pipeline, range_.start, range_.end)
            positions = self.follower.table_positions(self.pipeline).with_copies(copy)
            catch_up = self.leader.extract(self.storage.spec(), self.storage.store, self.pipeline, range_,
                                           self.table_filter, checkpoint.gtid, positions, checkpoint.gtid_set,
                                           self.extract_options)
        return ExtractResult(
            range=range_, batch=copy, manifest_uri=self.storage.manifest_uri(copy), backfill=False,
            catch_up=catch_up, catch_up_uri=self.storage.manifest_uri(catch_up) if catch_up is not None else None,
        )

    def _finish_snapshot(self, batch_id: str) -> ExtractResult:
        batch = self.storage.read_batch(self.pipeline, batch_id)
        if batch is None:  # the batch store lost it: copy the same tables again
            copying = [f"{p.database}.{p.table}" for p in
                       self.follower.table_positions(self.pipeline).by_table.values() if p.batch_id == batch_id]
            self.log.warning("pipeline %s: unfinished snapshot %s is gone from the batch store; copying %s again",
                             self.pipeline, batch_id, copying)
            return self._snapshot([glob.escape(t) for t in copying])
        self.log.info("pipeline %s: finishing the snapshot %s first", self.pipeline, batch_id)
        return self._with_catch_up(batch)

    def _checkpoint(self, backfill: PositionRange | None) -> Checkpoint:
        checkpoint = self.follower.read_checkpoint(self.pipeline)
        if checkpoint is not None:
            return checkpoint
        # First run: the checkpoint is written before anything is read, so the range below and
        # every later one start from a recorded position. A backfill on a new pipeline starts
        # where it says; a regular run where start_position says.
        start = backfill.start if backfill else self.leader.resolve_start(self.start_position)
        return self.follower.initialize_checkpoint(self.pipeline, start, self.leader.gtid_set_at(start),
                                                   self.leader.leader_id())

    def _follow_failover(self) -> list[str]:
        """When the leader connection now reaches another server than the checkpoint's (a
        failover), move the checkpoint onto its binlog by GTID set (``capture.failover``);
        returns the tables whose copies must be made again there (globs), usually none."""
        checkpoint = self.follower.read_checkpoint(self.pipeline)
        if checkpoint is None or checkpoint.leader_id is None:
            return []
        leader_id = self.leader.leader_id()
        if leader_id == checkpoint.leader_id:
            return []
        position = self.leader.find_position(checkpoint.gtid_set)
        recopy = self.follower.rebase(checkpoint, position, leader_id)
        self.log.warning(
            "pipeline %s: the leader is now server %r (the checkpoint's was %r); checkpoint %s is %s on it "
            "(GTID set %s)%s", self.pipeline, leader_id, checkpoint.leader_id, checkpoint.position, position,
            checkpoint.gtid_set, f"; copying again {[p.database + '.' + p.table for p in recopy]}" if recopy else "",
        )
        return [glob.escape(f"{p.database}.{p.table}") for p in recopy]

    def extract(self, backfill: PositionRange | None = None, resnapshot: Sequence[str] | None = None) -> ExtractResult:
        """The run's batch, by what the run is:

        - a leader that is another server than the checkpoint's (a failover) is followed first:
          the checkpoint moves onto its binlog by GTID set;
        - an unfinished snapshot (a copy whose merge has not completed) is finished first: its
          batch again, whatever the run asked for (a backfill aside);
        - ``resnapshot`` (db.table globs): a copy of those tables, consistent with the stream;
        - the first run of a ``start_position: snapshot`` pipeline: a copy of every table;
        - a regular run: [checkpoint, leader now); with ``on_purged: snapshot``, a copy of every
          table when that binlog was purged;
        - a backfill: the given range, checkpoint untouched."""
        if not resnapshot:  # (a resnapshot is how a user recovers when the failover cannot be followed)
            recopy = self._follow_failover()
            if recopy:
                return self._snapshot(recopy)
        positions = self.follower.table_positions(self.pipeline)
        if backfill is None:
            pending = positions.pending_batch()
            if pending is not None:
                return self._finish_snapshot(pending)
            if resnapshot:
                return self._snapshot(resnapshot)
            if self.start_position == "snapshot" and self.follower.read_checkpoint(self.pipeline) is None:
                return self._snapshot(None)
        checkpoint = self._checkpoint(backfill)
        start_gtid_set = None
        if backfill is None:
            range_ = PositionRange(checkpoint.position, self.leader.current_position())
            start_gtid, start_gtid_set = checkpoint.gtid, checkpoint.gtid_set
            if self.on_purged == "snapshot" and self.leader.is_purged(range_.start):
                self.log.warning("pipeline %s: its binlog from %s was purged; on_purged: snapshot copies every "
                                 "table again", self.pipeline, range_.start)
                return self._snapshot(None)
        else:
            if already_applied(backfill, checkpoint, self.pipeline):
                self.log.info(
                    "backfill %s is at or before checkpoint %s: its batch is rebuilt, the merge will be a no-op",
                    backfill, checkpoint.position,
                )
            range_, start_gtid = backfill, None
        self.log.info("pipeline %s: extracting %s", self.pipeline, range_)
        batch = self.leader.extract(self.storage.spec(), self.storage.store, self.pipeline, range_, self.table_filter,
                                    start_gtid, positions, start_gtid_set, self.extract_options)
        manifest_uri = self.storage.manifest_uri(batch) if batch is not None else None
        return ExtractResult(range=range_, batch=batch, manifest_uri=manifest_uri, backfill=backfill is not None)
