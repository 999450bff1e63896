"""Writes one table's change rows of one segment as rolling Parquet files.

Memory stays flat however long the range: rows are buffered only up to
``chunk_rows``/``chunk_bytes``, then turned into one Arrow record batch (one Parquet row group)
and appended to a local file; the file is uploaded and a new one started every ``file_rows`` /
``file_bytes``. A table the compiled decoder reads (``TableSpec.decoder == "native"``) buffers its
rows as Arrow builders inside the decoder (``NativeRows``); any other as Python tuples.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from urllib.parse import quote

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..contracts import ColumnSpec, TableChanges
from ..contracts import change_row as cr
from ..storage import ObjectStore
from .native import NativeRows
from .packs import TablePacks
from .types import ColumnType


@dataclass(frozen=True)
class WriterLimits:
    chunk_rows: int = 50_000
    chunk_bytes: int = 64 << 20
    file_rows: int = 1_000_000
    file_bytes: int = 256 << 20
    # a table whose segment is one Parquet file of at most this size goes into the segment's pack
    # (``packs``); packs are uploaded at this size
    packed_file_bytes: int = 1 << 20
    pack_bytes: int = 64 << 20


@dataclass(frozen=True)
class RowsOrigin:
    """Where one rows event's rows come from, as every change row records it."""

    file: str
    seq: int  # the file's sequence number
    pos: int  # the event's offset
    commit_ts: int  # its transaction's timestamp
    gtid: str | None
    txn: str  # its transaction's start position
    event_bytes: int
    # rows are numbered from here: events inside one compressed transaction share a position and
    # number their rows on, so (file, position, row index) stays a total order
    first_index: int = 0


@dataclass(frozen=True)
class TableSpec:
    """A table's shape as its binlog table map gives it."""

    database: str
    table: str
    names: tuple[str, ...]
    types: tuple[ColumnType, ...]
    nullable: tuple[bool, ...]
    key_columns: tuple[str, ...]
    # which decoder reads its rows events: "native" (the compiled one) or "python" (the reference)
    decoder: str = "python"

    @property
    def fields(self) -> list[pa.Field]:
        return [pa.field(n, t.arrow_type, nullable) for n, t, nullable in zip(self.names, self.types, self.nullable)]

    @property
    def signature(self) -> tuple:
        return (self.names, tuple(t.mysql_type for t in self.types), self.key_columns)


