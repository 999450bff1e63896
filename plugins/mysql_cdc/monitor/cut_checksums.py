"""A lake follower's side of a verification: its tables at the pipeline's consistent cut, as Arrow
rows read by the kind's own reader, hashed in the leader's chunks (``monitor.row_checksums``: the
same canonical text per value on both sides). Each lake kind gives the reader of its cut
(``kinds.delta.verify``, ``kinds.iceberg.verify``)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any, Callable

from .chunks import Chunk, ChunkSum, TableShape
from .row_checksums import aggregate, row_crc

# reads the cut afresh; returns the reader of its tables: a table's name -> its rows (pyarrow), or
# None when the cut has no such table
CutReader = Callable[[], Callable[[str], Any]]


class CutChecksums:
    """The follower side of ``monitor.verify.ChecksumSides`` for a lake whose cut ``open_cut`` reads."""

    def __init__(self, open_cut: CutReader):
        self.open_cut = open_cut
        self._read: Callable[[str], Any] | None = None
        self._tables: dict[str, Any] = {}

    def refresh(self) -> None:
        """Read the cut again (a recheck after the next merge)."""
        self._read, self._tables = None, {}

    def _rows(self, shape: TableShape):
        if self._read is None:
            self._read = self.open_cut()
        if shape.name not in self._tables:
            rows = self._read(shape.name)
            self._tables[shape.name] = plain_views(rows) if rows is not None else None
        return self._tables[shape.name]

    def chunk_sum(self, shape: TableShape, chunk: Chunk) -> ChunkSum | None:
        import pyarrow.compute as pc

        rows = self._rows(shape)
        if rows is None:
            return None
        if shape.split_column is not None:
            key = rows.column(_spelled(rows, shape.split_column))
            mask = None
            for bound, compare in ((chunk.lo, pc.greater_equal), (chunk.hi, pc.less)):
                if bound is not None:
                    test = compare(key, lake_scalar(bound, key.type))
                    mask = test if mask is None else pc.and_(mask, test)
            if mask is not None:
                rows = rows.filter(pc.fill_null(mask, False))
        # A column the leader added and no row has carried since is not in the lake yet (the
        # binlog brings a table's columns with its rows): its values are NULL there, as a reader
        # of the lake sees them; with a default other than NULL the chunk differs.
        names = {n.lower(): n for n in rows.column_names}
        columns = [rows.column(names[c.lower()]).to_pylist() if c.lower() in names else [None] * rows.num_rows
                   for c in shape.columns]
        return aggregate(row_crc(values, shape.types) for values in zip(*columns))


def _spelled(rows, column: str) -> str:
    return {n.lower(): n for n in rows.column_names}.get(column.lower(), column)


def plain_views(rows):
    """Strings and binaries as plain Arrow types (a reader may give views, which pyarrow cannot
    filter yet), and large ones as they are."""
    import pyarrow as pa

    plain = {pa.string_view(): pa.large_string(), pa.binary_view(): pa.large_binary()}
    if not any(f.type in plain for f in rows.schema):
        return rows
    return rows.cast(pa.schema([f.with_type(plain.get(f.type, f.type)) for f in rows.schema]))


def lake_scalar(bound: Any, arrow_type):
    """A chunk bound (a leader value) as a scalar of the lake column's type."""
    import pyarrow as pa

    if isinstance(bound, dt.timedelta):  # TIME: the lake's microseconds
        bound = (bound.days * 86_400 + bound.seconds) * 1_000_000 + bound.microseconds
    elif isinstance(bound, dt.datetime) and getattr(arrow_type, "tz", None):  # TIMESTAMP: read in UTC
        bound = bound.replace(tzinfo=dt.timezone.utc)
    elif isinstance(bound, int) and pa.types.is_decimal(arrow_type):  # BIGINT UNSIGNED
        bound = Decimal(bound)
    return pa.scalar(bound, type=arrow_type)
