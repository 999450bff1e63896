"""Executor side: load a partition of net rows into its own staging table in the follower.

Every Spark partition gets its own table, ``_mysql_cdc.stg_<pipeline hash>_<segment>_<table>_<part>``,
dropped and recreated by the task. That makes a retried or re-run task idempotent without any
coordination, and lets all partitions load in parallel. The driver then applies the staged rows
in one follower transaction (``follower.Follower.apply_rows``) and drops the tables.

A staging table has the follower table's columns (same types, charsets and collations, so
comparisons inside the follower behave exactly like on the target; none of its keys, all
nullable) plus:

- ``__mcdc_op``: ``I`` insert (a key new to the follower / copies of a keyless row), ``U`` upsert
  (delete the key, insert the row), ``D`` delete (the key / ``__mcdc_n`` copies of a keyless row);
- ``__mcdc_n``: how many copies a keyless ``D`` removes;
- ``__mcdc_row``: row number inside the partition, the primary key (appends stay sequential, and
  the driver addresses single staged rows by it).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass
from itertools import chain
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pymysql
from pymysql.converters import escape_string

from ..contracts import CHECKPOINT_SCHEMA
from ..settings import MySQLSettings
from .connection import connect
from .encoding import LoadColumn, encode_rows, load_column, load_data_clause, quote_ident

OP = "__mcdc_op"
COUNT = "__mcdc_n"
ROW = "__mcdc_row"
PARTITION = "__mcdc_part"  # the Spark partition id, added by the job so the loader can name its table
RESERVED_PREFIX = "__mcdc_"  # the merge job's working columns; no table column may start with it

RESULT_SCHEMA = pa.schema([
    ("stage", pa.string()), ("rows", pa.int64()), ("inserts", pa.int64()), ("upserts", pa.int64()),
    ("deletes", pa.int64()),
])


def staging_prefix(pipeline: str) -> str:
    """Short, fixed-width and safe for any pipeline name (table names are limited to 64 chars)."""
    return "stg_" + hashlib.sha1(pipeline.encode()).hexdigest()[:12]


def staging_segment_prefix(pipeline: str, segment_index: int) -> str:
    return f"{staging_prefix(pipeline)}_{segment_index:05d}_"


def staging_table_prefix(pipeline: str, segment_index: int, table_index: int) -> str:
    return f"{staging_segment_prefix(pipeline, segment_index)}{table_index:03d}"


def staging_name(table_prefix: str, partition: int) -> str:
    return f"{table_prefix}_{partition:05d}"


def qualified_staging(name: str) -> str:
    return f"{quote_ident(CHECKPOINT_SCHEMA)}.{quote_ident(name)}"


@dataclass(frozen=True)
class StagePlan:
    """What a loading task needs; pickled into the Spark closure (MySQLSettings hides its password
    from repr, so a logged plan shows no secret)."""

    follower: MySQLSettings
    table_prefix: str
    columns: tuple[str, ...]  # the table's columns, in the DataFrame's order
    mysql_types: tuple[str, ...]  # their MySQL types from the manifest (BIT and YEAR need them)
    column_ddl: tuple[str, ...]  # staging column definitions, from the follower's own table

    def create_sql(self, name: str) -> str:
        body = ",\n  ".join([
            *self.column_ddl,
            f"{OP} CHAR(1) CHARACTER SET ascii NOT NULL",
            f"{COUNT} BIGINT NOT NULL",
            f"{ROW} BIGINT NOT NULL",
            f"PRIMARY KEY ({ROW})",
        ])
        return f"CREATE TABLE {qualified_staging(name)} (\n  {body}\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"


class StagingError(RuntimeError):
    pass


def _load_columns(plan: StagePlan, schema: pa.Schema) -> list[LoadColumn]:
    columns = [load_column(n, schema.field(n).type, t) for n, t in zip(plan.columns, plan.mysql_types)]
    return columns + [load_column(OP, pa.string(), "char"), load_column(COUNT, pa.int64(), "bigint"),
                      load_column(ROW, pa.int64(), "bigint")]


def _count(ops: pa.Array, op: str) -> int:
    return int(pc.sum(pc.equal(ops, op)).as_py() or 0)


def _write_file(fh, plan: StagePlan, batches) -> tuple[dict[str, int], list[LoadColumn] | None]:
    """Encode every batch into the open file; returns the counts the driver verifies and the
    columns' encodings (which give the LOAD DATA column list)."""
    counts = dict(rows=0, inserts=0, upserts=0, deletes=0)
    columns = None
    for batch in batches:
        if batch.num_rows == 0:
            continue
        if columns is None:
            columns = _load_columns(plan, batch.schema)
        ops = batch.column(OP)
        row_numbers = pa.array(np.arange(counts["rows"], counts["rows"] + batch.num_rows, dtype=np.int64))
        arrays = [batch.column(n) for n in plan.columns] + [ops, batch.column(COUNT), row_numbers]
        fh.write(encode_rows(arrays, columns))
        counts["rows"] += batch.num_rows
        counts["inserts"] += _count(ops, "I")
        counts["upserts"] += _count(ops, "U")
        counts["deletes"] += _count(ops, "D")
    return counts, columns


