"""Is the follower really equal? Table-by-table checksums of key chunks, on both sides.

Every captured table of the leader is split into chunks of its first key column (a keyless table
is one chunk, compared as a multiset); each chunk is summed on the leader and on the follower as
(rows, sum and xor of row CRC32s) and the two compared (``chunks``). The follower's kind says how
(its hook's ``checksum_sides``): a database sums its chunks inside the server, like the leader
(``chunks.ServerChecksums``); a lake's chunks are read at the pipeline's consistent cut and summed
from the rows, against the leader's rows summed the same way (``row_checksums``).

The leader keeps writing while we compare, and the follower trails it by up to a schedule
interval, so a chunk can differ only because its changes are in flight. A mismatching chunk is
therefore checked again after the follower's checkpoint has passed the leader's position of the
first check (the next merge), up to ``rechecks`` times; only a chunk that still differs is drift.
Drifted tables are repaired with a resnapshot run, which the result names.

The result is kept in the pipeline's state store (``mysql_cdc.state_store``) for the CDC page and the API.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any, Callable, Protocol

from ..capture.filters import TableFilter
from ..capture.leader import Leader
from ..contracts import BinlogPosition
from ..contracts.verification import DriftedChunk, VerificationResult
from ..mysql_server import MySQLSettings
from ..pipeline_options import VerifyOptions
from ..state_store import StateStore
from .chunks import Chunk, ChunkSum, TableShape, plan_chunks, table_shapes

class ChecksumSide(Protocol):
    def chunks(self, shape: TableShape, chunks: list[Chunk]) -> list[Chunk]:
        """The leader's chunks as this pair of sides can compare them."""

    def refresh(self) -> None:
        """Before a recheck: forget what was read (a lake's cut)."""

    def chunk_sum(self, shape: TableShape, chunk: Chunk) -> ChunkSum | None:
        """The chunk's aggregate; None when the table is not there."""


class ChecksumSides:
    """The leader's side and the follower's, opened for one verification."""

    def __init__(self, leader: ChecksumSide, follower: ChecksumSide, close: Callable[[], None] = lambda: None):
        self.leader, self.follower, self.close = leader, follower, close


# How a follower is compared with the leader: its kind's hook gives one (``checksum_sides``), opened
# on the leader's connection for a pipeline.
FollowerSides = Callable[[Any, str], ChecksumSides]


def wait_for_merge(state: StateStore, pipeline: str, past: BinlogPosition, timeout: float,
                   sleep: Callable[[float], None] = time.sleep) -> bool:
    """Wait until the pipeline's checkpoint is at or past ``past``; False on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        checkpoint = state.checkpoint(pipeline)
        if checkpoint is not None and checkpoint.position >= past:
            return True
        if time.monotonic() >= deadline:
            return False
        sleep(min(2.0, max(0.1, deadline - time.monotonic())))


Suspect = tuple[TableShape, Chunk]


def _compare_all(lconn, sides: ChecksumSides, table_filter: TableFilter, chunk_rows: int,
                 result: VerificationResult) -> list[Suspect]:
    """One pass over every captured table: the chunks that differ (``result`` counts the rest)."""
    suspects: list[Suspect] = []
    for shape in table_shapes(lconn, table_filter):
        result.tables += 1
        for chunk in sides.leader.chunks(shape, plan_chunks(lconn, shape, chunk_rows)):
            result.chunks += 1
            ours, theirs = sides.leader.chunk_sum(shape, chunk), sides.follower.chunk_sum(shape, chunk)
            result.rows += ours.rows
            # a table the follower lacks is a suspect too: the leader may have created it after the
            # follower's checkpoint (in flight, like a chunk's changes), so it is missing only if it
            # is still absent after the rechecks' merges
            if ours != theirs:
                suspects.append((shape, chunk))
    return suspects


def _recheck(server: Leader, sides: ChecksumSides, state: StateStore, pipeline: str, suspects: list[Suspect],
             options: VerifyOptions, result: VerificationResult, log: Callable[[str], None]) -> list[Suspect]:
    """Check the differing chunks again after each of up to ``rechecks`` merges: what the merge
    brought over was in flight; what still differs is returned."""
    for round_ in range(options.rechecks):
        if not suspects:
            break
        at = server.current_position()
        log(f"{len(suspects)} chunk(s) differ; waiting for the follower to pass {at} (recheck {round_ + 1} "
            f"of {options.rechecks})")
        if not wait_for_merge(state, pipeline, at, options.settle_timeout):
            log(f"the pipeline did not merge past {at} within {options.settle_timeout:g}s; rechecking anyway")
        result.rechecked += len(suspects)
        sides.follower.refresh()
        suspects = [(s, c) for s, c in suspects if sides.leader.chunk_sum(s, c) != sides.follower.chunk_sum(s, c)]
    return suspects


def verify_pipeline(pipeline: str, leader: MySQLSettings, follower: FollowerSides, state: StateStore,
                    table_filter: TableFilter, options: VerifyOptions = VerifyOptions(),
                    log: Callable[[str], None] = print) -> VerificationResult:
    """Compare every captured table with the follower (``follower``: its kind's checksum sides,
    ``FollowerHookBase.checksum_sides``), recheck what differs after merges (``state``: where the checkpoint is
    watched), record the result in ``state`` and return it."""
    result = VerificationResult(pipeline, dt.datetime.now(dt.timezone.utc))
    with Leader(leader) as server:
        result.behind = _behind(server, state, pipeline, options.settle_timeout, log)
        if result.behind is None:
            _compare(server, follower(server.conn, pipeline), state, pipeline, table_filter, options, result, log)
        result.finished_at = dt.datetime.now(dt.timezone.utc)
    state.record_verification(result)
    return result


def _behind(server: Leader, state: StateStore, pipeline: str, timeout: float, log: Callable[[str], None]) -> str | None:
    """None once the follower has reached the leader's position of now (waiting up to ``timeout``):
    comparing before would count changes in flight, or a table the leader just created, as drift.
    Otherwise why nothing can be compared."""
    at = server.current_position()
    checkpoint = state.checkpoint(pipeline)
    if checkpoint is None:
        return f"the pipeline has no checkpoint yet (its first run has not started); the leader is at {at}"
    if checkpoint.position < at:
        log(f"the follower is at {checkpoint.position}, the leader at {at}: waiting up to {timeout:g}s for a merge")
        if not wait_for_merge(state, pipeline, at, timeout):
            now = state.checkpoint(pipeline)
            return (f"the follower's checkpoint {now.position if now else None} had not reached the leader's position "
                    f"{at} of the verification's start within settle_timeout ({timeout:g}s): the pipeline is behind "
                    "(its lag says how far); verify again once it has caught up")
    return None


def _compare(server: Leader, sides: ChecksumSides, state: StateStore, pipeline: str, table_filter: TableFilter,
             options: VerifyOptions, result: VerificationResult, log: Callable[[str], None]) -> None:
    try:
        suspects = _compare_all(server.conn, sides, table_filter, options.chunk_rows, result)
        for shape, chunk in _recheck(server, sides, state, pipeline, suspects, options, result, log):
            ours, theirs = sides.leader.chunk_sum(shape, chunk), sides.follower.chunk_sum(shape, chunk)
            if theirs is None:  # still absent after the rechecks' merges
                if shape.name not in result.missing:
                    result.missing.append(shape.name)
                continue
            result.drifted.append(DriftedChunk(shape.name, chunk.index, chunk.lo, chunk.hi, ours.rows, theirs.rows))
    finally:
        sides.close()
