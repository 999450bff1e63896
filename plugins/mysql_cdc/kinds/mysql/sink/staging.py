"""Executor side: prepare one Spark partition of net rows for the follower transaction.

The follower transaction should write every row once, at ``LOAD DATA`` speed. So a partition's
net rows are split in two:

- rows that remove something from the follower (keyed tables: the keys of ``U`` and ``D`` rows;
  keyless tables: the ``D`` rows, all columns, with how many copies go) are loaded into the
  partition's own *staging table* in the follower, ``_mysql_cdc.stg_<pipeline hash>_<segment>_
  <table>_<part>``, dropped and recreated by the task; the transaction deletes by joining it.
  Usually few rows, and no more than key columns for keyed tables.
- rows that end up in the follower (keyed: ``I`` and ``U``; keyless: ``I``, one line per copy)
  are encoded once, exactly (``encoding``), into a *load file* in the batch store under
  ``<pipeline>/merge-scratch/``; the transaction ``LOAD DATA LOCAL INFILE``s it straight into the
  target table. A snapshot's copy instead goes into a *shadow table* nobody reads yet
  (``StagePlan.load_into``): every task loads its own rows into it, so the partitions load in
  parallel and no file makes a round trip through the store; the driver then swaps the shadow in.

Both are idempotent per task (same names, recreated/overwritten), so a retried or re-run task needs
no coordination and all partitions prepare in parallel (a shadow load is not idempotent: the
driver counts the shadow). The driver applies them in one follower transaction
(``follower.Follower.apply_rows``), then drops the staging tables and load files.

A staging table has the chosen columns of the follower table (same types, charsets and
collations, so comparisons inside the follower behave exactly like on the target; no keys, all
nullable) plus ``__mcdc_n`` (copies a keyless delete removes) and ``__mcdc_row`` (row number in
the partition, the primary key: appends stay sequential, the driver addresses single rows by it).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pymysql
from pymysql.converters import escape_string

from ....server_state.schema import STATE_SCHEMA
from ....contracts import change_row as cr
from ....mysql_server import MySQLSettings
from ....storage import StorageSpec
from .connection import connect
from .encoding import LoadColumn, encode_rows, load_column, load_data_clause, quote_ident
from ....merge.reader import ReadUnit, read_units

OP, COUNT = cr.NET_OP, cr.NET_COUNT
ROW = "__mcdc_row"
PARTITION = "__mcdc_part"  # the Spark partition id, added by the job so the task can name its outputs

RESULT_SCHEMA = pa.schema([
    ("stage", pa.string()),  # staging table of the partition's removals, or null
    ("load_file", pa.string()),  # store key of the partition's load file, or null
    ("load_path", pa.string()),  # or its path on the driver's disk (a table the driver staged itself)
    ("load_columns", pa.string()),  # the LOAD DATA column list the file was written for
    ("rows", pa.int64()), ("inserts", pa.int64()), ("upserts", pa.int64()), ("deletes", pa.int64()),
    ("loaded", pa.int64()),  # rows the task loaded into ``StagePlan.load_into`` itself
])

# the LOAD DATA format of every file the merge job writes: the server's defaults, spelled out
LOAD_FORMAT = (
    "CHARACTER SET utf8mb4 FIELDS TERMINATED BY '\\t' ESCAPED BY '\\\\' LINES TERMINATED BY '\\n'"
)


def staging_prefix(pipeline: str) -> str:
    """Short, fixed-width and safe for any pipeline name (table names are limited to 64 chars)."""
    return "stg_" + hashlib.sha1(pipeline.encode()).hexdigest()[:12]


def staging_segment_prefix(pipeline: str, segment_index: int) -> str:
    return f"{staging_prefix(pipeline)}_{segment_index:05d}_"


def staging_table_prefix(pipeline: str, segment_index: int, table_index: int) -> str:
    return f"{staging_segment_prefix(pipeline, segment_index)}{table_index:03d}"


def staging_name(table_prefix: str, partition: int) -> str:
    return f"{table_prefix}_{partition:05d}"


def scratch_prefix(pipeline: str) -> str:
    """Where the merge job keeps its load files in the batch store (beside ``batches/``)."""
    return f"{pipeline}/merge-scratch/"


def scratch_segment_prefix(pipeline: str, segment_index: int) -> str:
    return f"{scratch_prefix(pipeline)}{segment_index:05d}/"


def qualified_staging(name: str) -> str:
    return f"{quote_ident(STATE_SCHEMA)}.{quote_ident(name)}"


@dataclass(frozen=True)
class StagePlan:
    """What a task needs; pickled into the Spark closure (MySQLSettings and StorageSpec hide their
    secrets from repr, so a logged plan shows none)."""

    follower: MySQLSettings
    storage: StorageSpec  # the batch store: load files go under ``scratch_dir`` in it
    table_prefix: str  # staging tables are <table_prefix>_<partition>
    scratch_dir: str  # load files are <scratch_dir>/part-<partition>.tsv
    keyed: bool
    columns: tuple[str, ...]  # the table's columns, in the DataFrame's order
    mysql_types: tuple[str, ...]  # their MySQL types from the manifest (BIT and YEAR need them)
    insert_columns: tuple[str, ...]  # the columns a load file carries (generated ones compute themselves)
    removal_columns: tuple[str, ...]  # the columns a staging table carries (keys, or all of a keyless row)
    removal_ddl: tuple[str, ...]  # their definitions, from the follower's own table
    load_into: str | None = None  # a table (SQL name) the task loads its final rows into, instead of a load file

    def create_sql(self, name: str) -> str:
        body = ",\n  ".join([
            *self.removal_ddl,
            f"{COUNT} BIGINT NOT NULL",
            f"{ROW} BIGINT NOT NULL",
            f"PRIMARY KEY ({ROW})",
        ])
        return f"CREATE TABLE {qualified_staging(name)} (\n  {body}\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"

    def removes(self, ops: pa.Array) -> pa.Array:
        """Which net rows take something out of the follower."""
        return pc.is_in(ops, pa.array([cr.UPDATE, cr.DELETE] if self.keyed else [cr.DELETE]))

    def adds(self, ops: pa.Array) -> pa.Array:
        """Which net rows end up in the follower."""
        return pc.is_in(ops, pa.array([cr.INSERT, cr.UPDATE] if self.keyed else [cr.INSERT]))


class StagingError(RuntimeError):
    pass


class LoadWarningsError(StagingError):
    """A LOAD left warnings; ``codes`` are their MySQL error codes (1062: a duplicate key)."""

    def __init__(self, message: str, codes: frozenset[int]):
        super().__init__(message)
        self.codes = codes


# Rows encoded at once. Encoding makes new Arrow arrays per column (its text, escapes) and for the
# joined lines: for a whole large batch tens of MB each, memory the allocator takes fresh from the
# kernel and the CPU's caches do not hold. In pieces of this many rows they are a few MB, freed
# and handed out again for the next piece (a 1M-change range's 750k net rows: staged in 0.44-0.46 s
# against 0.64-0.78 s at once, runs alternating; docs/performance-journal.md, 2026-12-03).
ENCODE_ROWS = 32_768


class _EncodedFile:
    """A local temp file of LOAD DATA lines for some columns of the batches it is given."""

    def __init__(self, plan: StagePlan, names: tuple[str, ...], extra: tuple[str, ...] = ()):
        self.plan, self.names, self.extra = plan, names, extra
        fd, self.path = tempfile.mkstemp(prefix="mysql-cdc-stage-", suffix=".tsv")
        self.fh = os.fdopen(fd, "wb")
        self.rows = 0
        self.columns: list[LoadColumn] | None = None

    def _load_columns(self, schema: pa.Schema) -> list[LoadColumn]:
        by_name = dict(zip(self.plan.columns, self.plan.mysql_types))
        columns = [load_column(n, schema.field(n).type, by_name[n]) for n in self.names]
        return columns + [load_column(n, pa.int64(), "bigint") for n in self.extra]

    def write(self, batch: pa.RecordBatch, extra_arrays: list[pa.Array] = ()) -> None:
        if batch.num_rows == 0:
            return
        if self.columns is None:
            self.columns = self._load_columns(batch.schema)
        arrays = [batch.column(n) for n in self.names] + list(extra_arrays)
        for start in range(0, batch.num_rows, ENCODE_ROWS):
            self.fh.write(encode_rows([a.slice(start, ENCODE_ROWS) for a in arrays], self.columns))
        self.rows += batch.num_rows

    @property
    def clause(self) -> str:
        return load_data_clause(self.columns or [])

    def close(self) -> None:
        self.fh.close()

    def keep(self, path: Path) -> str:
        """Move the file to ``path`` (its owner removes it from there); returns the path."""
        self.fh.close()
        shutil.move(self.path, path)
        self.path = None
        return str(path)

    def remove(self) -> None:
        self.fh.close()
        if self.path is not None:
            os.unlink(self.path)


def _count(ops: pa.Array, op: str) -> int:
    return int(pc.sum(pc.equal(ops, op)).as_py() or 0)


def check_load_warnings(cur, what: str) -> None:
    """LOAD DATA LOCAL turns data errors into warnings (the server cannot stop the client's
    upload), so a value the table cannot hold would be silently altered, and a duplicate key
    silently skipped. Refuse both."""
    cur.execute("SHOW WARNINGS LIMIT 3")
    warnings = cur.fetchall()
    if warnings:
        detail = "; ".join(f"{w[2]} (code {w[1]})" for w in warnings)
        raise LoadWarningsError(f"loading {what} changed values: {detail}", frozenset(w[1] for w in warnings))


_LOCAL_INFILE_REFUSED = (1148, 3948, 2068)  # MariaDB, MySQL 8 server, client-side refusal


def load_data(cur, path: str, table_sql: str, clause: str) -> int:
    """``LOAD DATA LOCAL INFILE`` of a file this module wrote; returns the rows loaded."""
    # no query args: pymysql would %-format the SQL, and column names may hold '%'
    sql = f"LOAD DATA LOCAL INFILE '{escape_string(path)}' INTO TABLE {table_sql} {LOAD_FORMAT} {clause}"
    try:
        return cur.execute(sql)
    except pymysql.err.OperationalError as exc:
        if exc.args[0] in _LOCAL_INFILE_REFUSED:
            raise StagingError(
                f"the follower refuses LOAD DATA LOCAL INFILE ({exc.args[-1]}): the merge job writes rows "
                "with it; enable it on the follower (SET GLOBAL local_infile = 1, and local_infile=1 in its config)"
            ) from None
        raise


def _stage_removals(conn, plan: StagePlan, name: str, removals: _EncodedFile) -> None:
    removals.close()
    with conn.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {qualified_staging(name)}")
        cur.execute(plan.create_sql(name))
        loaded = load_data(cur, removals.path, qualified_staging(name), removals.clause)
        check_load_warnings(cur, f"staging table {name}")
    if loaded != removals.rows:
        raise StagingError(f"staging table {name}: loaded {loaded} rows, expected {removals.rows}")


def prepare_partition(plan: StagePlan, partition: int, batches, conn=None, keep_in: Path | None = None) -> dict:
    """Split the partition's net rows into its staging table and its load file (see the module
    docstring); returns the result row the driver applies. ``conn``: the driver's follower session,
    to use instead of opening one. ``keep_in``: the driver's directory for its own load files: the
    file stays there (``load_path``) for the commit to load, instead of going to the batch store and
    back (tens of MB for a large table, a PUT and a GET when the store is S3)."""
    removals = _EncodedFile(plan, plan.removal_columns, (COUNT, ROW))
    additions = _EncodedFile(plan, plan.insert_columns)
    counts = dict(rows=0, inserts=0, upserts=0, deletes=0, loaded=0)
    result = dict(stage=None, load_file=None, load_path=None, load_columns=None)
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            ops = batch.column(OP)
            removing = batch.filter(plan.removes(ops))
            row_numbers = pa.array(np.arange(removals.rows, removals.rows + removing.num_rows, dtype=np.int64))
            removals.write(removing, [removing.column(COUNT), row_numbers])
            additions.write(batch.filter(plan.adds(ops)))
            counts["rows"] += batch.num_rows
            for op, key in ((cr.INSERT, "inserts"), (cr.UPDATE, "upserts"), (cr.DELETE, "deletes")):
                counts[key] += _count(ops, op)
        if removals.rows:
            result["stage"] = staging_name(plan.table_prefix, partition)
            session = conn or connect(plan.follower, local_infile=True)
            try:
                _stage_removals(session, plan, result["stage"], removals)
            finally:
                if conn is None:
                    session.close()
        if additions.rows and plan.load_into:
            counts["loaded"] = _load_additions(plan, additions)
        elif additions.rows and keep_in is not None:
            path = keep_in / f"{Path(plan.scratch_dir).name}-part-{partition:05d}.tsv"
            result.update(load_path=additions.keep(path), load_columns=additions.clause)
        elif additions.rows:
            additions.close()
            key = f"{plan.scratch_dir}/part-{partition:05d}.tsv"
            plan.storage.open().put_file(additions.path, key)
            result.update(load_file=key, load_columns=additions.clause)
    finally:
        removals.remove()
        additions.remove()
    return {**result, **counts}


def _load_additions(plan: StagePlan, additions: _EncodedFile) -> int:
    """Load the partition's final rows into ``plan.load_into`` in one statement (autocommit: all
    of them or none). A retried task loads them again: the driver counts the table before it
    swaps it in, so a double load fails the job instead of duplicating rows."""
    additions.close()
    conn = connect(plan.follower, local_infile=True)
    try:
        with conn.cursor() as cur:
            loaded = load_data(cur, additions.path, plan.load_into, additions.clause)
            check_load_warnings(cur, plan.load_into)
    finally:
        conn.close()
    if loaded != additions.rows:
        raise StagingError(f"{plan.load_into}: loaded {loaded} rows, expected {additions.rows}")
    return loaded


def prepare_read_units(plan: StagePlan, storage: StorageSpec, batch_prefix: str, schema: pa.Schema,
                       units: list[ReadUnit], indexes: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body over read-unit indexes (``reader.read_units``) for rows that need no
    transform, a copy with nothing to fold in: the task reads its units and prepares their rows
    as inserts itself, so no row goes through Spark's JVM and back. Yields one result row."""
    task_units = [i for batch in indexes for i in batch.column(0).to_pylist()]
    if not task_units:
        return
    rows = read_units(storage, batch_prefix, schema, units, iter([pa.record_batch([pa.array(task_units)], ["id"])]))
    inserts = (
        batch.append_column(OP, pa.repeat(pa.scalar(cr.INSERT), batch.num_rows))
             .append_column(COUNT, pa.repeat(pa.scalar(1, pa.int64()), batch.num_rows))
        for batch in rows
    )
    result = prepare_partition(plan, task_units[0], inserts)
    if result["rows"]:
        yield pa.RecordBatch.from_pylist([result], schema=RESULT_SCHEMA)


def prepare_partitions(plan: StagePlan, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: prepare this partition's rows; yields one result row, none if empty."""
    batches = iter(batches)
    first = next((b for b in batches if b.num_rows), None)
    if first is None:
        return  # an empty partition prepares nothing and reports nothing
    partition = first.column(PARTITION)[0].as_py()
    result = prepare_partition(plan, partition, chain([first], batches))
    yield pa.RecordBatch.from_pylist([result], schema=RESULT_SCHEMA)
