"""Snapshot reads: a table's rows (or a key range of them) read in a consistent read view whose
binlog position is known exactly. ``snapshot_copy`` plans a copy and runs these reads in chunks.

How the position is made consistent with the rows, without stopping the leader's writes:

- **MariaDB**: ``START TRANSACTION WITH CONSISTENT SNAPSHOT`` opens an InnoDB read view and, in the
  same step, records the binlog position of exactly the transactions that view sees; the session
  status ``binlog_snapshot_file`` / ``binlog_snapshot_position`` reports it. No lock at all.
- **MySQL** has no such status. Each read view is opened under ``FLUSH TABLES WITH READ LOCK``,
  held for the moment it takes to open the view and read ``SHOW BINARY LOG STATUS``, as
  ``mysqldump --single-transaction --source-data`` does: commits pause for milliseconds once per
  chunk, the reads themselves hold no lock. It needs the RELOAD privilege.

Rows stream (an unbuffered read) and are written in bounded Arrow chunks to rolling Parquet files,
so memory does not grow with the table. The compiled decoder (``native.ResultRows``) parses the
rows' packets straight into Arrow arrays; PyMySQL's own parsing (``decoder: python``) stays as
the reference it is tested against. Values are converted to the same Arrow types the
binlog capture gives each column type (``types``), selected so that every value is exact: a FLOAT
is read as ``CAST(col AS DOUBLE)`` (its exact widening; FLOAT's own text has 6 digits), a
TIMESTAMP in a UTC session, a SET as its text.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Callable, Iterable, Sequence

import pyarrow as pa
import pymysql
import pymysql.cursors

from ...contracts import BinlogPosition, ColumnSpec
from ...mysql_server import MySQLSettings
from ...storage import ObjectStore
from ..filters import TableFilter
from ..events import SnapshotError, zero_date_error
from ..leader import PreflightError
from ..native import ResultRows
from ..table_changes import RollingParquetFiles, WriterLimits

log = logging.getLogger(__name__)



def quote_name(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


# -- column types -------------------------------------------------------------------------------


@dataclass(frozen=True)
class SnapshotColumn:
    """How one column is read and typed: the SELECT expression, its MySQL type as the binlog would
    name it, its Arrow type, and the conversion of a PyMySQL value to that Arrow type."""

    name: str
    select: str
    mysql_type: str
    arrow_type: pa.DataType
    nullable: bool
    convert: Callable[[Any], Any] | None = None

    @property
    def spec(self) -> ColumnSpec:
        return ColumnSpec(self.name, self.mysql_type, str(self.arrow_type), self.nullable)


_INTS = {  # data type -> (signed, unsigned) Arrow types, as the binlog capture types them
    "tinyint": (pa.int8(), pa.int16()), "smallint": (pa.int16(), pa.int32()),
    "mediumint": (pa.int32(), pa.int32()), "int": (pa.int32(), pa.int64()),
}
_TEXT = {"char": "char", "varchar": "varchar", "tinytext": "tinytext", "text": "text", "mediumtext": "mediumtext",
         "longtext": "longtext"}
_BLOBS = {"binary": "binary", "varbinary": "varbinary", "tinyblob": "tinyblob", "blob": "blob",
          "mediumblob": "mediumblob", "longblob": "longblob"}


def _fsp(name: str, precision: int | None) -> str:
    return f"{name}({precision})" if precision else name


def _text_value(value: Any) -> str:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8")
    return value


def _zero_date(column: str) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if isinstance(value, str):  # PyMySQL hands back what it cannot parse as a date: '0000-00-00'
            raise zero_date_error(column, value)
        return value

    return check


def snapshot_column(row: dict) -> SnapshotColumn:
    """The column of an ``information_schema.COLUMNS`` row."""
    name, data_type = row["COLUMN_NAME"], row["DATA_TYPE"].lower()
    column_type = row["COLUMN_TYPE"].lower()
    nullable = row["IS_NULLABLE"] == "YES"
    unsigned = "unsigned" in column_type
    binary = (row["CHARACTER_SET_NAME"] or "").lower() == "binary"
    select = quote_name(name)

    def column(mysql_type: str, arrow_type: pa.DataType, convert=None, expression: str = select) -> SnapshotColumn:
        return SnapshotColumn(name, expression, mysql_type, arrow_type, nullable, convert)

    if data_type in _INTS:
        signed_type, unsigned_type = _INTS[data_type]
        return column(f"{data_type} unsigned" if unsigned else data_type, unsigned_type if unsigned else signed_type)
    if data_type == "bigint":
        return column("bigint unsigned", pa.decimal128(20, 0), Decimal) if unsigned else column("bigint", pa.int64())
    if data_type == "decimal":
        precision, scale = int(row["NUMERIC_PRECISION"]), int(row["NUMERIC_SCALE"])
        if precision <= 38:
            return column(f"decimal({precision},{scale})", pa.decimal128(precision, scale))
        return column(f"decimal({precision},{scale})", pa.string(), lambda v: format(v, "f"))
    if data_type == "float":
        return column("float", pa.float32(), expression=f"CAST({select} AS DOUBLE)")
    if data_type == "double":
        return column("double", pa.float64())
    if data_type == "year":
        return column("year", pa.int16(), int)
    if data_type == "date":
        return column("date", pa.date32(), _zero_date(name))
    if data_type == "datetime":
        return column(_fsp("datetime", row["DATETIME_PRECISION"]), pa.timestamp("us"), _zero_date(name))
    if data_type == "timestamp":
        return column(_fsp("timestamp", row["DATETIME_PRECISION"]), pa.timestamp("us", tz="UTC"), _zero_date(name))
    if data_type == "time":
        return column(_fsp("time", row["DATETIME_PRECISION"]), pa.duration("us"))
    if data_type in _TEXT and not binary:
        return column(_TEXT[data_type], pa.string(), _text_value)
    if data_type in _TEXT or data_type in _BLOBS:
        if data_type == "binary" or (data_type == "char" and binary):
            return column(f"binary({int(row['CHARACTER_MAXIMUM_LENGTH'])})", pa.binary(), bytes)
        return column(_BLOBS.get(data_type, "blob" if binary else data_type), pa.binary(), bytes)
    if data_type in ("enum", "set"):
        # CONCAT: the text the server shows (a SET as its comma list), never a driver's set object
        return column(data_type, pa.string(), _text_value, expression=f"CONCAT({select})")
    if data_type == "json":
        return column("json", pa.string(), _text_value)
    if data_type == "bit":
        return column(column_type, pa.binary(), bytes)
    if data_type in ("geometry", "point", "linestring", "polygon", "multipoint", "multilinestring",
                     "multipolygon", "geometrycollection", "geomcollection"):
        return column("geometry", pa.binary(), bytes)
    raise SnapshotError(f"column {name}: type {column_type} cannot be copied; exclude the table")


# -- one table's rows ---------------------------------------------------------------------------


class SnapshotTableWriter:
    """A table's rows into rolling Parquet files (its own columns only), uploaded as they fill."""

    def __init__(self, store: ObjectStore, prefix: str, rel_dir: str, columns: Sequence[SnapshotColumn],
                 tmp_dir: str, limits: WriterLimits):
        self.columns = list(columns)
        self.schema = pa.schema([pa.field(c.name, c.arrow_type, c.nullable) for c in self.columns])
        self.parts = RollingParquetFiles(store, prefix, rel_dir, self.schema, tmp_dir, limits)
        self.row_count = 0

    def write(self, rows: list[tuple]) -> None:
        if not rows:
            return
        arrays = []
        for i, column in enumerate(self.columns):
            values = [row[i] for row in rows]
            if column.convert is not None:
                values = [None if v is None else column.convert(v) for v in values]
            arrays.append(pa.array(values, type=column.arrow_type))
        self.write_batch(pa.RecordBatch.from_arrays(arrays, schema=self.schema))

    def write_batch(self, batch: pa.RecordBatch) -> None:
        self.parts.write(batch)
        self.row_count += batch.num_rows

    def finish(self) -> tuple[tuple[str, ...], int]:
        self.parts.close_file()
        return tuple(self.parts.files), self.row_count

    def discard(self) -> None:
        self.parts.discard()