class RollingParquetFiles:
    """Record batches into Parquet files of at most ``limits.file_rows`` rows / ``file_bytes``
    bytes, each written locally, then uploaded to ``<prefix>/<rel_dir>/part-NNNNN.parquet`` and
    removed. ``files`` lists the uploaded ones, relative to the batch directory."""

    def __init__(self, store: ObjectStore, prefix: str, rel_dir: str, schema: pa.Schema, tmp_dir: str,
                 limits: WriterLimits):
        self.store, self.prefix, self.rel_dir = store, prefix, rel_dir
        self.schema, self.tmp_dir, self.limits = schema, tmp_dir, limits
        self.files: list[str] = []
        self._writer: pq.ParquetWriter | None = None
        self._local = ""
        self._file_rows = self._file_bytes = 0

    def write(self, batch: pa.RecordBatch) -> None:
        if self._writer is None:
            self._local = os.path.join(self.tmp_dir, f"part-{len(self.files):05d}-{id(self)}.parquet")
            # Plain encoding, no dictionaries: a small file's dictionary pages cost its reader a
            # quarter of its CPU (1,000 files of a hundred change rows: 0.65 s against 0.86 s), and
            # a 1M-row change table was smaller (29 MB against 41 MB) and written in 0.4 s of CPU
            # against 0.9 s: snappy finds the repeats a dictionary would have
            self._writer = pq.ParquetWriter(self._local, self.schema, compression="snappy", use_dictionary=False)
        self._writer.write_batch(batch)
        self._file_rows += batch.num_rows
        self._file_bytes += batch.nbytes
        if self._file_rows >= self.limits.file_rows or self._file_bytes >= self.limits.file_bytes:
            self.close_file()

    def close_file(self) -> None:
        """Upload the file in progress, if any."""
        if self._writer is None:
            return
        self._writer.close()
        self._writer = None
        self._upload()

    def _upload(self) -> None:
        rel = f"{self.rel_dir}/part-{len(self.files):05d}.parquet"
        self.store.put_file(self._local, f"{self.prefix}/{rel}")
        os.unlink(self._local)
        self.files.append(rel)
        self._file_rows = self._file_bytes = 0

    def finish(self, packs: TablePacks) -> tuple[tuple[int, int], ...]:
        """Close the file in progress. When it is the only one and at most ``packed_file_bytes``, it
        goes into ``packs``; the spans of ``files`` in their packs are returned (none: uploaded)."""
        if self._writer is None or self.files:
            self.close_file()
            return ()
        self._writer.close()
        self._writer = None
        if os.path.getsize(self._local) > self.limits.packed_file_bytes:
            self._upload()
            return ()
        pack, span = packs.add(self._local)
        self.files.append(pack)
        return (span,)

    def discard(self) -> None:
        """Close and drop the local file in progress (a failed extraction); nothing is uploaded."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
            if os.path.exists(self._local):
                os.unlink(self._local)


# the metadata every row of one rows event shares (the row index is the row's own)
_EVENT_FIELDS = (cr.OP, cr.BINLOG_FILE, cr.BINLOG_SEQ, cr.BINLOG_POS, cr.COMMIT_TS, cr.GTID, cr.TXN)


class TableChangeWriter:
    """One table's change rows of one segment (after-images, metadata, before-images) into rolling
    Parquet files; ``finish`` gives the segment's ``TableChanges`` entry for the manifest."""

    def __init__(self, spec: TableSpec, store: ObjectStore, batch_prefix: str, segment_dir: str,
                 tmp_dir: str, limits: WriterLimits):
        self.spec = spec
        self.store = store
        self.limits = limits
        self.schema = cr.change_row_schema(spec.fields)
        rel_dir = f"{segment_dir}/{quote(spec.database, safe='')}.{quote(spec.table, safe='')}"
        self.parts = RollingParquetFiles(store, batch_prefix, rel_dir, self.schema, tmp_dir, limits)
        self.row_count = 0
        self._converters = [(i, t.convert) for i, t in enumerate(spec.types) if t.convert]
        self.native = NativeRows(spec) if spec.decoder == "native" else None
        self._reset_chunk()

    def _reset_chunk(self) -> None:
        self.rows: list[tuple] = []
        self.befores: list[tuple | None] = []
        # per rows event: its _EVENT_FIELDS, its first row's index, its row count (_meta_arrays)
        self._events: list[tuple] = []
        self._first_indexes: list[int] = []
        self._event_rows: list[int] = []
        self._chunk_rows = 0
        self._chunk_bytes = 0

    def add_event(self, op: str, rows: list[tuple], befores: list[tuple] | None, origin: RowsOrigin) -> None:
        """Append one rows event's rows, decoded by the reference path."""
        self.rows.extend(rows)
        self.befores.extend(befores if befores is not None else [None] * len(rows))
        self._add_meta(len(rows), op, origin)

    def add_native_event(self, table, event_type: int, body: bytes, op: str, origin: RowsOrigin) -> int:
        """Decode one rows event (its type code, its body without header and checksum) with the
        compiled decoder into this writer's buffer; returns its row count."""
        n = self.native.push(table, event_type, body, f"{origin.file}:{origin.pos}")
        self._add_meta(n, op, origin)
        return n

    def _add_meta(self, n: int, op: str, origin: RowsOrigin) -> None:
        """One rows event's metadata, kept once for its ``n`` rows (_meta_arrays spreads it)."""
        self._events.append((op, origin.file, origin.seq, origin.pos, origin.commit_ts, origin.gtid, origin.txn))
        self._first_indexes.append(origin.first_index)
        self._event_rows.append(n)
        self._chunk_rows += n
        self._chunk_bytes += origin.event_bytes
        self.row_count += n
        if self._chunk_rows >= self.limits.chunk_rows or self._chunk_bytes >= self.limits.chunk_bytes:
            self._flush_chunk()

    def _meta_arrays(self) -> list[pa.Array]:
        """The chunk's metadata columns, in the schema's order: an array of each event's values,
        taken once per row of the event; a row's index counts on from its event's first."""
        counts = np.array(self._event_rows, dtype=np.int64)
        event_of_row = pa.array(np.repeat(np.arange(len(counts)), counts))
        firsts = np.cumsum(counts) - counts  # each event's first row in the chunk
        index = np.repeat(np.array(self._first_indexes, dtype=np.int64) - firsts, counts) + np.arange(self._chunk_rows)
        columns = {name: pa.array(values, self.schema.field(name).type).take(event_of_row)
                   for name, values in zip(_EVENT_FIELDS, zip(*self._events))}
        columns[cr.ROW_INDEX] = pa.array(index, pa.int32())
        return [columns[f.name] for f in cr.METADATA_FIELDS]

    def _columns(self, rows: list[tuple]) -> list[list]:
        columns = [list(c) for c in zip(*rows)] if rows else [[] for _ in self.spec.names]
        for i, convert in self._converters:
            columns[i] = [None if v is None else convert(v) for v in columns[i]]
        return columns

    def _python_arrays(self) -> tuple[list[pa.Array], pa.StructArray]:
        fields = self.spec.fields
        columns = self._columns(self.rows)
        arrays = [pa.array(col, type=f.type) for col, f in zip(columns, fields)]
        null_row = (None,) * len(fields)
        before_mask = pa.array([b is None for b in self.befores], pa.bool_())
        before_cols = self._columns([b if b is not None else null_row for b in self.befores])
        before_type = self.schema.field(cr.BEFORE).type
        before = pa.StructArray.from_arrays(
            [pa.array(col, type=f.type) for col, f in zip(before_cols, fields)],
            fields=list(before_type),
            mask=before_mask,
        )
        return arrays, before

    def _record_batch(self) -> pa.RecordBatch:
        arrays, before = self.native.take(self.schema) if self.native else self._python_arrays()
        return pa.RecordBatch.from_arrays([*arrays, *self._meta_arrays(), before], schema=self.schema)

    def _flush_chunk(self) -> None:
        if not self._chunk_rows:
            return
        batch = self._record_batch()
        self._reset_chunk()
        self.parts.write(batch)

    def discard(self) -> None:
        self.parts.discard()

    def finish(self, packs: TablePacks) -> TableChanges:
        """The table's entry of the segment, its last file uploaded or (small) put in ``packs``."""
        self._flush_chunk()
        spans = self.parts.finish(packs)
        columns = tuple(
            ColumnSpec(name, t.mysql_type, str(t.arrow_type), nullable)
            for name, t, nullable in zip(self.spec.names, self.spec.types, self.spec.nullable)
        )
        return TableChanges(
            database=self.spec.database,
            table=self.spec.table,
            columns=columns,
            key_columns=self.spec.key_columns,
            files=tuple(self.parts.files),
            row_count=self.row_count,
            spans=spans,
        )
