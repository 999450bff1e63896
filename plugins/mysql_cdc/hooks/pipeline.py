"""One pipeline seen whole: its leader, its follower's state and its batch storage.

The sensor asks it whether the leader moved past the checkpoint; the extract operator asks it for
the next batch (or a replay's). Which kind of read a run makes is one pure function of the
pipeline's state (``plan_run``); the rest of the hook carries it out.
"""

from __future__ import annotations

import datetime as dt
import glob
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Sequence

from airflow.sdk import BaseHook

from ..batch_retention import RetentionRecord, retire_batches
from ..capture.stream.extract import RangeRequest
from ..capture.filters import TableFilter
from ..capture.leader import Leader
from ..contracts import (
    BinlogPosition, ChangeBatch, Checkpoint, PositionRange, already_applied, checkpoint_after_copies,
)
from ..contracts import TablePositions
from ..contracts.history import EXTRACTED, BatchRecord
from ..kinds import FollowerSpec
from ..monitor.heartbeat import write_heartbeat
from ..monitor.lag import PipelineFigures, pipeline_figures
from ..monitor.verify import VerificationResult, verify_pipeline
from ..pipeline_options import ExtractOptions, SnapshotOptions, VerifyOptions
from ..mysql_server import MySQLSettings
from .follower import DEFAULT_FOLLOWER_CONN_ID, FollowerHookBase, FollowerRef, follower_hook, follower_reference
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


@dataclass(frozen=True)
class FollowerProgress:
    """Where the follower's state says the pipeline is: what a wait compares the leader with."""

    checkpoint: Checkpoint | None
    pending_snapshot: str | None

    @classmethod
    def read(cls, follower: FollowerSpec, pipeline: str) -> "FollowerProgress":
        """Blocking I/O (the follower's state store)."""
        state = follower.state_store()
        return cls(state.checkpoint(pipeline), state.table_positions(pipeline).pending_batch())

    def against(self, server: Leader) -> ChangeStatus:
        """The leader's position now (blocking: one query on ``server``'s connection) against this."""
        checkpoint = self.checkpoint
        position, leader_id = server.current_position(), server.leader_id
        changed = checkpoint is not None and checkpoint.leader_id is not None and checkpoint.leader_id != leader_id
        return ChangeStatus(position, checkpoint.position if checkpoint else None, self.pending_snapshot, changed)


def change_status(leader: MySQLSettings, follower: FollowerSpec, pipeline: str) -> ChangeStatus:
    """Blocking I/O on plain settings: the follower's state, then the leader's position."""
    progress = FollowerProgress.read(follower, pipeline)
    with Leader(leader) as server:
        return progress.against(server)


@dataclass(frozen=True)
class ExtractResult:
    """What a run extracted. A run that copies tables has two batches, applied by one merge in
    this order: the copy, then its catch-up (``catch_up``), the stream that brings every other
    table from the checkpoint to the copy's end position, so that the run ends with every table
    at one transaction boundary."""

    range: PositionRange
    batch: ChangeBatch | None  # None: the range was empty, nothing was written
    manifest_uri: str | None
    replay: bool  # a range the run was given, not the stream's next
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
            "replay": self.replay,
            "kind": self.kind,
        }

    @property
    def kind(self) -> str:
        """``snapshot`` (a copy), ``replay`` (a range the run gave) or ``stream`` (the next range)."""
        if self.batch is not None and self.batch.is_snapshot:
            return "snapshot"
        return "replay" if self.replay else "stream"

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


# What a run reads (``plan_run``): a copy of tables, the rest of an unfinished copy, the stream's
# next range, or a range the run was given.
SNAPSHOT, FINISH_SNAPSHOT, STREAM, REPLAY = "snapshot", "finish_snapshot", "stream", "replay"


@dataclass(frozen=True)
class RunPlan:
    action: str
    reason: str
    tables: tuple[str, ...] | None = None  # SNAPSHOT: db.table globs (None: every table)
    batch_id: str | None = None  # FINISH_SNAPSHOT: the unfinished copy's batch


