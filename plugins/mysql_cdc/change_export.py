"""A pipeline's change rows as plain Parquet files, one per table and row segment, that any Parquet
reader opens (DuckDB, Spark, Athena, pandas, Polars).

The batches themselves stay as they are written: a segment's small tables are appended to one
``.pack`` object (one request per segment instead of one per table, ``docs/batch-format.md``),
whose spans only the manifest knows, so a reader listing the bucket cannot open them. This reads
a range of batches through the manifest, as the merge does, and writes each table's change rows
of each row segment to ``<out>/<db>.<table>/<batch id>.<segment>.parquet``: the table's columns,
then every change-row column (``contracts.change_row``: ``_op``, the binlog coordinates, the
commit time, the GTID, the transaction, the whole before-image of updates). Copies (snapshot
batches) are not changes and are not exported.

    PYTHONPATH=plugins python -m mysql_cdc.cli changes --storage-uri s3://bucket/cdc --pipeline shop \\
        --out file:///data/shop-changes [--table 'shop.orders'] [--start binlog.000003:4] [--end ...]
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .contracts import BinlogPosition, ChangeBatch, RowSegment, TableChanges
from .contracts import change_row as cr
from .merge.reader import change_schema, read_tables
from .storage import ObjectStore, list_batches

# every change-row column, the whole before-image included (``merge.reader.change_schema``)
ALL_METADATA = frozenset(f.name for f in cr.METADATA_FIELDS) | {cr.BEFORE}


@dataclass(frozen=True)
class ExportedFile:
    table: str  # the leader's db.table
    uri: str
    rows: int


def batches_in(store: ObjectStore, pipeline: str, start: BinlogPosition | None,
               end: BinlogPosition | None) -> list[ChangeBatch]:
    """The pipeline's stream batches that hold changes in ``[start, end)`` (either end open)."""
    return [b for b in list_batches(store, pipeline)
            if not b.is_snapshot and (start is None or b.end > start) and (end is None or b.start < end)]


def _segments(batch: ChangeBatch, start: BinlogPosition | None,
              end: BinlogPosition | None) -> Iterator[RowSegment]:
    for segment in batch.segments:
        if isinstance(segment, RowSegment) and (start is None or segment.end > start) and \
                (end is None or segment.start < end):
            yield segment


def _at_or_after(rows: pa.Table, p: BinlogPosition):
    """Whether each row's event is at or after ``p`` (by binlog sequence, then offset)."""
    seq, pos = rows.column(cr.BINLOG_SEQ), rows.column(cr.BINLOG_POS)
    return pc.or_(pc.greater(seq, p.sequence), pc.and_(pc.equal(seq, p.sequence), pc.greater_equal(pos, p.offset)))


def _in_range(rows: pa.Table, start: BinlogPosition | None, end: BinlogPosition | None) -> pa.Table:
    """The rows whose event lies in ``[start, end)``: a segment straddling an end is cut to it."""
    if start is not None:
        rows = rows.filter(_at_or_after(rows, start))
    if end is not None:
        rows = rows.filter(pc.invert(_at_or_after(rows, end)))
    return rows


def export_changes(store: ObjectStore, pipeline: str, out: ObjectStore, tables: Sequence[str] = ("*.*",),
                   start: BinlogPosition | None = None, end: BinlogPosition | None = None) -> list[ExportedFile]:
    """Write the change rows of ``pipeline``'s batches in ``[start, end)`` of the tables matching
    ``tables`` (``db.table`` globs) to ``out``; returns the files written, in binlog order."""
    written = []
    for batch in batches_in(store, pipeline, start, end):
        for segment in _segments(batch, start, end):
            wanted = [t for t in segment.tables if any(fnmatchcase(t.qualified_name, g) for g in tables)]
            if not wanted:
                continue
            read = read_tables(store, batch.prefix, [(change_schema(t, ALL_METADATA), t) for t in wanted])
            for table, rows in zip(wanted, read):
                rows = _in_range(rows, start, end)
                if rows.num_rows:
                    written.append(_write(out, batch, segment, table, rows))
    return written


def _write(out: ObjectStore, batch: ChangeBatch, segment: RowSegment, table: TableChanges,
           rows: pa.Table) -> ExportedFile:
    buffer = io.BytesIO()
    pq.write_table(rows, buffer, compression="zstd")
    key = f"{table.qualified_name}/{batch.batch_id}.{segment.index:05d}.parquet"
    out.put_bytes(key, buffer.getvalue())
    return ExportedFile(table.qualified_name, out.uri_of(key), rows.num_rows)
