"""Executor side: read a table's change rows from the batch's Parquet files as Arrow.

This machine (and many clusters) has no hadoop-aws, so Spark cannot read ``s3://`` itself. The
merge job instead builds a small DataFrame of *read units* and maps ``read_units`` over it with
``mapInArrow``: each executor fetches its files through ``mysql_cdc.storage`` (boto3 for s3://,
the local filesystem for file://) and decodes them with pyarrow. One code path for both schemes.

A read unit is ``(file, span, part, parts)``: the row groups ``part, part + parts, ...`` of one
Parquet file, so a batch with fewer files than cores still reads in parallel. The file is an
object of its own or, for a small table, the bytes ``span`` of a pack (``contracts.batch``). The DataFrame that carries them
is ``spark.range(len(units))`` (one unit index per partition; the units themselves travel in the
closure): a JVM-side source, cheaper to start than a DataFrame built from Python objects.

The Arrow schema comes from the manifest (``change_schema``), not from the files: the manifest is
the contract, and a file that does not match it is an error, never a silent reinterpretation.
"""

from __future__ import annotations

import functools
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Iterator, Optional, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from ..contracts import TableChanges
from ..crash_points import crash_point
from ..contracts import change_row as cr
from ..storage import ObjectStore, StorageSpec
from . import compiled_read

_SIMPLE_TYPES = {
    str(t): t
    for t in (
        pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.float32(), pa.float64(), pa.string(), pa.binary(),
        pa.date32(), pa.timestamp("us"), pa.timestamp("us", tz="UTC"), pa.duration("us"), pa.bool_(),
    )
}
_DECIMAL = re.compile(r"^decimal(?:128)?\((\d+), ?(\d+)\)$")


def arrow_type(text: str, where: str = "") -> pa.DataType:
    """The Arrow type a manifest names with ``str(type)`` (the types capture produces)."""
    if text in _SIMPLE_TYPES:
        return _SIMPLE_TYPES[text]
    match = _DECIMAL.match(text)
    if match:
        return pa.decimal128(int(match[1]), int(match[2]))
    raise ValueError(f"{where}: the manifest names Arrow type {text!r}, which this merge job does not know")


# The metadata the merge needs: the operation and the total order of changes. The others (commit
# time, GTID, transaction) are not read at all: less to decode and to move into Spark.
MERGE_METADATA = (cr.OP, cr.BINLOG_SEQ, cr.BINLOG_POS, cr.ROW_INDEX)


def change_schema(table: TableChanges, metadata: frozenset[str] = frozenset()) -> pa.Schema:
    """The Arrow schema the merge reads a table's change rows as: its columns as the manifest
    describes them, ``MERGE_METADATA`` and any more ``metadata`` a sink asks for, and the
    ``_before`` struct: the whole before-image when ``metadata`` names ``_before`` (a changelog
    keeps it; a snapshot's catch-up splits updates by it) or the table has no key (an update
    removes the row its before-image is), else the key's columns only. Netting a keyed table
    reads nothing else of it: an update that moved a key deletes the old key by its key. (A
    before-image's every column cost a third of reading a small table's file: 1,000 files of a
    hundred rows, 0.78 s of CPU against 0.53 s.)"""
    fields = [
        pa.field(c.name, arrow_type(c.arrow_type, f"{table.qualified_name}.{c.name}"), c.nullable)
        for c in table.columns
    ]
    cr.refuse_metadata_names(fields)
    before = fields
    if table.key_columns and cr.BEFORE not in metadata:
        by_name = {f.name: f for f in fields}
        before = [by_name[k] for k in table.key_columns]
    return pa.schema([*fields, *_metadata_fields(metadata), cr.before_field(before)])


