"""Writes one change batch: its segments in order, then its manifest, last.

The part of capture that does not care where rows come from. The binlog capture
(``binlog_capture``) feeds it row changes and DDL as it meets them; a table copy (the snapshot) feeds it
rows of a table read at one position. Either way:

- ``begin`` removes what a previous attempt at the same range left (the manifest first, so a
  crash below leaves "no batch", never a manifest pointing at half-rewritten files);
- row changes go to one ``TableChangeWriter`` (``table_changes``) per table of the open row segment; a DDL closes
  the open row segment and is a segment of its own;
- ``commit`` writes ``manifest.json``: the batch exists from that moment on;
- local temp files are removed however the writer is left (``with ChangeBatchWriter(...)``).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field

from ..contracts import (
    MANIFEST_NAME,
    BinlogPosition,
    ChangeBatch,
    DdlSegment,
    DdlTarget,
    PositionRange,
    RowSegment,
    batch_id_for,
    batch_prefix,
)
from ..storage import ObjectStore, commit_batch, local_temp_dir
from .packs import TablePacks
from .table_changes import TableChangeWriter, TableSpec, WriterLimits


def _segment_dir(index: int) -> str:
    return f"seg-{index:05d}"


@dataclass
class _OpenRowSegment:
    start: BinlogPosition
    writers: dict[tuple[str, str], TableChangeWriter] = field(default_factory=dict)


class ChangeBatchWriter:
    """Collects one batch's segments as its source meets them and commits the manifest."""

    def __init__(self, store: ObjectStore, pipeline: str, range_: PositionRange,
                 limits: WriterLimits = WriterLimits(), server_flavor: str = "mariadb", prefix: str | None = None,
                 leader_id: str | None = None, manifest_name: str = MANIFEST_NAME):
        self.store = store
        self.leader_id = leader_id
        # another name for what is part of a batch, not one (a part of a parallel extraction, a
        # snapshot's catch-up changes): only manifest.json makes a batch
        self.manifest_name = manifest_name
        self.pipeline = pipeline
        self.range = range_
        self.limits = limits
        self.server_flavor = server_flavor
        self.batch_id = batch_id_for(range_)
        # ``prefix``: somewhere else than the pipeline's batches (a snapshot's catch-up changes)
        self.prefix = prefix or batch_prefix(pipeline, self.batch_id)
        self.segments: list = []
        self.open_rows = _OpenRowSegment(range_.start)
        self.tmp_dir: str | None = None

    def __enter__(self) -> "ChangeBatchWriter":
        self.begin()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def begin(self) -> None:
        self.store.delete_prefix(f"{self.prefix}/{self.manifest_name}")
        self.store.delete_prefix(self.prefix)
        self.tmp_dir = local_temp_dir()

    def close(self) -> None:
        """Drop local temp files (partial Parquet files of a failed extraction included)."""
        for writer in self.open_rows.writers.values():
            writer.discard()
        if self.tmp_dir:
            shutil.rmtree(self.tmp_dir, ignore_errors=True)
            self.tmp_dir = None

    # -- rows -----------------------------------------------------------------------------------

    def table_writer(self, spec: TableSpec) -> TableChangeWriter:
        """The writer of ``spec``'s table in the open row segment (the existing one, if any: the
        caller compares its ``spec.signature`` to tell a shape change)."""
        key = (spec.database, spec.table)
        writer = self.open_rows.writers.get(key)
        if writer is None:
            writer = TableChangeWriter(spec, self.store, self.prefix, _segment_dir(len(self.segments)), self.tmp_dir,
                                       self.limits)
            self.open_rows.writers[key] = writer
        return writer

    def close_rows(self, end: BinlogPosition, gtid_set: str | None = None) -> None:
        """End the open row segment at the transaction boundary ``end`` (where the leader had
        executed ``gtid_set``)."""
        if self.open_rows.writers:
            packs = TablePacks(self.store, self.prefix, _segment_dir(len(self.segments)), self.tmp_dir,
                               self.limits.pack_bytes)
            try:
                # (in table order: a group of neighbouring tables the merge prepares together is one
                # range of a pack)
                tables = tuple(w.finish(packs) for _, w in sorted(self.open_rows.writers.items()))
                packs.close()
            finally:
                packs.discard()
            self.segments.append(RowSegment(len(self.segments), self.open_rows.start, end, tables, gtid_set))
        self.open_rows = _OpenRowSegment(end)

    # -- DDL ------------------------------------------------------------------------------------

    def add_ddl(self, start: BinlogPosition, end: BinlogPosition, schema: str, statement: str, action: str,
                targets: tuple[DdlTarget, ...], gtid: str | None, gtid_set_before: str | None = None,
                gtid_set_after: str | None = None) -> None:
        self.close_rows(start, gtid_set_before)
        self.segments.append(DdlSegment(
            index=len(self.segments), start=start, end=end, schema=schema, statement=statement,
            action=action, targets=targets, gtid=gtid, gtid_set=gtid_set_after,
        ))
        self.open_rows = _OpenRowSegment(end)

    # -- the manifest ---------------------------------------------------------------------------

    def commit(self, end: BinlogPosition, start_gtid: str | None, end_gtid: str | None,
               start_gtid_set: str | None = None, end_gtid_set: str | None = None,
               end_time: int | None = None) -> ChangeBatch:
        """Close the last row segment at ``end`` and write the manifest: the batch now exists."""
        self.close_rows(end, end_gtid_set)
        batch = ChangeBatch(
            pipeline=self.pipeline,
            batch_id=self.batch_id,
            start=self.range.start,
            end=self.range.end,
            segments=tuple(self.segments),
            start_gtid=start_gtid,
            end_gtid=end_gtid,
            start_gtid_set=start_gtid_set,
            end_gtid_set=end_gtid_set,
            leader_id=self.leader_id,
            end_time=end_time,
            server_flavor=self.server_flavor,
            row_count=sum(getattr(s, "row_count", 0) for s in self.segments),
        )
        commit_batch(self.store, self.prefix, batch, self.manifest_name)
        return batch
