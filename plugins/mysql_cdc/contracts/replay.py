"""Exactly-once: which part of a range or batch the follower still needs, given its checkpoint.

A checkpoint is a transaction boundary P: the follower equals the leader as of P. This is the
one definition of the rule; the Airflow side asks it before starting Spark (a bad backfill fails
in a second), the merge job asks it again under the checkpoint's row lock.

- ``end <= P``: everything is already applied: a no-op (replays of applied ranges).
- a batch whose changes after P touched no captured table (none at all, or only DDL a copy
  already holds) moves the checkpoint to its end and nothing else (``ReplayPlan.moves_only``):
  the Airflow side does that without Spark, the job when it meets one.
- ``start > P``: the changes in ``[P, start)`` were never applied: a gap, an error.
- otherwise the segments whose ``end > P`` are applied in order; inside the one segment that may
  straddle P (a batch re-extracted with other boundaries), a row is applied iff its event
  position is ``>= P`` (``mysql_cdc.merge.transforms.after_checkpoint``).
- a batch read from another server than the checkpoint's (a failover) is refused: positions of
  two servers do not compare (``capture.failover`` moves the checkpoint onto the new leader).
- a checkpoint carrying a pending-DDL marker at Q must continue with the DDL segment starting at
  Q: the marker says "this DDL may or may not have run", and only that segment can settle it.

Per-table positions (a table copied by a snapshot at T): the table's rows and DDL before T are
in the copy, so for that table the effective position is max(P, T) (``table_position``). A
snapshot batch is not placed on the pipeline's position at all: each of its tables is applied
unless that table already has a finished copy at or after the snapshot's position. While a
snapshot's copy is unfinished, no stream batch may be applied: the stream would reach tables the
copy has not created yet.
"""

from __future__ import annotations

from dataclasses import dataclass

from .batch import ChangeBatch, DdlSegment, Segment, SnapshotSegment
from .checkpoint import Checkpoint, TablePositions
from .position import BinlogPosition, PositionRange
from ..errors import PermanentError


class ReplayError(ValueError, PermanentError):
    """The range cannot be applied on this checkpoint; retrying cannot help."""


class MissingCheckpointError(ReplayError):
    """The follower has no checkpoint for the pipeline."""


class RangeGapError(ReplayError):
    """The range starts after the checkpoint: applying it would skip changes."""


def require_checkpoint(checkpoint: Checkpoint | None, pipeline: str) -> Checkpoint:
    if checkpoint is None:
        raise MissingCheckpointError(
            f"the follower has no checkpoint for pipeline {pipeline!r} (table `_mysql_cdc`.`checkpoint`): "
            "a regular run of the pipeline's DAG creates it from its start_position before anything "
            "is applied; run the DAG without a range first"
        )
    return checkpoint


def already_applied(range_: PositionRange, checkpoint: Checkpoint | None, pipeline: str) -> bool:
    """True when ``checkpoint`` covers all of ``range_``; raises on a gap or no checkpoint."""
    position = require_checkpoint(checkpoint, pipeline).position
    if position < range_.start:
        raise RangeGapError(
            f"gap: range {range_} starts after pipeline {pipeline!r}'s checkpoint {position}: applying it "
            f"would skip the changes in [{position}, {range_.start}). Extract and apply from {position} "
            f"(a range starting at or before it)"
        )
    return range_.end <= position


@dataclass(frozen=True)
class ReplayPlan:
    segments: tuple[Segment, ...]  # still to apply, in binlog order
    # the checkpoint once the batch is applied, for a stream batch not yet applied (a snapshot's
    # copies move it through ``checkpoint_after_copies``)
    end: Checkpoint | None = None

    @property
    def noop(self) -> bool:
        """Nothing to do: no segment to apply and no checkpoint to move."""
        return not self.segments and self.end is None

    @property
    def moves_only(self) -> bool:
        """Only the checkpoint moves (to ``end``): nothing captured is left to apply."""
        return not self.segments and self.end is not None


def checkpoint_at_end(batch: ChangeBatch, checkpoint: Checkpoint) -> Checkpoint:
    """The checkpoint at a stream batch's end: its position, sets and batch id; the last GTID is
    the batch's (or, when the batch knows none, the last one applied before it)."""
    return Checkpoint(batch.pipeline, batch.end, batch.end_gtid or checkpoint.gtid, batch.batch_id,
                      gtid_set=batch.end_gtid_set, leader_id=batch.leader_id)


class SnapshotPendingError(ReplayError):
    """A snapshot's copy has not finished: it must be applied before any stream batch."""


def table_position(checkpoint: Checkpoint, positions: TablePositions, database: str, table: str) -> BinlogPosition:
    """Where the follower's copy of one table stands: its changes before this are applied."""
    return table_position_at(checkpoint.position, positions, database, table)