@functools.lru_cache(maxsize=None)
def _metadata_fields(metadata: frozenset[str]) -> tuple[pa.Field, ...]:
    """The metadata fields a change schema holds: ``MERGE_METADATA`` and ``metadata`` (the same
    few sets for every table of a batch: made once each)."""
    wanted = [f for f in cr.METADATA_FIELDS if f.name in MERGE_METADATA or f.name in metadata]
    # Spark holds instants in microseconds: the commit time (seconds) is read as such, exactly
    return tuple(f.with_type(pa.timestamp("us", tz="UTC")) if f.name == cr.COMMIT_TS else f for f in wanted)


def parquet_columns(schema: pa.Schema) -> list[str]:
    """The Parquet columns to read for ``schema``: its fields by name, and of ``_before`` only
    the fields it holds (``change_schema``), each by its path."""
    names = schema.names
    if cr.BEFORE not in names:
        return names
    names.remove(cr.BEFORE)
    return names + [f"{cr.BEFORE}.{field.name}" for field in schema.field(cr.BEFORE).type]


def snapshot_schema(table: TableChanges) -> pa.Schema:
    """The Arrow schema of a snapshot table's files: its columns, nothing else."""
    return pa.schema([
        pa.field(c.name, arrow_type(c.arrow_type, f"{table.qualified_name}.{c.name}"), c.nullable)
        for c in table.columns
    ])


_THREADED_READ_ROWS = 50_000  # rows of a file from which its row groups are decoded by Arrow's threads


# A read unit: (file, span, part, parts): the row groups ``part, part + parts, ...`` of the
# Parquet file that is ``file`` (span None) or the bytes ``span`` = (offset, length) of it (a pack)
ReadUnit = tuple[str, Optional[tuple[int, int]], int, int]


