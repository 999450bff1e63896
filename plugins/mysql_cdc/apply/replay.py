"""Exactly-once rules: which parts of a batch still need applying, given the follower checkpoint.

A checkpoint is a transaction boundary P: the follower equals the leader as of P.

- ``batch.end <= P``: everything in the batch is already applied: a no-op.
- ``batch.start > P``: the changes in ``[P, batch.start)`` were never applied: a gap, an error.
- otherwise the segments whose ``end > P`` are applied in order; inside the one segment that may
  straddle P (a batch re-extracted with other boundaries), a row is applied iff its event position
  is ``>= P`` (see ``spark_jobs.merge_batch.after_checkpoint``).
- a checkpoint carrying a pending-DDL marker at Q must continue with the DDL segment starting at
  Q: the marker says "this DDL may or may not have run", and only that segment can settle it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..contracts import ChangeBatch, Checkpoint, DdlSegment, Segment
from .errors import CheckpointError


@dataclass(frozen=True)
class ReplayPlan:
    segments: tuple[Segment, ...]  # still to apply, in binlog order

    @property
    def noop(self) -> bool:
        return not self.segments


def require_checkpoint(checkpoint: Checkpoint | None, pipeline: str) -> Checkpoint:
    if checkpoint is None:
        raise CheckpointError(
            f"the follower has no checkpoint for pipeline {pipeline!r} in `_mysql_cdc`.`checkpoint`: "
            "initialize it with the binlog position the follower's data corresponds to (the pipeline's "
            "DAG does this on its first run; by hand: mysql_cdc.contracts.write_checkpoint) and rerun"
        )
    return checkpoint


def plan_replay(batch: ChangeBatch, checkpoint: Checkpoint) -> ReplayPlan:
    position = checkpoint.position
    if batch.start > position:
        raise CheckpointError(
            f"gap: batch {batch.batch_id} starts at {batch.start} but the follower's checkpoint for "
            f"pipeline {batch.pipeline!r} is at {position}; the changes in [{position}, {batch.start}) "
            f"were never applied. Extract and merge that range first (a backfill from {position})"
        )
    if batch.end <= position:
        return ReplayPlan(())
    segments = tuple(s for s in batch.segments if s.end > position)
    pending = checkpoint.pending_ddl_pos
    if pending is not None:
        first = segments[0] if segments else None
        if not (isinstance(first, DdlSegment) and first.start == pending):
            raise CheckpointError(
                f"the checkpoint of pipeline {batch.pipeline!r} has a pending DDL at {pending}, but "
                f"batch {batch.batch_id} continues with {_describe(first)}; merge the batch that holds "
                f"that DDL (re-extract the range starting at {pending})"
            )
    return ReplayPlan(segments)


def _describe(segment: Segment | None) -> str:
    if segment is None:
        return "nothing (only transactions without captured changes)"
    return f"a {segment.kind} segment at [{segment.start}, {segment.end})"