def plan_run(checkpoint: Checkpoint | None, positions: TablePositions, *, replay: PositionRange | None,
             resnapshot: Sequence[str] | None, start_position: str, recopy: Sequence[str] = ()) -> RunPlan:
    """Which read a run makes, from the pipeline's state and what the run asked for:

    - tables a failover could not carry over (``recopy``) are copied again first;
    - a replay reads the range it was given (the checkpoint untouched);
    - an unfinished snapshot (a copy whose merge has not completed) is finished first, whatever
      the run asked for: no stream batch may pass it;
    - ``resnapshot`` (db.table globs): a copy of those tables, consistent with the stream;
    - the first run of a ``start_position: snapshot`` pipeline: a copy of every table;
    - otherwise the stream: [checkpoint, leader now)."""
    if recopy:
        return RunPlan(SNAPSHOT, f"copying again what the failover could not carry over: {list(recopy)}",
                       tuple(recopy))
    if replay is not None:
        return RunPlan(REPLAY, f"replaying {replay}")
    pending = positions.pending_batch()
    if pending is not None:
        return RunPlan(FINISH_SNAPSHOT, f"the snapshot {pending} is unfinished: finishing it first", batch_id=pending)
    if resnapshot:
        return RunPlan(SNAPSHOT, f"copying {list(resnapshot)} again", tuple(resnapshot))
    if start_position == "snapshot" and checkpoint is None:
        return RunPlan(SNAPSHOT, "the first run of the pipeline copies every table")
    return RunPlan(STREAM, "the stream's next range")


