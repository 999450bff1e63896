"""Is the follower really equal? Table-by-table checksums computed inside both databases.

As pt-table-checksum does: each row is hashed by the server (``CRC32`` of its columns joined with
a separator, plus a NULL bitmap so NULL and '' differ), and the hashes of a chunk of the primary
key are aggregated into a count, a sum and an xor. Only those three numbers per chunk cross the
network. The sum makes the aggregate a multiset hash, so a keyless table (one chunk, compared as a
multiset) with a duplicated row does not cancel out as it would under xor alone.

The leader keeps writing while we compare, and the follower trails it by up to a schedule
interval, so a chunk can differ only because its changes are in flight. A mismatching chunk is
therefore checked again after the follower's checkpoint has passed the leader's position of the
first check (the next merge), up to ``rechecks`` times; only a chunk that still differs is drift.
Drifted tables are repaired with a resnapshot run, which the result names.

The result is kept in the pipeline's state store (``mysql_cdc.state``) for the CDC page and the API.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass
from typing import Any, Callable

import pymysql

from ..capture.filters import TableFilter
from ..capture.leader import Leader
from ..capture.snapshot import quote_name
from ..contracts import BinlogPosition
from ..contracts.verification import DriftedChunk, VerificationResult
from ..settings import MySQLSettings, VerifyOptions
from ..state import StateStore
from ..state.mysql.schema import is_absent


@dataclass(frozen=True)
class ChunkSum:
    """A chunk's aggregate on one server: rows, sum and xor of their CRC32s."""

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


# -- the checksum queries ------------------------------------------------------------------------


@dataclass(frozen=True)
class TableShape:
    database: str
    table: str
    columns: tuple[str, ...]
    key: tuple[str, ...]

    @property
    def name(self) -> str:
        return f"{self.database}.{self.table}"

    @property
    def split_column(self) -> str | None:
        return self.key[0] if self.key else None

    def checksum_sql(self, where: str) -> str:
        cols = [quote_name(c) for c in self.columns]
        # the NULL bitmap tells NULL from the empty string, which CONCAT_WS would both skip
        nulls = "CONCAT(" + ", ".join(f"ISNULL({c})" for c in cols) + ")"
        row_hash = f"CRC32(CONCAT_WS('#', {', '.join(cols)}, {nulls}))"
        return (f"SELECT COUNT(*), COALESCE(SUM({row_hash}), 0), COALESCE(BIT_XOR({row_hash}), 0) "
                f"FROM {quote_name(self.database)}.{quote_name(self.table)}{where}")


def chunk_sum(conn, shape: TableShape, chunk: Chunk) -> ChunkSum | None:
    """The chunk's aggregate on one server; None when the table does not exist there."""
    where, args = chunk.where(shape.split_column)
    try:
        with conn.cursor() as cur:
            cur.execute(shape.checksum_sql(where), args or None)
            rows, crc_sum, crc_xor = cur.fetchone()
    except pymysql.MySQLError as exc:
        if is_absent(exc):
            return None
        raise
    return ChunkSum(int(rows), int(crc_sum), int(crc_xor))


def table_shapes(conn, table_filter: TableFilter) -> list[TableShape]:
    """The leader's captured base tables, their columns (generated ones too: both sides compute
    them alike) and primary keys."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT c.TABLE_SCHEMA, c.TABLE_NAME, c.COLUMN_NAME FROM information_schema.COLUMNS c "
            "JOIN information_schema.TABLES t ON t.TABLE_SCHEMA = c.TABLE_SCHEMA AND t.TABLE_NAME = c.TABLE_NAME "
            "WHERE t.TABLE_TYPE = 'BASE TABLE' ORDER BY c.TABLE_SCHEMA, c.TABLE_NAME, c.ORDINAL_POSITION")
        columns: dict[tuple[str, str], list[str]] = {}
        for db, table, column in cur.fetchall():
            if table_filter.captures_table(db, table):
                columns.setdefault((db, table), []).append(column)
        cur.execute("SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME FROM information_schema.STATISTICS "
                    "WHERE INDEX_NAME = 'PRIMARY' ORDER BY TABLE_SCHEMA, TABLE_NAME, SEQ_IN_INDEX")
        keys: dict[tuple[str, str], list[str]] = {}
        for db, table, column in cur.fetchall():
            keys.setdefault((db, table), []).append(column)
    return [TableShape(db, table, tuple(cols), tuple(keys.get((db, table), ()))) for (db, table), cols in
            sorted(columns.items())]


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


# -- one verification ----------------------------------------------------------------------------


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


def _compare_all(lconn, fconn, table_filter: TableFilter, chunk_rows: int, result: VerificationResult) -> list[Suspect]:
    """One pass over every captured table: the chunks that differ (``result`` counts the rest)."""
    suspects: list[Suspect] = []
    for shape in table_shapes(lconn, table_filter):
        result.tables += 1
        for chunk in plan_chunks(lconn, shape, chunk_rows):
            result.chunks += 1
            ours, theirs = chunk_sum(lconn, shape, chunk), chunk_sum(fconn, shape, chunk)
            result.rows += ours.rows
            if theirs is None:
                result.missing.append(shape.name)
                break
            if ours != theirs:
                suspects.append((shape, chunk))
    return suspects


def _recheck(server: Leader, lconn, fconn, state: StateStore, pipeline: str, suspects: list[Suspect],
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
        suspects = [(s, c) for s, c in suspects if chunk_sum(lconn, s, c) != chunk_sum(fconn, s, c)]
    return suspects


def verify_pipeline(pipeline: str, leader: MySQLSettings, follower: MySQLSettings, state: StateStore,
                    table_filter: TableFilter, options: VerifyOptions = VerifyOptions(),
                    log: Callable[[str], None] = print) -> VerificationResult:
    """Compare every captured table (``follower``: the MySQL follower whose tables are checksummed),
    recheck what differs after merges (``state``: where the checkpoint is watched), record the
    result in ``state`` and return it."""
    result = VerificationResult(pipeline, dt.datetime.now(dt.timezone.utc))
    with Leader(leader) as server:
        lconn, fconn = server.conn, follower.connect()
        try:
            suspects = _compare_all(lconn, fconn, table_filter, options.chunk_rows, result)
            for shape, chunk in _recheck(server, lconn, fconn, state, pipeline, suspects, options, result, log):
                ours, theirs = chunk_sum(lconn, shape, chunk), chunk_sum(fconn, shape, chunk)
                result.drifted.append(DriftedChunk(shape.name, chunk.index, chunk.lo, chunk.hi, ours.rows,
                                                   theirs.rows if theirs else 0))
            result.finished_at = dt.datetime.now(dt.timezone.utc)
        finally:
            fconn.close()
    state.record_verification(result)
    return result
