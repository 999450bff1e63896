"""Read units of a batch's Parquet files (``merge.reader``): a file split into several units is read
by each unit's row groups only, every row once, from either store (a real moto S3 server on
loopback for ``s3://``); a small table's file inside a pack is read from its bytes alone, and the
tables of a pack read together cost one request."""

import io
import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mysql_cdc.merge.reader import change_schema, read_tables, read_units
from mysql_cdc.contracts import ColumnSpec, TableChanges
from mysql_cdc.contracts import change_row as cr
from mysql_cdc.storage import StorageError, StorageSpec, open_store

ROWS, GROUP_ROWS = 8_000, 1_000
SCHEMA = pa.schema([pa.field("id", pa.int64(), False), pa.field("v", pa.string())])


def parquet_bytes(rows: int = ROWS, first: int = 0) -> bytes:
    table = pa.table({"id": pa.array(range(first, first + rows), pa.int64()),
                      "v": [f"value-{i:06d}" * 4 for i in range(first, first + rows)]}, schema=SCHEMA)
    out = io.BytesIO()
    pq.write_table(table, out, row_group_size=GROUP_ROWS, compression="none")
    return out.getvalue()


@pytest.fixture(params=["file", "s3"])
def storage(request, tmp_path) -> StorageSpec:
    if request.param == "file":
        return StorageSpec(f"file://{tmp_path}/root")
    bucket = request.getfixturevalue("s3_bucket")
    options = {k: bucket[k] for k in ("endpoint_url", "region_name", "aws_access_key_id", "aws_secret_access_key")}
    return StorageSpec(f"s3://{bucket['bucket']}/root", options)


def ids_read(storage: StorageSpec, units: list) -> list[int]:
    """The ids every unit reads, each unit as its own task reads it (``mapInArrow`` over its index)."""
    ids = []
    for index in range(len(units)):
        batches = read_units(storage, "batch", SCHEMA, units, iter([pa.record_batch([pa.array([index])], ["i"])]))
        ids += [i for b in batches for i in b.column("id").to_pylist()]
    return ids


@pytest.mark.parametrize("parts", [1, 3, 8])
def test_the_units_of_a_file_read_every_row_once(storage, parts):
    storage.open().put_bytes("batch/seg-00000/t.parquet", parquet_bytes())
    units = [("seg-00000/t.parquet", None, p, parts) for p in range(parts)]
    assert sorted(ids_read(storage, units)) == list(range(ROWS))


def test_an_s3_unit_downloads_its_row_groups_not_the_whole_file(s3_bucket):
    options = {k: s3_bucket[k] for k in ("endpoint_url", "region_name", "aws_access_key_id", "aws_secret_access_key")}
    store = open_store(StorageSpec(f"s3://{s3_bucket['bucket']}/root", options))
    data = parquet_bytes()
    store.put_bytes("batch/t.parquet", data)
    with store.open_reader("batch/t.parquet") as source:
        group = pq.ParquetFile(source).read_row_group(5)
        fetched = source.fetched
    assert group.column("id").to_pylist() == list(range(5 * GROUP_ROWS, 6 * GROUP_ROWS))
    # one of 8 groups and the footer: far from the whole object
    assert fetched < len(data) / 2, (fetched, len(data))


@pytest.mark.parametrize("parts", [1, 3])
def test_the_units_of_a_file_in_a_pack_read_its_rows_once(storage, parts):
    # the pack's other bytes are other tables' files: a read that strays into them fails
    before, data = parquet_bytes(500, first=10_000), parquet_bytes()
    storage.open().put_bytes("batch/seg-00000/small-tables-00000.pack", before + data + parquet_bytes(7))
    span = (len(before), len(data))
    units = [("seg-00000/small-tables-00000.pack", span, p, parts) for p in range(parts)]
    assert sorted(ids_read(storage, units)) == list(range(ROWS))


class CountingStore:
    """A real store that counts the requests made of it."""

    def __init__(self, store):
        self.store, self.requests = store, []

    def get_bytes(self, key):
        self.requests.append(key)
        return self.store.get_bytes(key)

    def get_range(self, key, offset, length):
        self.requests.append((key, offset, length))
        return self.store.get_range(key, offset, length)


def _table(name: str, files: tuple, spans: tuple, rows: int) -> TableChanges:
    return TableChanges("db", name, (ColumnSpec("id", "bigint", "int64", False), ColumnSpec("v", "text", "string")),
                        ("id",), files, rows, spans)


