"""The compiled reader of small Parquet files (``apply.compiled_read``, ``native/src/parquet_files.rs``)
against pyarrow's reading (``reader._read_table``), the reference: the same tables, value for value
and type for type, from files written as capture writes them and as other writers do; and errors
that name the file."""

import datetime as dt
import decimal
import io
import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mysql_cdc.merge import compiled_read, reader
from mysql_cdc.contracts import ColumnSpec, TableChanges
from mysql_cdc.contracts import change_row as cr
from mysql_cdc.storage import StorageSpec


# every Arrow type a manifest can name (``reader.arrow_type``), NULL-able, and a key
COLUMNS = (
    ColumnSpec("id", "bigint", "int64", False),
    ColumnSpec("i8", "tinyint", "int8"), ColumnSpec("i16", "smallint", "int16"),
    ColumnSpec("i32", "int", "int32"), ColumnSpec("f32", "float", "float"),
    ColumnSpec("f64", "double", "double"), ColumnSpec("s", "text", "string"),
    ColumnSpec("b", "blob", "binary"), ColumnSpec("d", "date", "date32[day]"),
    ColumnSpec("ts", "datetime", "timestamp[us]"), ColumnSpec("tz", "timestamp", "timestamp[us, tz=UTC]"),
    ColumnSpec("t", "time", "duration[us]"), ColumnSpec("flag", "bit(1)", "bool"),
    ColumnSpec("dec", "decimal(30,5)", "decimal128(30, 5)"),
)
VALUES = {
    "i8": lambda i: -128 + i % 256, "i16": lambda i: i * 7 - 30_000, "i32": lambda i: -i * 1_000_003,
    "f32": lambda i: i / 4, "f64": lambda i: -i / 3, "s": lambda i: f"värde {i} ✓" * (i % 3),
    "b": lambda i: bytes([0, i % 256, 255]), "d": lambda i: dt.date(1000 + i, 1 + i % 12, 1),
    "ts": lambda i: dt.datetime(2026, 1, 1, 0, 0, i % 60, i), "tz": lambda i: dt.datetime(1970, 1, 2, tzinfo=dt.timezone.utc),
    "t": lambda i: dt.timedelta(hours=-i, microseconds=i), "flag": lambda i: i % 2 == 0,
    "dec": lambda i: decimal.Decimal(f"-{i}123456789012345678901.12345"),
}


def table_changes(name: str, files: tuple, spans: tuple = ()) -> TableChanges:
    return TableChanges("db", name, COLUMNS, ("id",), files, 0, spans)


def change_rows(rows: int) -> pa.Table:
    """``rows`` change rows of ``COLUMNS``: every third value NULL, updates with a before image."""
    schema = cr.change_row_schema(pa.schema([pa.field(c.name, reader.arrow_type(c.arrow_type), c.nullable)
                                             for c in COLUMNS]))
    data = []
    for i in range(rows):
        row = {"id": i, **{c: (None if (i + k) % 3 == 0 else f(i)) for k, (c, f) in enumerate(VALUES.items())}}
        row.update(_op="U" if i % 4 == 1 else "I", _binlog_file="binlog.000001", _binlog_seq=1, _binlog_pos=100 + i,
                   _row_index=0, _commit_ts=dt.datetime(2026, 11, 27, tzinfo=dt.timezone.utc), _gtid=None,
                   _txn="binlog.000001:4", _before=dict(row, id=i + 1000) if i % 4 == 1 else None)
        data.append(row)
    return pa.Table.from_pylist(data, schema=schema)


def capture_file(rows: int) -> bytes:
    """Change rows as capture writes them (``TableChangesWriter``: snappy, plain encoding)."""
    out = io.BytesIO()
    pq.write_table(change_rows(rows), out, compression="snappy", use_dictionary=False)
    return out.getvalue()


def other_writer_file(rows: int) -> bytes:
    """The same rows as another writer might write them: dictionary pages (pyarrow's default), row groups of 7 rows."""
    out = io.BytesIO()
    pq.write_table(change_rows(rows), out, row_group_size=7, compression="snappy")
    return out.getvalue()


def both_readings(tmp_path, files: list[bytes], metadata=frozenset()) -> tuple[list[pa.Table], list[pa.Table]]:
    """Each file as its own table, read by the compiled reader and by pyarrow through ``read_tables``."""
    store = StorageSpec(f"file://{tmp_path}/root").open()
    tables = []
    for i, data in enumerate(files):
        store.put_bytes(f"batch/seg-00000/db.t{i}/part-00000.parquet", data)
        tables.append((reader.change_schema(table_changes(f"t{i}", ()), metadata),
                       table_changes(f"t{i}", (f"seg-00000/db.t{i}/part-00000.parquet",))))
    compiled = reader.read_tables(store, "batch", tables)
    reference = reader.read_tables(store, "batch", tables, compiled=False)  # the reference: pyarrow's reading
    return compiled, reference


