"""Extract a binlog range ``[start, end)`` into one change batch.

``extract_range(settings, request, target)``: ``RangeRequest`` says what to read (the pipeline,
the range, its tables, where the range starts from), ``BatchTarget`` where the batch goes. A range
over several binlog files is read in parts at once, cut at file starts, each by its own reader
process (``RangeRead``), and their parts combined into one batch whose manifest is written last;
``binlog_capture`` turns one reader's events into batch content.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Sequence

from ...contracts import (
    MANIFEST_NAME, BinlogPosition, ChangeBatch, PositionRange, RowSegment, TablePositions, batch_id_for, batch_prefix,
)
from ...pipeline_options import ExtractOptions
from ...mysql_server import MySQLSettings
from ...storage import ObjectStore, StorageSpec, commit_batch
from .binlog_capture import BinlogCapture, StopReading
from .binlog_stream import BinlogReader
from ..change_batch import ChangeBatchWriter
from ..events import CaptureError
from ..filters import TableFilter
from ..leader import BinlogFile, Leader
from ..table_changes import WriterLimits
from ..workers import worker_pool

log = logging.getLogger(__name__)

# who frames the binlog's events for each decoder: the compiled core frames for the compiled
# decoder; the reference decoder keeps the library's framing, the reference for both
FRAMING_OF = {"native": "native", "python": "library"}

PART_MANIFEST = "part.json"  # what commits a part of a batch (a reader's share, a copy's catch-up)


@dataclass(frozen=True)
class RangeRequest:
    """What to read: a pipeline's range of the binlog, which tables, and what it starts from.

    ``positions``: tables copied by a snapshot, whose events before their copy are skipped;
    ``start_gtid`` / ``start_gtid_set``: the last GTID and the executed set at the range's start
    when the caller knows them (a checkpoint carries them; else the leader is asked for the set);
    ``track_gtids`` False leaves the batch without sets (a copy's catch-up changes, which never
    become a checkpoint)."""

    pipeline: str
    range: PositionRange
    table_filter: TableFilter = TableFilter()
    positions: TablePositions = TablePositions()
    start_gtid: str | None = None
    start_gtid_set: str | None = None
    track_gtids: bool = True


@dataclass(frozen=True)
class BatchTarget:
    """Where a batch is written: ``store`` (open), ``storage`` (how a worker process opens it; None:
    no worker processes), ``prefix`` (None: the pipeline's ``batches/<id>``) and the file whose
    writing commits it (only ``manifest.json`` makes a batch; a part is committed by another)."""

    store: ObjectStore
    storage: StorageSpec | None = None
    prefix: str | None = None
    manifest_name: str = MANIFEST_NAME

    def prefix_for(self, request: RangeRequest) -> str:
        return self.prefix or batch_prefix(request.pipeline, batch_id_for(request.range))


@dataclass(frozen=True)
class RangeRead:
    """One reader's share of a range: plain values, so a worker process can take it. ``flavor``
    and ``leader_id`` are the leader's, asked once for all the parts."""

    settings: MySQLSettings
    request: RangeRequest
    prefix: str
    manifest_name: str
    flavor: str
    leader_id: str
    storage: StorageSpec | None = None
    limits: WriterLimits = WriterLimits()
    decoder: str = "native"  # ExtractOptions.decoder


def read_range(read: RangeRead, store: ObjectStore | None = None) -> ChangeBatch:
    """Read ``read.request.range`` with one binlog reader into a batch (or a part of one)."""
    store = store or read.storage.open()
    request = read.request
    with ChangeBatchWriter(store, request.pipeline, request.range, read.limits, read.flavor, read.prefix,
                           read.leader_id, read.manifest_name) as writer, \
            BinlogReader(read.settings, request.range.start, framing=FRAMING_OF[read.decoder]) as reader:
        capture = BinlogCapture(writer, request.table_filter, request.start_gtid, reader.inflater, request.positions,
                                request.start_gtid_set, read.decoder)
        try:
            for event in reader:
                if type(event) is not tuple:
                    capture.handle(event)
                elif not capture.handle_frame(*event):  # a framed event the capture does not read itself
                    library_event = reader.library_event(event[4])
                    if library_event is not None:  # (None: dropped, as the library's own reading drops it)
                        capture.handle(library_event)
                if capture.done():
                    break
            else:
                raise CaptureError(
                    f"the leader's binlog ended at {capture.position} before the range end {request.range.end}"
                )
        except StopReading:
            pass
        return capture.finish()


def split_range(range_: PositionRange, files: Sequence[BinlogFile], parts: int,
                min_part_bytes: int = 0) -> list[PositionRange]:
    """The range cut at binlog file starts (transaction boundaries every server knows without
    reading a byte) into at most ``parts`` pieces of about equal size, each worth its own reader
    process: no more pieces than ``min_part_bytes`` of binlog fit in the range."""
    inside = [f for f in files if range_.start < BinlogPosition(f.name, 4) < range_.end]
    if parts <= 1 or not inside:
        return [range_]
    names = [f.name for f in files]
    sizes = {f.name: f.size for f in files}
    first = range_.start.file
    spans = [(first, max(sizes.get(first, 0) - range_.start.offset, 0))]
    spans += [(f.name, f.size if f.name != range_.end.file else range_.end.offset) for f in inside]
    total = sum(size for _, size in spans) or 1
    if min_part_bytes > 0:
        parts = min(parts, total // min_part_bytes)
        if parts <= 1:
            return [range_]
    cuts, running = [], 0
    for (name, size), (_, following_size) in zip(spans[:-1], spans[1:]):
        running += size
        target = total * (len(cuts) + 1) / parts
        # cut here when it lands nearer the next share's end than cutting after the next file would
        if len(cuts) < parts - 1 and abs(running - target) <= abs(running + following_size - target):
            cuts.append(BinlogPosition(names[names.index(name) + 1], 4))
    edges = [range_.start, *cuts, range_.end]
    return [PositionRange(a, b) for a, b in zip(edges[:-1], edges[1:])]


def _combine(request: RangeRequest, reads: Sequence[RangeRead], parts: Sequence[ChangeBatch], target: BatchTarget,
             prefix: str) -> ChangeBatch:
    """One batch of the parts, their segments in binlog order; committed last, under the target's
    manifest name (a part of something else stays a part)."""
    range_, pipeline = request.range, request.pipeline
    segments: list = []
    for read, part in zip(reads, parts):
        rel = read.prefix[len(prefix) + 1:]
        for segment in part.segments:
            segment = replace(segment, index=len(segments))
            if isinstance(segment, RowSegment):
                segment = replace(segment, tables=tuple(
                    replace(t, files=tuple(f"{rel}/{f}" for f in t.files)) for t in segment.tables))
            segments.append(segment)
    last_gtids = [p.end_gtid for p in parts if p.end_gtid] or [request.start_gtid]
    batch = ChangeBatch(
        pipeline=pipeline, batch_id=batch_id_for(range_), start=range_.start, end=range_.end,
        segments=tuple(segments), start_gtid=request.start_gtid, end_gtid=last_gtids[-1],
        start_gtid_set=parts[0].start_gtid_set, end_gtid_set=parts[-1].end_gtid_set, leader_id=parts[0].leader_id,
        end_time=next((p.end_time for p in reversed(parts) if p.end_time is not None), None),
        server_flavor=parts[0].server_flavor, row_count=sum(p.row_count for p in parts),
    )
    commit_batch(target.store, prefix, batch, target.manifest_name)
    return batch


def _read_parts(reads: list[RangeRead]) -> list[ChangeBatch]:
    with worker_pool(len(reads)) as pool:
        return list(pool.map(read_range, reads))


def extract_range(settings: MySQLSettings, request: RangeRequest, target: BatchTarget,
                  options: ExtractOptions = ExtractOptions(), limits: WriterLimits = WriterLimits()) -> ChangeBatch | None:
    """Write the batch of ``request`` to ``target`` (committed last) and return it; None for an
    empty range.

    A range over several binlog files, given ``target.storage`` (what a worker process opens), is
    read in ``options.workers`` parts at once, cut at file starts, each by its own reader (its own
    server_id) in its own process, into ``part-NNN/``; the batch's manifest lists their segments
    in binlog order, so the merge applies it as if one reader had read it."""
    range_ = request.range
    with Leader(settings) as leader:
        leader.check_settings()
        leader.check_range(range_)
        if range_.empty:
            return None
        flavor, leader_id = leader.flavor, leader.leader_id
        pieces = split_range(range_, leader.binlog_files(), options.workers if target.storage is not None else 1,
                             options.min_part_mb << 20)
        sets = [request.start_gtid_set if i == 0 and request.start_gtid_set is not None
                else leader.gtid_set_at(piece.start)
                for i, piece in enumerate(pieces)] if request.track_gtids else [None] * len(pieces)
    prefix = target.prefix_for(request)
    if len(pieces) == 1:
        read = RangeRead(settings, replace(request, start_gtid_set=sets[0]), prefix, target.manifest_name, flavor,
                         leader_id, limits=limits, decoder=options.decoder)
        batch = read_range(read, target.store)
    else:
        target.store.delete_prefix(f"{prefix}/{target.manifest_name}")  # first: no batch until it is whole
        target.store.delete_prefix(f"{prefix}/")
        reads = [RangeRead(settings, replace(request, range=piece, start_gtid=request.start_gtid if i == 0 else None,
                                             start_gtid_set=sets[i]),
                           f"{prefix}/part-{i:03d}", PART_MANIFEST, flavor, leader_id, target.storage, limits,
                           options.decoder)
                 for i, piece in enumerate(pieces)]
        batch = _combine(request, reads, _read_parts(reads), target, prefix)
    log.info("extracted %s %s: %d segments, %d rows (%d part%s)", request.pipeline, range_, len(batch.segments),
             batch.row_count, len(pieces), "" if len(pieces) == 1 else "s")
    return batch