class CdcPipelineHook(BaseHook):
    """A pipeline's leader, follower and storage hooks, and the rules that tie them together."""

    hook_name = "MySQL CDC pipeline"

    def __init__(
        self,
        pipeline: str,
        leader_conn_id: str = LeaderHook.default_conn_name,
        follower: FollowerRef = DEFAULT_FOLLOWER_CONN_ID,
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
        self.follower_ref = follower_reference(follower)  # one reference, JSON-safe (hooks.follower)
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
    def follower(self) -> FollowerHookBase:
        return follower_hook(self.follower_ref)

    @cached_property
    def storage(self) -> BatchStorageHook:
        if not self.storage_uri:
            raise ValueError(f"pipeline {self.pipeline!r}: no storage_uri given")
        return BatchStorageHook(self.storage_uri, self.aws_conn_id)

    def change_status(self) -> ChangeStatus:
        return change_status(self.leader.settings, self.follower.spec(), self.pipeline)

    # -- operating it (monitor) ---------------------------------------------------------------

    def write_heartbeat(self) -> None:
        write_heartbeat(self.leader.settings, self.pipeline)

    def figures(self, heartbeat: bool = False) -> PipelineFigures:
        """Lag and history, read live from the leader and the follower's state (``monitor.lag``)."""
        return pipeline_figures(self.pipeline, self.leader.settings, self.follower.state, heartbeat=heartbeat)

    def verify(self, options: VerifyOptions) -> VerificationResult:
        """Checksum every captured table on both sides (``monitor.verify``); the result is kept."""
        return verify_pipeline(self.pipeline, self.leader.settings, self.follower.checksum_sides(), self.follower.state,
                               self.table_filter, options, log=self.log.info)

    def retire_batches(self, retain: str) -> RetentionRecord:
        """Delete the applied batches older than ``retain`` that nothing needs (``batch_retention``);
        the state is read before the listing, so a batch committed meanwhile is young and stays."""
        state = self.follower.state
        checkpoint, positions = state.checkpoint(self.pipeline), state.table_positions(self.pipeline)
        return retire_batches(self.storage.store, self.pipeline, checkpoint, positions, retain)

    def record_extract(self, result: ExtractResult, run_id: str, seconds: float) -> None:
        if result.batch is not None:
            self.follower.state.record_extracted(result.record(run_id, seconds))

    # -- the run's batch ----------------------------------------------------------------------

    def extract(self, replay: PositionRange | None = None, resnapshot: Sequence[str] | None = None) -> ExtractResult:
        """The run's batch, as ``plan_run`` decides from the state read once here. A leader that
        is another server than the checkpoint's (a failover) is followed first, unless the run is
        a resnapshot (how a user recovers when the failover cannot be followed)."""
        state = self.follower.state
        checkpoint, recopy = state.checkpoint(self.pipeline), []
        if not resnapshot:
            checkpoint, recopy = self._follow_failover(checkpoint)
        positions = state.table_positions(self.pipeline)  # after a rebase: it drops the old leader's
        plan = plan_run(checkpoint, positions, replay=replay, resnapshot=resnapshot,
                        start_position=self.start_position, recopy=recopy)
        self.log.info("pipeline %s: %s", self.pipeline, plan.reason)
        if plan.action == SNAPSHOT:
            return self._snapshot(plan.tables)
        if plan.action == FINISH_SNAPSHOT:
            return self._finish_snapshot(plan.batch_id, checkpoint, positions)
        checkpoint = checkpoint or self._initialize(replay)
        if plan.action == REPLAY:
            return self._replay(replay, checkpoint, positions)
        return self._stream(checkpoint, positions)

    def _stream(self, checkpoint: Checkpoint, positions: TablePositions) -> ExtractResult:
        """[checkpoint, leader now); with ``on_purged: snapshot``, a copy of every table when that
        binlog was purged."""
        range_ = PositionRange(checkpoint.position, self.leader.current_position())
        if self.on_purged == "snapshot" and self.leader.is_purged(range_.start):
            self.log.warning("pipeline %s: its binlog from %s was purged; on_purged: snapshot copies every "
                             "table again", self.pipeline, range_.start)
            return self._snapshot(None)
        batch = self._read(range_, checkpoint.gtid, checkpoint.gtid_set, positions)
        recopy = self.follower.tables_to_copy(batch) if batch is not None else {}
        if recopy:
            # The follower cannot take these tables' changes exactly (a lake and a type change):
            # the run copies them instead, and catches every table up to the copy. The batch just
            # read is dropped: the catch-up reads its range again.
            for name, why in recopy.items():
                self.log.warning("pipeline %s: %s: %s; copying it again in this run", self.pipeline, name, why)
            self.storage.store.delete_prefix(batch.prefix + "/")
            return self._snapshot([glob.escape(name) for name in recopy])
        return ExtractResult(range=range_, batch=batch, manifest_uri=self._uri(batch), replay=False)

    def _replay(self, range_: PositionRange, checkpoint: Checkpoint, positions: TablePositions) -> ExtractResult:
        """The given range, the checkpoint untouched (a range it covers merges as a no-op)."""
        if already_applied(range_, checkpoint, self.pipeline):
            self.log.info("replay %s is at or before checkpoint %s: its batch is rebuilt, the merge will be a no-op",
                          range_, checkpoint.position)
        batch = self._read(range_, None, None, positions)
        return ExtractResult(range=range_, batch=batch, manifest_uri=self._uri(batch), replay=True)

    def _read(self, range_: PositionRange, start_gtid: str | None, start_gtid_set: str | None,
              positions: TablePositions) -> ChangeBatch | None:
        self.log.info("pipeline %s: extracting %s", self.pipeline, range_)
        request = RangeRequest(self.pipeline, range_, self.table_filter, positions, start_gtid, start_gtid_set)
        return self.leader.extract(request, self.storage.target(), self.extract_options)

    def _uri(self, batch: ChangeBatch | None) -> str | None:
        return self.storage.manifest_uri(batch) if batch is not None else None

    def _initialize(self, replay: PositionRange | None) -> Checkpoint:
        """First run: the checkpoint is written before anything is read, so this run's range and
        every later one start from a recorded position. A replay on a new pipeline starts where it
        says; a regular run where start_position says."""
        start = replay.start if replay else self.leader.resolve_start(self.start_position)
        first = Checkpoint(self.pipeline, start, gtid_set=self.leader.gtid_set_at(start),
                           leader_id=self.leader.leader_id())
        checkpoint = self.follower.state.initialize(first)
        if checkpoint.position == start and checkpoint.batch_id is None:
            self.log.info("pipeline %s starts at %s (checkpoint created)", self.pipeline, start)
        else:
            self.log.info("pipeline %s already has checkpoint %s; keeping it", self.pipeline, checkpoint.position)
        return checkpoint

    def _follow_failover(self, checkpoint: Checkpoint | None) -> tuple[Checkpoint | None, list[str]]:
        """When the leader connection now reaches another server than the checkpoint's (a
        failover), move the checkpoint onto its binlog by GTID set (``capture.failover``);
        returns the checkpoint in force and the tables whose copies must be made again there
        (globs), usually none."""
        if checkpoint is None or checkpoint.leader_id is None:
            return checkpoint, []
        leader_id = self.leader.leader_id()
        if leader_id == checkpoint.leader_id:
            return checkpoint, []
        position = self.leader.find_position(checkpoint.gtid_set)
        recopy = self.follower.state.rebase(checkpoint, position, leader_id)
        self.log.warning(
            "pipeline %s: the leader is now server %r (the checkpoint's was %r); checkpoint %s is %s on it "
            "(GTID set %s)%s", self.pipeline, leader_id, checkpoint.leader_id, checkpoint.position, position,
            checkpoint.gtid_set, f"; copying again {[p.database + '.' + p.table for p in recopy]}" if recopy else "",
        )
        return self.follower.state.checkpoint(self.pipeline), [glob.escape(f"{p.database}.{p.table}") for p in recopy]

    # -- copies -------------------------------------------------------------------------------

    def _snapshot(self, only: Sequence[str] | None) -> ExtractResult:
        """Copy the tables (all, or those matching ``only``) and record the copy as unfinished in
        the state, so no stream batch is applied before it."""
        batch = self.leader.snapshot(self.storage.target(), self.pipeline, self.table_filter, only,
                                     self.snapshot_options)
        checkpoint = self.follower.state.start_snapshot(batch)
        self.log.info("pipeline %s: copied %d tables (%d rows) at %s", self.pipeline, len(batch.segments),
                      batch.row_count, batch.start)
        # the positions as the copy's start left them (a copy of every table drops the others)
        return self._with_catch_up(batch, checkpoint, self.follower.state.table_positions(self.pipeline))

    def _with_catch_up(self, copy: ChangeBatch, checkpoint: Checkpoint | None,
                       positions: TablePositions) -> ExtractResult:
        """The copy, and the stream from where the checkpoint will stand once the copy is applied
        to the copy's end: every other table (and a copied table past its own position) caught
        up, so the run ends with every table at ``copy.end``. Without it, the copied tables
        would stand at the leader's position of the copy and the others at the old checkpoint
        until the next run: a state the leader never had."""
        after = checkpoint_after_copies(copy, checkpoint)
        range_ = PositionRange(after.position, copy.end)
        catch_up = None
        if not range_.empty:
            self.log.info("pipeline %s: catching up every other table from %s to the copy's %s in this run",
                          self.pipeline, range_.start, range_.end)
            catch_up = self._read(range_, after.gtid, after.gtid_set, positions.with_copies(copy))
        return ExtractResult(range=range_, batch=copy, manifest_uri=self.storage.manifest_uri(copy), replay=False,
                             catch_up=catch_up, catch_up_uri=self._uri(catch_up))

    def _finish_snapshot(self, batch_id: str, checkpoint: Checkpoint | None,
                         positions: TablePositions) -> ExtractResult:
        batch = self.storage.read_batch(self.pipeline, batch_id)
        if batch is None:  # the batch store lost it: copy the same tables again
            copying = [f"{p.database}.{p.table}" for p in positions.by_table.values() if p.batch_id == batch_id]
            self.log.warning("pipeline %s: unfinished snapshot %s is gone from the batch store; copying %s again",
                             self.pipeline, batch_id, copying)
            return self._snapshot([glob.escape(t) for t in copying])
        return self._with_catch_up(batch, checkpoint, positions)
