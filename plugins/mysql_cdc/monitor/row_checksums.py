"""Chunk checksums computed from the rows themselves, for a follower that is not a database: a
Delta Lake follower (``LakeChecksums``), against the leader's rows hashed the same way
(``LeaderRowChecksums``).

A MySQL follower is checksummed inside both servers (``chunks.ServerChecksums``): each server
prints its own values, so the two texts agree. A lake holds the leader's values in Delta types
(TIME as microseconds, DECIMAL above 38 digits as its text, BIGINT UNSIGNED as DECIMAL(20,0),
FLOAT as a 32-bit float; ``sinks.delta.tables``), and no server can read it. So both sides are
hashed here, from one canonical text per value (``canonical``) that is the same for a leader
value and its lake stand-in: the same chunks and the same (rows, sum, xor) per chunk as a MySQL
follower's verification, but the leader's rows of a chunk cross the network, not three numbers.
"""

from __future__ import annotations

import datetime as dt
import zlib
from decimal import Decimal
from typing import Any, Iterable

from ..capture.snapshot import quote_name
from ..state.delta.location import LakeLocation
from .chunks import Chunk, ChunkSum, TableShape

# Leader column types whose order is the same in MySQL and in the lake's Delta type, so a chunk
# ``[lo, hi)`` of the first key column holds the same rows on both sides. A table keyed by any
# other type (a string: MySQL orders it by its collation, the lake by code point) is one chunk.
ORDERED_TYPES = frozenset({
    "tinyint", "smallint", "mediumint", "int", "bigint", "decimal", "year", "date", "datetime", "timestamp", "time",
})


def canonical(value: Any, data_type: str) -> Any:
    """One value as text (or bytes) that is the same for a leader value (as pymysql returns it)
    and for the lake's value of it (as delta-rs returns it); ``data_type``: the leader column's
    ``DATA_TYPE``."""
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str) and data_type != "decimal":
        return value
    if isinstance(value, bytearray):
        return bytes(value)
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, dt.timedelta):  # a leader TIME; the lake holds its microseconds
        return str((value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds)
    if isinstance(value, dt.datetime):  # a TIMESTAMP's instant is read as UTC on both sides
        if value.tzinfo is not None:
            value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return value.isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (int, Decimal, str)):
        # one spelling per number: BIGINT UNSIGNED is a DECIMAL(20,0) in the lake, a DECIMAL above
        # 38 digits its text, and a DECIMAL's trailing zeros follow its scale
        return format(Decimal(value).normalize(), "f")
    raise TypeError(f"no canonical text for a {type(value).__name__} of a {data_type} column")


def row_crc(values: Iterable[Any], data_types: tuple[str, ...]) -> int:
    text = repr(tuple(canonical(v, t) for v, t in zip(values, data_types)))
    return zlib.crc32(text.encode("utf-8", "surrogatepass"))


def aggregate(crcs: Iterable[int]) -> ChunkSum:
    rows = crc_sum = crc_xor = 0
    for crc in crcs:
        rows, crc_sum, crc_xor = rows + 1, crc_sum + crc, crc_xor ^ crc
    return ChunkSum(rows, crc_sum, crc_xor)


class LeaderRowChecksums:
    """The leader's rows of a chunk, hashed by ``row_crc``. The session reads TIMESTAMP in UTC,
    and FLOAT widened to DOUBLE (exactly: a FLOAT's own text is rounded to 6 digits)."""

    def __init__(self, conn):
        self.conn = conn
        with conn.cursor() as cur:
            cur.execute("SET time_zone = '+00:00'")

    def chunks(self, shape: TableShape, chunks: list[Chunk]) -> list[Chunk]:
        """The leader's chunks where both sides order the split column alike, else one chunk."""
        if shape.split_column is None or shape.types[shape.columns.index(shape.split_column)] not in ORDERED_TYPES:
            return [Chunk(0)]
        return chunks

    def refresh(self) -> None:
        pass

    def chunk_sum(self, shape: TableShape, chunk: Chunk) -> ChunkSum:
        where, args = chunk.where(shape.split_column)
        columns = ", ".join(f"{quote_name(c)} + 0E0" if t == "float" else quote_name(c)
                            for c, t in zip(shape.columns, shape.types))
        with self.conn.cursor() as cur:
            cur.execute(f"SELECT {columns} FROM {quote_name(shape.database)}.{quote_name(shape.table)}{where}",
                        args or None)
            return aggregate(row_crc(row, shape.types) for row in cur.fetchall())


class LakeChecksums:
    """A Delta Lake follower's tables at the pipeline's consistent cut (``state.delta.cut``), read
    with delta-rs, in the leader's chunks (``LeaderRowChecksums.chunks``)."""

    def __init__(self, location: LakeLocation, pipeline: str):
        self.location = location
        self.pipeline = pipeline
        self._cut = None
        self._tables: dict[str, Any] = {}

    def refresh(self) -> None:
        """Read the cut again (a recheck after the next merge)."""
        self._cut, self._tables = None, {}

    def _rows(self, shape: TableShape):
        """The table's rows at the cut as a pyarrow Table, None when the cut has no such table."""
        from ..state.delta.cut import read_cut_at

        if self._cut is None:
            self._cut = read_cut_at(self.location, self.pipeline)
        if shape.name not in self._tables:
            self._tables[shape.name] = _plain_views(self._cut.read(shape.name)) if shape.name in self._cut.versions \
                else None
        return self._tables[shape.name]

    def chunk_sum(self, shape: TableShape, chunk: Chunk) -> ChunkSum | None:
        import pyarrow.compute as pc

        rows = self._rows(shape)
        if rows is None:
            return None
        if shape.split_column is not None:
            key = rows.column(shape.split_column)
            mask = None
            for bound, compare in ((chunk.lo, pc.greater_equal), (chunk.hi, pc.less)):
                if bound is not None:
                    test = compare(key, _lake_scalar(bound, key.type))
                    mask = test if mask is None else pc.and_(mask, test)
            if mask is not None:
                rows = rows.filter(pc.fill_null(mask, False))
        # A column the leader added and no row has carried since is not in the lake yet (the
        # binlog brings a table's columns with its rows): its values are NULL there, as a reader
        # of the lake sees them; with a default other than NULL the chunk differs.
        columns = [rows.column(c).to_pylist() if c in rows.column_names else [None] * rows.num_rows
                   for c in shape.columns]
        return aggregate(row_crc(values, shape.types) for values in zip(*columns))


def _plain_views(rows):
    """delta-rs's query engine returns strings and binaries as Arrow views, which pyarrow cannot
    filter yet: the same values as plain strings and binaries."""
    import pyarrow as pa

    plain = {pa.string_view(): pa.large_string(), pa.binary_view(): pa.large_binary()}
    if not any(f.type in plain for f in rows.schema):
        return rows
    return rows.cast(pa.schema([f.with_type(plain.get(f.type, f.type)) for f in rows.schema]))


def _lake_scalar(bound: Any, arrow_type):
    """A chunk bound (a leader value) as a scalar of the lake column's type."""
    import pyarrow as pa

    if isinstance(bound, dt.timedelta):  # TIME: the lake's microseconds
        bound = (bound.days * 86_400 + bound.seconds) * 1_000_000 + bound.microseconds
    elif isinstance(bound, dt.datetime) and getattr(arrow_type, "tz", None):  # TIMESTAMP: read in UTC
        bound = bound.replace(tzinfo=dt.timezone.utc)
    elif isinstance(bound, int) and pa.types.is_decimal(arrow_type):  # BIGINT UNSIGNED
        bound = Decimal(bound)
    return pa.scalar(bound, type=arrow_type)