def _check_warnings(cur, name: str) -> None:
    # LOAD DATA LOCAL turns data errors into warnings (the server cannot stop the client's
    # upload), so a value the table cannot hold would be silently altered. Refuse instead.
    cur.execute("SHOW WARNINGS LIMIT 3")
    warnings = cur.fetchall()
    if warnings:
        detail = "; ".join(f"{w[2]} (code {w[1]})" for w in warnings)
        raise StagingError(f"loading staging table {name} changed values: {detail}")


_LOCAL_INFILE_REFUSED = (1148, 3948, 2068)  # MariaDB, MySQL 8 server, client-side refusal


def _load_data(cur, path: str, name: str, columns: list[LoadColumn]) -> int:
    # no query args: pymysql would %-format the SQL, and column names may hold '%'
    sql = (
        f"LOAD DATA LOCAL INFILE '{escape_string(path)}' INTO TABLE {qualified_staging(name)} "
        "CHARACTER SET utf8mb4 FIELDS TERMINATED BY '\\t' ESCAPED BY '\\\\' LINES TERMINATED BY '\\n' "
        + load_data_clause(columns)
    )
    try:
        return cur.execute(sql)
    except pymysql.err.OperationalError as exc:
        if exc.args[0] in _LOCAL_INFILE_REFUSED:
            raise StagingError(
                f"the follower refuses LOAD DATA LOCAL INFILE ({exc.args[-1]}): the merge job stages rows "
                "with it; enable it on the follower (SET GLOBAL local_infile = 1, and local_infile=1 in its config)"
            ) from None
        raise


def load_into_staging(conn, plan: StagePlan, name: str, batches) -> dict[str, int] | None:
    """Drop/create staging table ``name`` and LOAD DATA the batches into it; None if no rows."""
    fd, path = tempfile.mkstemp(prefix="mysql-cdc-stage-", suffix=".tsv")
    try:
        with os.fdopen(fd, "wb") as fh:
            counts, columns = _write_file(fh, plan, batches)
        if not counts["rows"]:
            return None
        with conn.cursor() as cur:
            cur.execute(f"DROP TABLE IF EXISTS {qualified_staging(name)}")
            cur.execute(plan.create_sql(name))
            loaded = _load_data(cur, path, name, columns)
            _check_warnings(cur, name)
        if loaded != counts["rows"]:
            raise StagingError(f"staging table {name}: loaded {loaded} rows, expected {counts['rows']}")
        return counts
    finally:
        os.unlink(path)


def load_partition(plan: StagePlan, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: stage this partition's rows; yields one result row per staging table."""
    batches = iter(batches)
    first = next((b for b in batches if b.num_rows), None)
    if first is None:
        return  # an empty partition stages nothing and reports nothing
    name = staging_name(plan.table_prefix, first.column(PARTITION)[0].as_py())
    conn = connect(plan.follower, local_infile=True)
    try:
        counts = load_into_staging(conn, plan, name, chain([first], batches))
    finally:
        conn.close()
    if counts:
        yield pa.RecordBatch.from_pylist([{"stage": name, **counts}], schema=RESULT_SCHEMA)