# -- the copy -----------------------------------------------------------------------------------


class LeaderSnapshot:
    """One consistent read of the leader: ``open()`` fixes the position, then tables are read in it."""

    def __init__(self, settings: MySQLSettings, flavor: str):
        self.settings, self.flavor = settings, flavor
        self.conn = None
        self.position: BinlogPosition | None = None

    def __enter__(self) -> "LeaderSnapshot":
        self.conn = self.settings.connect(autocommit=False, cursorclass=pymysql.cursors.Cursor)
        with self.conn.cursor() as cur:
            # UTC: TIMESTAMP values come back as the UTC wall clock, as the binlog capture gives them
            cur.execute("SET SESSION time_zone = '+00:00'")
            cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        return self

    def open_read_view(self) -> BinlogPosition:
        """Start the consistent read; ``position`` is the binlog position it is consistent with."""
        with self.conn.cursor() as cur:
            if self.flavor == "mariadb":
                cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
                cur.execute("SHOW STATUS LIKE 'binlog_snapshot_%'")
                status = {name.lower(): value for name, value in cur.fetchall()}
                self.position = BinlogPosition(status["binlog_snapshot_file"],
                                               int(status["binlog_snapshot_position"]))
            else:
                self._mysql_position(cur)
        return self.position

    def _mysql_position(self, cur) -> None:
        try:
            cur.execute("FLUSH TABLES WITH READ LOCK")
        except pymysql.err.OperationalError as exc:
            if exc.args[0] in (1044, 1045, 1227):
                raise PreflightError(
                    f"leader user {self.settings.user!r} may not take the snapshot's brief read lock: GRANT RELOAD "
                    f"ON *.* TO '{self.settings.user}'@'%' (MySQL has no lock-free consistent position)"
                ) from None
            raise
        try:
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
            cur.execute("SHOW BINARY LOG STATUS")
            row = cur.fetchone()
            self.position = BinlogPosition(row[0], int(row[1]))
        finally:
            cur.execute("UNLOCK TABLES")

    def __exit__(self, *exc) -> None:
        if self.conn is not None:
            try:
                if self.conn.open:  # (a copy stopped inside a result set closes the connection)
                    self.conn.rollback()
            finally:
                self.conn.close()
                self.conn = None

    def _rows(self, sql: str, args: Sequence = ()) -> list[dict]:
        with self.conn.cursor(pymysql.cursors.DictCursor) as cur:
            cur.execute(sql, args or None)
            return list(cur.fetchall())

    def tables(self, table_filter: TableFilter, only: Iterable[str] | None = None) -> list[tuple[str, str]]:
        """The base tables the filter captures (and, given ``only``, that match one of its globs)."""
        from fnmatch import fnmatchcase

        rows = self._rows(
            "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE TABLE_TYPE = 'BASE TABLE' "
            "AND TABLE_SCHEMA NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys', %s) "
            "ORDER BY TABLE_SCHEMA, TABLE_NAME", ("_mysql_cdc",),
        )
        found = [(r["TABLE_SCHEMA"], r["TABLE_NAME"]) for r in rows if table_filter.captures_table(
            r["TABLE_SCHEMA"], r["TABLE_NAME"])]
        if only is not None:
            globs = list(only)
            found = [t for t in found if any(fnmatchcase(f"{t[0]}.{t[1]}", g) for g in globs)]
        return found

    def data_type(self, database: str, table: str, column: str) -> str | None:
        """The column's DATA_TYPE (lower case), or None when there is no such column."""
        rows = self._rows(
            "SELECT DATA_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
            "AND COLUMN_NAME = %s", (database, table, column),
        )
        return rows[0]["DATA_TYPE"].lower() if rows else None

    def describe(self, database: str, table: str) -> tuple[list[SnapshotColumn], tuple[str, ...], str, str]:
        """Columns to copy (generated ones compute themselves), key columns, CREATE DATABASE, CREATE TABLE."""
        rows = self._rows(
            "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, NUMERIC_PRECISION, NUMERIC_SCALE, DATETIME_PRECISION, "
            "CHARACTER_SET_NAME, CHARACTER_MAXIMUM_LENGTH, IS_NULLABLE, EXTRA FROM information_schema.COLUMNS "
            "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION", (database, table),
        )
        columns = [snapshot_column(r) for r in rows if "GENERATED" not in (r["EXTRA"] or "").upper()]
        keys = tuple(r["COLUMN_NAME"] for r in self._rows(
            "SELECT COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
            "AND INDEX_NAME = 'PRIMARY' ORDER BY SEQ_IN_INDEX", (database, table),
        ))
        with self.conn.cursor() as cur:
            cur.execute(f"SHOW CREATE DATABASE {quote_name(database)}")
            create_database = cur.fetchone()[1]
            cur.execute(f"SHOW CREATE TABLE {quote_name(database)}.{quote_name(table)}")
            create_table = cur.fetchone()[1]
        return columns, keys, create_database, create_table

    def copy(self, database: str, table: str, columns: Sequence[SnapshotColumn], writer: SnapshotTableWriter,
             limits: WriterLimits, where: str = "", args: Sequence = (), decoder: str = "native") -> None:
        """Every row of the table (that ``where`` selects) into ``writer``, its rows parsed by the
        compiled decoder (``decoder="native"``) or by PyMySQL (``"python"``, the reference)."""
        select = ", ".join(c.select for c in columns)
        sql = f"SELECT {select} FROM {quote_name(database)}.{quote_name(table)}" + (f" WHERE {where}" if where else "")
        if decoder == "native":
            with self.conn.cursor() as cur:
                sql = cur.mogrify(sql, args or None)
            rows = ResultRows(self.conn, writer.schema, limits.chunk_rows, limits.chunk_bytes, f"{database}.{table}")
            for batch in rows.read(sql):
                writer.write_batch(batch)
            return
        cur = self.conn.cursor(pymysql.cursors.SSCursor)  # unbuffered: rows stream, memory stays flat
        try:
            cur.execute(sql, args or None)
            while True:
                rows = cur.fetchmany(limits.chunk_rows)
                if not rows:
                    break
                writer.write(rows)
        finally:
            cur.close()