def table_position_at(position: BinlogPosition, positions: TablePositions, database: str, table: str
                      ) -> BinlogPosition:
    """``table_position`` when the pipeline stands at ``position``: the later of it and the table's copy."""
    copied = positions.copied_at(database, table)
    return max(position, copied) if copied is not None else position


def _covered(segment: DdlSegment, checkpoint: Checkpoint, positions: TablePositions) -> bool:
    """A DDL whose every table target was copied after it: the copies already have its effect."""
    tables = [t for t in segment.targets if t.table is not None]
    return bool(tables) and len(tables) == len(segment.targets) and all(
        segment.end <= table_position(checkpoint, positions, t.database, t.table) for t in tables
    )


def plan_snapshot(batch: ChangeBatch, positions: TablePositions) -> ReplayPlan:
    """The tables of a snapshot batch that still need their copy applied."""
    def applied(segment: SnapshotSegment) -> bool:
        copied = positions.copied_at(segment.database, segment.table)
        return copied is not None and copied >= segment.at

    return ReplayPlan(tuple(s for s in batch.segments if not applied(s)))


def checkpoint_after_copies(batch: ChangeBatch, checkpoint: Checkpoint | None) -> Checkpoint:
    """The pipeline's checkpoint once a snapshot batch's copies are applied. A copy of every table
    moves it to where the copy was planned (the batch's start) when it was behind that, absent, or
    a position on another server (a failover); a copy of some tables leaves it as it is. Every
    copied table then stands at or after it (at its own ``at``, up to the batch's end): the run's
    catch-up brings every table from here to the batch's end."""
    full = bool(batch.segments) and all(getattr(s, "full", False) for s in batch.segments)
    if checkpoint is None or (full and (checkpoint.position < batch.start or not same_leader(checkpoint, batch))):
        return Checkpoint(batch.pipeline, batch.start, None, batch.batch_id, gtid_set=batch.start_gtid_set,
                          leader_id=batch.leader_id)
    return checkpoint


def require_no_pending_snapshot(batch: ChangeBatch, positions: TablePositions) -> None:
    """A stream batch waits for an unfinished copy: the stream would reach tables it has not made."""
    pending = positions.pending_batch()
    if pending is not None:
        raise SnapshotPendingError(
            f"pipeline {batch.pipeline!r} has an unfinished snapshot (batch {pending}): it must be applied "
            f"before batch {batch.batch_id}; the next regular run of the pipeline finishes it"
        )


def same_leader(checkpoint: Checkpoint, batch: ChangeBatch) -> bool:
    """Whether the batch's positions are on the server the checkpoint's are (unknown: yes)."""
    return checkpoint.leader_id is None or batch.leader_id is None or checkpoint.leader_id == batch.leader_id


class OtherLeaderError(ReplayError):
    """The batch was read from another server than the one the checkpoint's position is on."""


def plan_replay(batch: ChangeBatch, checkpoint: Checkpoint | None,
                positions: TablePositions = TablePositions()) -> ReplayPlan:
    if batch.is_snapshot:
        return plan_snapshot(batch, positions)
    require_no_pending_snapshot(batch, positions)
    if checkpoint is not None and not same_leader(checkpoint, batch):
        # FILE:POS of two servers do not compare: the batch's range means nothing here
        raise OtherLeaderError(
            f"batch {batch.batch_id} was read from the leader {batch.leader_id!r}, but the checkpoint of pipeline "
            f"{batch.pipeline!r} is a position on {checkpoint.leader_id!r}: its range cannot be placed; a regular "
            "run of the pipeline extracts the next batch from the leader it is connected to"
        )
    if already_applied(batch.range, checkpoint, batch.pipeline):
        return ReplayPlan(())
    position = checkpoint.position
    segments = tuple(
        s for s in batch.segments
        if s.end > position and not (isinstance(s, DdlSegment) and _covered(s, checkpoint, positions))
    )
    pending = checkpoint.pending_ddl_pos
    if pending is not None:
        first = segments[0] if segments else None
        if not (isinstance(first, DdlSegment) and first.start == pending):
            raise ReplayError(
                f"the checkpoint of pipeline {batch.pipeline!r} has a pending DDL at {pending}, but "
                f"batch {batch.batch_id} continues with {_describe(first)}; apply the batch that holds "
                f"that DDL (a range starting at {pending})"
            )
    return ReplayPlan(segments, checkpoint_at_end(batch, checkpoint))


def _describe(segment: Segment | None) -> str:
    if segment is None:
        return "nothing (only transactions without captured changes)"
    return f"a {segment.kind} segment at [{segment.start}, {segment.end})"