def read_plan(table: TableChanges, parallelism: int) -> list[ReadUnit]:
    """Read units for a table: every file whole, or split by row group when files < cores."""
    files = table.file_spans()
    if not files:
        return []
    parts = max(1, -(-parallelism // len(files)))  # ceil: enough units to keep every core busy
    return [(f, span, p, parts) for f, span in files for p in range(parts)]


def _conform(table: pa.Table, schema: pa.Schema, key: str, span: tuple[int, int] | None) -> pa.Table:
    """A row group as read, in the manifest's schema; an error naming the file (``_where``) if its
    columns or types are not the manifest's."""
    if table.schema.equals(schema):  # the usual case, checked first: a thousand small files pay it
        return table
    if table.schema.names != schema.names:
        raise ValueError(f"{_where(key, span)}: columns {table.schema.names} differ from the manifest's {schema.names}")
    try:
        return table.cast(schema)  # only nullability flags can differ between writers; types must not
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise ValueError(f"{_where(key, span)}: the file's types do not match the manifest ({exc})") from exc


def read_units(storage: StorageSpec, batch_prefix: str, schema: pa.Schema,
               units: list[ReadUnit], indexes: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body over ``spark.range``: the change rows of the read units whose indexes
    arrive, as record batches."""
    crash_point("in_executor")
    store = None
    for index_batch in indexes:
        store = store or storage.open()  # one client per task, made on first use
        yield from _read(store, batch_prefix, schema, [units[i] for i in index_batch.column(0).to_pylist()])


def _where(key: str, span: tuple[int, int] | None) -> str:
    return key if span is None else f"{key} (bytes {span[0]}-{span[0] + span[1] - 1})"


def _read(store: ObjectStore, batch_prefix: str, schema: pa.Schema, units: list[ReadUnit]) -> Iterator[pa.RecordBatch]:
    columns = parquet_columns(schema)
    for file, span, part, parts in units:
        key = f"{batch_prefix}/{file}"
        if span is not None:  # a small table's file in a pack: its bytes, one ranged request
            source = store.get_range(key, *span)
            yield from _batches(_row_groups(_in_memory(source), part, parts, schema, columns, key, span))
        elif parts == 1:  # the whole file: one GET is the cheapest way to all of it
            yield from _batches(_row_groups(_in_memory(store.get_bytes(key)), 0, 1, schema, columns, key, None))
        else:  # a share of its row groups: read the footer, then only those groups' bytes
            with store.open_reader(key) as source:
                yield from _batches(_row_groups(pq.ParquetFile(source), part, parts, schema, columns, key, None))


def _batches(tables: Iterator[pa.Table]) -> Iterator[pa.RecordBatch]:
    for rows in tables:
        yield from rows.to_batches(max_chunksize=10_000)


def _in_memory(data) -> pq.ParquetFile:
    """A Parquet file whose bytes are all in memory. Arrow's pre-buffering gathers a file's column
    chunks in few reads: in memory there is nothing to gather, and it cost ~0.07 ms per file."""
    return pq.ParquetFile(pa.BufferReader(data), pre_buffer=False)


# what ``fetch_packed`` fetched: per pack, the offset of the bytes fetched and the bytes
PackedBytes = dict[str, tuple[int, pa.Buffer]]


def fetch_packed(store: ObjectStore, batch_prefix: str, tables: Sequence[TableChanges]) -> PackedBytes:
    """The bytes of the tables' spans in packs, one request per pack: from the first of their spans
    in it to the end of the last (the neighbouring tables a driver group holds: only theirs)."""
    covering: dict[str, tuple[int, int]] = {}
    for table in tables:
        for file, span in table.file_spans():
            if span is not None:
                start, end = covering.get(file, (span[0], span[0] + span[1]))
                covering[file] = (min(start, span[0]), max(end, span[0] + span[1]))
    return {file: (start, pa.py_buffer(store.get_range(f"{batch_prefix}/{file}", start, end - start)))
            for file, (start, end) in covering.items()}


# Threads that read a group of small tables' files side by side with pyarrow (``read_tables``
# without the compiled reader). A small file's reading is mostly Arrow's C++ (the footer, the
# pages), outside the GIL: two threads read 1,000 files of a hundred rows in 0.50 s where one took 0.71 s.
_READ_THREADS = 2

# One file of a table read on the driver: (key, span in its pack or None, its bytes)
_FileBytes = tuple[str, Optional[tuple[int, int]], pa.Buffer]


def read_tables(store: ObjectStore, batch_prefix: str, tables: Sequence[tuple[pa.Schema, TableChanges]],
                compiled: bool = True) -> list[pa.Table]:
    """All the rows in the batch of each (schema, table), read right here (the driver's path for
    small tables, ``netting``) from the job's open ``store`` (a new S3 client per table would
    cost more than a small table's rows): the same files, checks and schema as the executors'
    ``read_units``. Tables whose files share a pack cost one request for all of them
    (``fetch_packed``).

    Tables of fewer than ``_THREADED_READ_ROWS`` change rows are read by the compiled reader
    (``compiled_read``), all in one call; the others, and all of them with ``compiled=False`` (the
    reference the tests compare with), by pyarrow on ``_READ_THREADS`` threads, every one a share of the tables (for a
    large file Arrow's own threads decode its columns side by side: 1M change rows in 0.11 s,
    where the compiled reader, one thread per file, took 0.19 s)."""
    packed = fetch_packed(store, batch_prefix, [table for _, table in tables])
    by_compiled = [compiled and table.row_count < _THREADED_READ_ROWS for _, table in tables]
    compiled = iter(_read_compiled(store, batch_prefix, [t for t, c in zip(tables, by_compiled) if c], packed))
    others = iter(_read_pyarrow(store, batch_prefix, [t for t, c in zip(tables, by_compiled) if not c], packed))
    return [next(compiled) if c else next(others) for c in by_compiled]


def _read_pyarrow(store: ObjectStore, batch_prefix: str, tables: Sequence[tuple[pa.Schema, TableChanges]],
                  packed: PackedBytes) -> list[pa.Table]:
    def read(share: Sequence[tuple[pa.Schema, TableChanges]]) -> list[pa.Table]:
        return [_read_table(schema, _table_files(store, batch_prefix, table, packed)) for schema, table in share]

    if len(tables) < 2:
        return read(tables)
    tables_read: list = [None] * len(tables)
    with ThreadPoolExecutor(_READ_THREADS, thread_name_prefix="mysql-cdc read") as pool:
        # interleaved shares: tables of every size in each, so neither thread waits long for the other
        shares = pool.map(read, [tables[i::_READ_THREADS] for i in range(_READ_THREADS)])
        for i, share in enumerate(shares):
            tables_read[i::_READ_THREADS] = share
    return tables_read


def _table_files(store: ObjectStore, batch_prefix: str, table: TableChanges, packed: PackedBytes) -> list[_FileBytes]:
    """The bytes of each of the table's files: its span of a fetched pack, or the object fetched now."""
    files = []
    for file, span in table.file_spans():
        key = f"{batch_prefix}/{file}"
        if span is None:
            files.append((key, None, pa.py_buffer(store.get_bytes(key))))
        else:
            start, buffer = packed[file]
            files.append((key, span, buffer.slice(span[0] - start, span[1])))
    return files


def _read_table(schema: pa.Schema, files: list[_FileBytes]) -> pa.Table:
    """pyarrow's reading of one table's files: the reference the compiled reader is tested against."""
    columns = parquet_columns(schema)
    parts: list[pa.Table] = []
    for key, span, data in files:
        parts += _row_groups(_in_memory(data), 0, 1, schema, columns, key, span)
    return _joined(parts, schema)


def _read_compiled(store: ObjectStore, batch_prefix: str, tables: Sequence[tuple[pa.Schema, TableChanges]],
                   packed: PackedBytes) -> list[pa.Table]:
    """The compiled reader's reading of the tables' files, all in one call, each file then checked
    against its table's schema as pyarrow's reading is (``_conform``)."""
    if not tables:
        return []
    files = [_table_files(store, batch_prefix, table, packed) for _, table in tables]
    columns = [parquet_columns(schema) for schema, _ in tables]  # once per table, not per file
    flat = [(data, table_columns) for table_files, table_columns in zip(files, columns) for *_, data in table_files]
    names = [(key, span) for table_files in files for key, span, _ in table_files]
    read = iter(compiled_read.read_files([data for data, _ in flat], [c for _, c in flat],
                                         lambda i: _where(*names[i])))
    return [_joined([_conform(next(read), schema, key, span) for key, span, _ in table_files], schema)
            for (schema, _), table_files in zip(tables, files)]


def _joined(parts: list[pa.Table], schema: pa.Schema) -> pa.Table:
    if len(parts) == 1:  # a small table's one file: as read
        return parts[0]
    return pa.concat_tables(parts) if parts else schema.empty_table()


def parquet_files(store: ObjectStore, batch_prefix: str, table: TableChanges) -> list[pa.Buffer]:
    """Each of the table's Parquet files, whole (an object, or its span of a pack): for what reads
    them as files (``pq.read_table(pa.BufferReader(f))``), every column as capture wrote it."""
    return [pa.py_buffer(store.get_bytes(f"{batch_prefix}/{file}") if span is None
                         else store.get_range(f"{batch_prefix}/{file}", *span))
            for file, span in table.file_spans()]


def _row_groups(parquet: pq.ParquetFile, part: int, parts: int, schema: pa.Schema, columns: list[str],
                key: str, span: tuple[int, int] | None) -> Iterator[pa.Table]:
    """The row groups ``part, part + parts, ...`` of an open Parquet file (the file ``key``, or its
    bytes ``span`` in a pack), its ``columns`` (``parquet_columns(schema)``), conformed to ``schema``."""
    metadata = parquet.metadata
    # Arrow's own threads decode a large row group's columns side by side; for a small one they
    # cost more than they save (a thousand small tables: ~0.5 ms each)
    threads = metadata.num_rows >= _THREADED_READ_ROWS
    for group in range(part, metadata.num_row_groups, parts):
        yield _conform(parquet.read_row_group(group, columns=columns, use_threads=threads), schema, key, span)