def test_tables_of_one_pack_are_read_with_one_request_each_its_own_rows(storage):
    pack, sizes, files = b"", [3, 0, 40, 1], []
    for i, rows in enumerate(sizes):
        files.append(parquet_bytes(rows, first=1000 * i))
        pack += files[-1]
    store = storage.open()
    store.put_bytes("batch/seg-00000/small-tables-00000.pack", pack)
    store.put_bytes("batch/seg-00000/db.big/part-00000.parquet", parquet_bytes(2500, first=50_000))
    offsets = [sum(len(f) for f in files[:i]) for i in range(len(files))]
    # the tables as the merge groups them: neighbours in the pack (the first left out) and a large one
    tables = [_table(f"t{i}", ("seg-00000/small-tables-00000.pack",), ((offsets[i], len(files[i])),), sizes[i])
              for i in range(1, len(sizes))]
    tables.append(_table("big", ("seg-00000/db.big/part-00000.parquet",), (), 2500))
    counting = CountingStore(store)
    read = read_tables(counting, "batch", [(SCHEMA, t) for t in tables])
    assert [r.column("id").to_pylist() for r in read] == [
        [], list(range(2000, 2040)), [3000], list(range(50_000, 52_500))]
    assert all(r.schema.equals(SCHEMA) for r in read)
    # one ranged request covering the three packed tables' bytes (not the first table's), one GET
    assert counting.requests == [("batch/seg-00000/small-tables-00000.pack", offsets[1], len(pack) - offsets[1]),
                                 "batch/seg-00000/db.big/part-00000.parquet"]


def test_a_file_unlike_its_manifest_among_a_groups_tables_is_an_error_naming_it(tmp_path):
    """The group's tables are read by several threads: a bad file in any share stops the read."""
    bad = io.BytesIO()
    pq.write_table(pa.table({"id": ["one", "two"], "v": ["a", "b"]}), bad)  # ids as text
    files = [parquet_bytes(3, first=10 * i) for i in range(4)]
    files[2] = bad.getvalue()
    offsets = [sum(len(f) for f in files[:i]) for i in range(len(files))]
    store = StorageSpec(f"file://{tmp_path}/root").open()
    store.put_bytes("batch/seg-00000/small-tables-00000.pack", b"".join(files))
    tables = [_table(f"t{i}", ("seg-00000/small-tables-00000.pack",), ((offsets[i], len(files[i])),), 3)
              for i in range(len(files))]
    where = f"small-tables-00000.pack (bytes {offsets[2]}-{offsets[2] + len(files[2]) - 1})"
    with pytest.raises(ValueError, match=re.escape(where) + ".*types do not match the manifest"):
        read_tables(store, "batch", [(SCHEMA, t) for t in tables])


def test_a_pack_shorter_than_its_manifest_says_is_an_error_naming_it(storage):
    data = parquet_bytes(10)
    storage.open().put_bytes("batch/seg-00000/small-tables-00000.pack", data[:-100])
    table = _table("t", ("seg-00000/small-tables-00000.pack",), ((0, len(data)),), 10)
    with pytest.raises(StorageError, match=r"small-tables-00000.pack.*(shorter|has \d+ bytes)"):
        read_tables(storage.open(), "batch", [(SCHEMA, table)])


def change_rows_bytes() -> bytes:
    """Two change rows as capture writes them (every metadata column, the whole before-image): an
    insert, then an update that moved its key from 1 to 2, in a table of ``SCHEMA``'s columns."""
    rows = [{"id": 1, "v": "one", "_op": "I", "_before": None},
            {"id": 2, "v": "two", "_op": "U", "_before": {"id": 1, "v": "one"}}]
    for i, row in enumerate(rows):
        row.update(_binlog_file="binlog.000001", _binlog_seq=1, _binlog_pos=100 * (i + 1), _row_index=0,
                   _commit_ts=None, _gtid=None, _txn="binlog.000001:4")
    out = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows, schema=cr.change_row_schema(SCHEMA)), out)
    return out.getvalue()


@pytest.mark.parametrize("keys, metadata, before", [
    (("id",), frozenset(), [None, {"id": 1}]),  # netting a keyed table needs its old key only
    (("id",), frozenset({cr.BEFORE}), [None, {"id": 1, "v": "one"}]),  # asked for: the whole image
    ((), frozenset(), [None, {"id": 1, "v": "one"}]),  # a keyless table's update removes that row
])
def test_the_before_image_is_read_whole_only_where_it_is_needed(tmp_path, keys, metadata, before):
    columns = (ColumnSpec("id", "bigint", "int64", False), ColumnSpec("v", "text", "string"))
    table = TableChanges("db", "t", columns, keys, ("seg-00000/db.t/part-00000.parquet",), 2)
    store = StorageSpec(f"file://{tmp_path}/root").open()
    store.put_bytes("batch/seg-00000/db.t/part-00000.parquet", change_rows_bytes())
    schema = change_schema(table, metadata)
    read, = read_tables(store, "batch", [(schema, table)])
    assert read.schema.equals(schema)
    assert read.column(cr.BEFORE).to_pylist() == before
    assert read.select(["id", "v", cr.OP]).to_pylist() == [{"id": 1, "v": "one", cr.OP: "I"},
                                                          {"id": 2, "v": "two", cr.OP: "U"}]
