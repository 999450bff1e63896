"""What a verification compares: the leader's captured tables (``TableShape``), split into chunks of
the first key column (``Chunk``), each summed on one side as (rows, sum and xor of row CRC32s)
(``ChunkSum``). ``ServerChecksums`` sums a chunk inside a MySQL server, as pt-table-checksum does;
``row_checksums`` sums it from the rows, for a follower that is not a database."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pymysql

from ..capture.filters import TableFilter
from ..capture.snapshot.leader_snapshot import quote_name
from ..mysql_server import is_absent


@dataclass(frozen=True)
class ChunkSum:
    """A chunk's aggregate on one side: rows, sum and xor of their CRC32s."""

    rows: int
    crc_sum: int
    crc_xor: int


@dataclass(frozen=True)
class Chunk:
    """Rows of a table whose first key column is in ``[lo, hi)`` (None: open on that side); a
    keyless table is one chunk of everything."""

    index: int
    lo: Any = None
    hi: Any = None

    def where(self, column: str | None) -> tuple[str, list]:
        if column is None:
            return "", []
        conditions, args = [], []
        if self.lo is not None:
            conditions.append(f"{quote_name(column)} >= %s")
            args.append(self.lo)
        if self.hi is not None:
            conditions.append(f"{quote_name(column)} < %s")
            args.append(self.hi)
        return (" WHERE " + " AND ".join(conditions)) if conditions else "", args


@dataclass(frozen=True)
class TableShape:
    """A leader table: its columns with their ``DATA_TYPE``s, and its primary key."""

    database: str
    table: str
    columns: tuple[str, ...]
    key: tuple[str, ...]
    types: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return f"{self.database}.{self.table}"

    @property
    def split_column(self) -> str | None:
        return self.key[0] if self.key else None


def table_shapes(conn, table_filter: TableFilter) -> list[TableShape]:
    """The leader's captured base tables, their columns (generated ones too: both sides compute
    them alike) and primary keys."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT c.TABLE_SCHEMA, c.TABLE_NAME, c.COLUMN_NAME, c.DATA_TYPE FROM information_schema.COLUMNS c "
            "JOIN information_schema.TABLES t ON t.TABLE_SCHEMA = c.TABLE_SCHEMA AND t.TABLE_NAME = c.TABLE_NAME "
            "WHERE t.TABLE_TYPE = 'BASE TABLE' ORDER BY c.TABLE_SCHEMA, c.TABLE_NAME, c.ORDINAL_POSITION")
        columns: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for db, table, column, data_type in cur.fetchall():
            if table_filter.captures_table(db, table):
                columns.setdefault((db, table), []).append((column, data_type.lower()))
        cur.execute("SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME FROM information_schema.STATISTICS "
                    "WHERE INDEX_NAME = 'PRIMARY' ORDER BY TABLE_SCHEMA, TABLE_NAME, SEQ_IN_INDEX")
        keys: dict[tuple[str, str], list[str]] = {}
        for db, table, column in cur.fetchall():
            keys.setdefault((db, table), []).append(column)
    return [TableShape(db, table, tuple(c for c, _ in cols), tuple(keys.get((db, table), ())),
                       tuple(t for _, t in cols)) for (db, table), cols in sorted(columns.items())]


def plan_chunks(conn, shape: TableShape, chunk_rows: int) -> list[Chunk]:
    """Chunks of about ``chunk_rows`` rows by the first key column, bounds read off the leader's
    index; a keyless table is one chunk. Rows sharing a first-column value (a composite key) stay
    in one chunk, so every chunk is the same set of rows on both sides."""
    column = shape.split_column
    if column is None:
        return [Chunk(0)]
    table = f"{quote_name(shape.database)}.{quote_name(shape.table)}"
    with conn.cursor() as cur:
        # every chunk_rows-th distinct value, numbered by the server: only the bounds come back
        cur.execute(
            f"SELECT v FROM (SELECT v, ROW_NUMBER() OVER (ORDER BY v) AS n FROM (SELECT DISTINCT "
            f"{quote_name(column)} AS v FROM {table}) d) numbered WHERE n > 1 AND MOD(n - 1, %s) = 0 ORDER BY n",
            (chunk_rows,))
        bounds = [r[0] for r in cur.fetchall()]
    edges = [None, *bounds, None]
    return [Chunk(i, lo, hi) for i, (lo, hi) in enumerate(zip(edges[:-1], edges[1:]))]


class ServerChecksums:
    """Chunks summed inside a MySQL server: each row hashed by the server (``CRC32`` of its columns
    joined with a separator, plus a NULL bitmap so NULL and '' differ), aggregated into a count, a
    sum and an xor. Only those three numbers per chunk cross the network. The sum makes the
    aggregate a multiset hash, so a keyless table (one chunk, compared as a multiset) with a
    duplicated row does not cancel out as it would under xor alone."""

    def __init__(self, conn):
        self.conn = conn

    def chunks(self, shape: TableShape, chunks: list[Chunk]) -> list[Chunk]:
        return chunks

    def refresh(self) -> None:
        pass

    @staticmethod
    def checksum_sql(shape: TableShape, where: str) -> str:
        cols = [quote_name(c) for c in shape.columns]
        # the NULL bitmap tells NULL from the empty string, which CONCAT_WS would both skip
        nulls = "CONCAT(" + ", ".join(f"ISNULL({c})" for c in cols) + ")"
        row_hash = f"CRC32(CONCAT_WS('#', {', '.join(cols)}, {nulls}))"
        return (f"SELECT COUNT(*), COALESCE(SUM({row_hash}), 0), COALESCE(BIT_XOR({row_hash}), 0) "
                f"FROM {quote_name(shape.database)}.{quote_name(shape.table)}{where}")

    def chunk_sum(self, shape: TableShape, chunk: Chunk) -> ChunkSum | None:
        """The chunk's aggregate; None when the table does not exist here."""
        where, args = chunk.where(shape.split_column)
        try:
            with self.conn.cursor() as cur:
                cur.execute(self.checksum_sql(shape, where), args or None)
                rows, crc_sum, crc_xor = cur.fetchone()
        except pymysql.MySQLError as exc:
            if is_absent(exc):
                return None
            raise
        return ChunkSum(int(rows), int(crc_sum), int(crc_xor))
