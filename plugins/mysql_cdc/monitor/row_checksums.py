"""Chunk checksums computed from the rows themselves, for a follower that is not a database (a
lake's side is ``monitor.cut_checksums``), against the leader's rows
hashed the same way (``LeaderRowChecksums``).

A MySQL follower is checksummed inside both servers (``chunks.ServerChecksums``): each server
prints its own values, so the two texts agree. A lake holds the leader's values in Delta types
(TIME as microseconds, DECIMAL above 38 digits as its text, BIGINT UNSIGNED as DECIMAL(20,0),
FLOAT as a 32-bit float; ``kinds.delta.sink.tables``), and no server can read it. So both sides are
hashed here, from one canonical text per value (``canonical``) that is the same for a leader
value and its lake stand-in: the same chunks and the same (rows, sum, xor) per chunk as a MySQL
follower's verification, but the leader's rows of a chunk cross the network, not three numbers.
"""

from __future__ import annotations

import datetime as dt
import zlib
from decimal import Decimal
from typing import Any, Iterable

from ..capture.snapshot.leader_snapshot import quote_name
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