@pytest.mark.parametrize("metadata", [frozenset(), frozenset({cr.BEFORE, cr.COMMIT_TS, cr.TXN})],
                         ids=["merge columns, key of the before image", "whole before image, more metadata"])
def test_the_compiled_reader_reads_what_pyarrow_reads(tmp_path, metadata):
    files = [capture_file(50), capture_file(1), other_writer_file(40), capture_file(0)]
    compiled, reference = both_readings(tmp_path, files, metadata)
    assert [t.num_rows for t in compiled] == [50, 1, 40, 0]
    for ours, theirs in zip(compiled, reference):
        assert ours.schema.equals(theirs.schema), (ours.schema, theirs.schema)
        assert ours.equals(theirs)
        assert ours.to_pylist() == theirs.to_pylist()  # values, not only buffers
    # the before image read as the schema asks: the key alone, or all of it
    before = compiled[0].column(cr.BEFORE).to_pylist()
    assert before[0] is None
    assert set(before[1]) == ({"id"} if not metadata else {c.name for c in COLUMNS})
    assert before[1]["id"] == 1001


def test_a_pack_of_many_tables_is_read_in_one_call_each_its_own_rows(tmp_path):
    files = [capture_file(rows) for rows in (3, 0, 12, 1, 30)]
    offsets = [sum(len(f) for f in files[:i]) for i in range(len(files))]
    store = StorageSpec(f"file://{tmp_path}/root").open()
    store.put_bytes("batch/seg-00000/small-tables-00000.pack", b"".join(files))
    tables = [table_changes(f"t{i}", ("seg-00000/small-tables-00000.pack",), ((offsets[i], len(f)),))
              for i, f in enumerate(files)]
    read = reader.read_tables(store, "batch", [(reader.change_schema(t), t) for t in tables])
    assert [t.column("id").to_pylist() for t in read] == [list(range(n)) for n in (3, 0, 12, 1, 30)]


def test_bytes_that_are_not_parquet_are_an_error_naming_the_file(tmp_path):
    store = StorageSpec(f"file://{tmp_path}/root").open()
    good = capture_file(5)
    store.put_bytes("batch/seg-00000/small-tables-00000.pack", good + b"not a parquet file at all, 40 bytes long")
    tables = [table_changes("t0", ("seg-00000/small-tables-00000.pack",), ((0, len(good)),)),
              table_changes("t1", ("seg-00000/small-tables-00000.pack",), ((len(good), 40),))]
    where = f"batch/seg-00000/small-tables-00000.pack (bytes {len(good)}-{len(good) + 39})"
    with pytest.raises(ValueError, match=re.escape(where) + r": not a Parquet file the merge can read \(.+\)"):
        reader.read_tables(store, "batch", [(reader.change_schema(t), t) for t in tables])


def test_a_file_missing_a_column_is_the_manifests_error_naming_the_file(tmp_path):
    store = StorageSpec(f"file://{tmp_path}/root").open()
    out = io.BytesIO()
    pq.write_table(change_rows(4).drop_columns(["s"]), out)
    store.put_bytes("batch/seg-00000/db.t/part-00000.parquet", out.getvalue())
    table = table_changes("t", ("seg-00000/db.t/part-00000.parquet",))
    with pytest.raises(ValueError, match=r"db\.t/part-00000\.parquet: columns \[.*\] differ from the manifest's"):
        reader.read_tables(store, "batch", [(reader.change_schema(table), table)])


def test_a_large_table_is_read_by_arrows_threads_the_small_ones_by_the_compiled_reader(tmp_path, monkeypatch):
    """A file of many rows reads faster with Arrow's threads decoding its columns side by side."""
    store = StorageSpec(f"file://{tmp_path}/root").open()
    tables = []
    # the same file: the manifest's row count decides which reader reads it
    for name, rows in (("small", 3), ("large", reader._THREADED_READ_ROWS)):
        store.put_bytes(f"batch/seg-00000/db.{name}/part-00000.parquet", capture_file(3))
        table = TableChanges("db", name, COLUMNS, ("id",), (f"seg-00000/db.{name}/part-00000.parquet",), rows)
        tables.append((reader.change_schema(table), table))
    compiled_reads = []
    real = compiled_read.read_files
    monkeypatch.setattr(compiled_read, "read_files", lambda files, *a: compiled_reads.append(len(files)) or real(files, *a))
    small, large = reader.read_tables(store, "batch", tables)
    assert compiled_reads == [1]
    assert small.equals(large)
