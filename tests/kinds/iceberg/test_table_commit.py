"""An Iceberg table's commit (``kinds.iceberg.commit``) against a real catalog: Iceberg's JDBC
catalog in a database of the suite's MariaDB server, the warehouse in a bucket of the suite's S3
endpoint (moto). The tables are read back with pyiceberg's own scan, not the product's code, and
compared with the rows the leader would hold (written out here, not derived from the commit)."""

from __future__ import annotations

import datetime as dt
import uuid
from collections import Counter
from decimal import Decimal

import pyarrow as pa
import pytest

from iceberg_helpers import duckdb_iceberg_scan
from mysql_cdc.contracts import BinlogPosition, ColumnSpec
from mysql_cdc.contracts import change_row as cr
from mysql_cdc.kinds.iceberg.catalog import CatalogRef
from mysql_cdc.kinds.iceberg.commit import (IN_PRUNING_KEYS, SUMMARY_APP, SUMMARY_POSITION, CommitId, TableCommit,
                                           committed_position)
from mysql_cdc.kinds.iceberg.row_delta import MIN_FILE_BYTES, matching_positions
from mysql_cdc.kinds.iceberg.types import iceberg_schema, to_iceberg
from mysql_cdc.mysql_server import MySQLSettings
from mysql_cdc.storage import StorageSpec

APP = "mysql-cdc/orders/leader-1"


def open_catalog(server, warehouse: StorageSpec):
    """A fresh JDBC catalog (a database of its own on ``server``) with its namespace ``shop``."""
    database = "iceberg_" + uuid.uuid4().hex[:8]
    server.run_sql([f"CREATE DATABASE {database}"])
    opened = CatalogRef("lake", MySQLSettings(**server.conn_params()), database, warehouse).open()
    opened.create_namespace("shop")
    return opened


@pytest.fixture
def catalog(follower, s3_bucket):
    """A catalog whose warehouse is a fresh bucket of the suite's S3 endpoint."""
    options = {k: s3_bucket[k] for k in ("endpoint_url", "region_name", "aws_access_key_id", "aws_secret_access_key")}
    return open_catalog(follower, StorageSpec(f"s3://{s3_bucket['bucket']}/warehouse", options))


# the two ways a keyed table's changed rows leave their files: the files rewritten, or position
# delete files (``row_delta``; the follower creates its tables so)
MODES = ["copy-on-write", "merge-on-read"]


def create_keyed(catalog, name: str, mode: str, columns=None, min_file_bytes: int = 0):
    """A keyed table merged copy-on-write or on read; merged on read, every data file from
    ``min_file_bytes`` up gets position deletes (0 here: these tests' files are all small)."""
    columns = columns or KEYED
    properties = {f"write.{op}.mode": mode for op in ("delete", "update", "merge")}
    properties[MIN_FILE_BYTES] = str(min_file_bytes)
    return catalog.create_table(name, schema=iceberg_schema(columns, name), properties=properties)


def delete_files(table) -> int:
    return int(table.current_snapshot().summary.get("total-delete-files", "0"))


def at(offset: int) -> BinlogPosition:
    return BinlogPosition("binlog.000001", offset)


KEYED = (ColumnSpec("id", "int", "int32", nullable=False), ColumnSpec("sku", "varchar", "string"),
         ColumnSpec("qty", "smallint", "int16"))


def net(columns, rows: list[tuple], ops: list[str], copies: list[int] | None = None) -> pa.Table:
    """Net rows as the merge hands them over: the table's columns, the net op and copies."""
    schema = pa.schema([pa.field(c.name, _arrow(c.arrow_type)) for c in columns])
    table = pa.Table.from_pylist([dict(zip(schema.names, r)) for r in rows], schema=schema)
    table = to_iceberg(table, columns, "test")
    return (table.append_column(cr.NET_OP, pa.array(ops, pa.string()))
            .append_column(cr.NET_COUNT, pa.array(copies or [1] * len(rows), pa.int64())))


def rows_of(catalog, name: str) -> list[tuple]:
    return sorted(tuple(r.values()) for r in catalog.load_table(name).scan().to_arrow().to_pylist())


def commit_keyed(catalog, name: str, rows, ops, offset: int) -> int | None:
    change = TableCommit(catalog.load_table(name), CommitId(APP, at(offset)))
    if change.done:
        return None
    change.upsert(net(KEYED, rows, ops), ["id"])
    return change.commit()


@pytest.mark.parametrize("mode", MODES)
def test_keyed_rows_inserted_updated_deleted_and_moved_to_a_new_key(catalog, mode):
    create_keyed(catalog, "shop.orders", mode)
    commit_keyed(catalog, "shop.orders", [(1, "a", 1), (2, "b", 2), (3, "c", 3)], ["I", "I", "I"], 100)
    # 2 updated, 3 deleted, 1 moved to key 9 (a delete of 1 and an insert of 9), 4 new
    commit_keyed(catalog, "shop.orders", [(2, "b2", 20), (3, "c", 3), (1, "a", 1), (9, "a", 1), (4, "d", 4)],
                 ["U", "D", "D", "I", "I"], 200)
    assert rows_of(catalog, "shop.orders") == [(2, "b2", 20), (4, "d", 4), (9, "a", 1)]
    table = catalog.load_table("shop.orders")
    summary = table.current_snapshot().summary.additional_properties
    assert (summary[SUMMARY_APP], summary[SUMMARY_POSITION]) == (APP, "binlog.000001:200")
    # one snapshot per commit (the first only adds files: Iceberg calls it an append)
    assert [s.summary.operation.value for s in table.snapshots()] == ["append", "overwrite"]
    summary = table.current_snapshot().summary
    if mode == "merge-on-read":  # the three old rows deleted by position in one delete file, no file removed
        assert (summary.get("added-position-deletes"), summary.get("added-delete-files")) == ("3", "1")
        assert summary.get("deleted-data-files") is None
    else:
        assert summary.get("deleted-data-files") == "1" and delete_files(table) == 0


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("keys", [3, IN_PRUNING_KEYS + 1], ids=["files-pruned-by-the-keys", "by-their-range"])
def test_only_the_files_that_may_hold_a_changed_key_are_touched(catalog, keys, mode):
    """Three files of keys [0, 3000), [3000, 6000), [6000, 9000); the changed keys all in the middle
    file's range (a few, or more than ``In`` prunes by): the other two files stay as they are, and
    the middle one is rewritten (copy-on-write) or gets a delete file of the changed rows' positions
    (merge-on-read)."""
    create_keyed(catalog, "shop.orders", mode)
    for n, start in enumerate((0, 3000, 6000)):
        ids = range(start, start + 3000)
        commit_keyed(catalog, "shop.orders", [(i, "a", 1) for i in ids], ["I"] * 3000, 100 + n)
    before = {task.file.file_path for task in catalog.load_table("shop.orders").scan().plan_files()}
    changed = range(3000, 3000 + 2 * keys, 2)  # every other key of the middle file, from its first
    commit_keyed(catalog, "shop.orders", [(i, "b", 2) for i in changed], ["U"] * keys, 200)
    tasks = list(catalog.load_table("shop.orders").scan().plan_files())
    after = {task.file.file_path for task in tasks}
    if mode == "copy-on-write":
        assert len(before - after) == 1  # the middle file, rewritten
    else:
        assert before < after  # kept, the changed rows added in a file of their own
        deleting = [task for task in tasks if task.delete_files]
        assert len(deleting) == 1 and deleting[0].file.file_path in before
        (delete_file,) = deleting[0].delete_files
        assert delete_file.record_count == keys  # exactly the changed rows' positions
    expected = {(i, "b", 2) if i in set(changed) else (i, "a", 1) for i in range(9000)}
    assert set(rows_of(catalog, "shop.orders")) == expected and len(rows_of(catalog, "shop.orders")) == 9000


def test_the_warehouse_on_s3_is_written_with_files_opened_lazily(catalog, s3_bucket):
    """The catalog's FileIO (``file_io.WarehouseFileIO``) opens S3 files lazily: Arrow then writes a
    file smaller than a part with one PUT, not a multipart upload's three requests."""
    from mysql_cdc.kinds.iceberg.file_io import WarehouseFileIO

    catalog.create_table("shop.orders", schema=iceberg_schema(KEYED, "shop.orders"))
    commit_keyed(catalog, "shop.orders", [(1, "a", 1)], ["I"], 100)
    table = catalog.load_table("shop.orders")
    assert isinstance(table.io, WarehouseFileIO) and table.metadata_location.startswith("s3://")
    filesystem = table.io.fs_by_scheme("s3", s3_bucket["bucket"])
    assert filesystem.__reduce__()[1][0]["allow_delayed_open"] is True
    assert rows_of(catalog, "shop.orders") == [(1, "a", 1)]


def test_a_retry_skips_a_table_holding_its_position_and_only_that(catalog):
    catalog.create_table("shop.orders", schema=iceberg_schema(KEYED, "shop.orders"))
    first = commit_keyed(catalog, "shop.orders", [(1, "a", 1)], ["I"], 100)
    assert commit_keyed(catalog, "shop.orders", [(1, "a", 1)], ["I"], 100) is None  # the retry
    assert commit_keyed(catalog, "shop.orders", [(1, "x", 1)], ["U"], 50) is None  # an older range
    assert catalog.load_table("shop.orders").current_snapshot().snapshot_id == first
    # another app's commits (another pipeline, or after a failover) do not count
    other = TableCommit(catalog.load_table("shop.orders"), CommitId("mysql-cdc/orders/leader-2", at(100)))
    assert not other.done
    assert commit_keyed(catalog, "shop.orders", [(1, "b", 2)], ["U"], 300) is not None
    assert rows_of(catalog, "shop.orders") == [(1, "b", 2)]


def test_the_position_is_found_under_a_later_commit_of_another_writer(catalog):
    catalog.create_table("shop.orders", schema=iceberg_schema(KEYED, "shop.orders"))
    commit_keyed(catalog, "shop.orders", [(1, "a", 1)], ["I"], 100)
    table = catalog.load_table("shop.orders")
    table.append(to_iceberg(pa.table({"id": pa.array([7], pa.int32()), "sku": ["z"], "qty": pa.array([1], pa.int16())}),
                            KEYED, "test"))  # e.g. a backfill by another engine
    assert committed_position(catalog.load_table("shop.orders"), APP) == at(100)


def test_a_commit_is_refused_when_the_table_moved_since_it_was_loaded(catalog):
    from pyiceberg.exceptions import CommitFailedException

    catalog.create_table("shop.orders", schema=iceberg_schema(KEYED, "shop.orders"))
    commit_keyed(catalog, "shop.orders", [(1, "a", 1)], ["I"], 100)
    stale = TableCommit(catalog.load_table("shop.orders"), CommitId(APP, at(300)))
    commit_keyed(catalog, "shop.orders", [(1, "b", 2)], ["U"], 200)
    stale.upsert(net(KEYED, [(1, "stale", 9)], ["U"]), ["id"])
    with pytest.raises(CommitFailedException):
        stale.commit()  # at once: not retried on the table's new state
    assert rows_of(catalog, "shop.orders") == [(1, "b", 2)]
    # the commits' own no-retry setting stayed theirs: the table's other writers keep their retries
    assert "commit.retry.num-retries" not in catalog.load_table("shop.orders").properties


KEYLESS = (ColumnSpec("a", "int", "int32"), ColumnSpec("b", "varchar", "string"))


def test_a_keyless_table_is_a_multiset_nulls_included(catalog):
    catalog.create_table("shop.events", schema=iceberg_schema(KEYLESS, "shop.events"))
    leader: Counter = Counter()

    def apply(rows, ops, copies, offset):
        change = TableCommit(catalog.load_table("shop.events"), CommitId(APP, at(offset)))
        change.rewrite_multiset(net(KEYLESS, rows, ops, copies), ["a", "b"])
        change.commit()
        for row, op, n in zip(rows, ops, copies):
            leader[row] += n if op == "I" else -n

    apply([(1, "x"), (None, "y"), (2, None)], ["I", "I", "I"], [3, 2, 1], 100)
    apply([(1, "x"), (None, "y"), (2, None), (4, "w")], ["D", "D", "D", "I"], [1, 2, 1, 2], 200)
    apply([(1, "x"), (4, "w")], ["D", "I"], [2, 1], 300)
    expected = sorted((row for row, n in leader.items() for _ in range(n)), key=repr)
    assert sorted(rows_of(catalog, "shop.events"), key=repr) == expected == [(4, "w")] * 3


TYPED = (
    ColumnSpec("id", "bigint", "int64", nullable=False), ColumnSpec("t8", "tinyint", "int8"),
    ColumnSpec("u64", "bigint unsigned", "decimal128(20, 0)"), ColumnSpec("d", "decimal(38,10)", "decimal128(38, 10)"),
    ColumnSpec("f", "float", "float"), ColumnSpec("g", "double", "double"), ColumnSpec("s", "varchar", "string"),
    ColumnSpec("bin", "varbinary", "binary"), ColumnSpec("ok", "tinyint(1)", "bool"),
    ColumnSpec("day", "date", "date32[day]"), ColumnSpec("wall", "datetime(6)", "timestamp[us]"),
    ColumnSpec("at", "timestamp(6)", "timestamp[us, tz=UTC]"), ColumnSpec("span", "time(6)", "duration[us]"),
)


def typed_values() -> dict:
    return {
        "id": [1, 2], "t8": [-128, 127], "u64": [Decimal(2**64 - 1), Decimal(0)],
        "d": [Decimal("1234567890123456789012345678.0123456789"), Decimal("-0.0000000001")],
        "f": [1.5, -0.25], "g": [1e308, -2.5e-308], "s": ["é€😀", ""], "bin": [b"\x00\xff", b""],
        "ok": [True, False], "day": [dt.date(1000, 1, 1), dt.date(9999, 12, 31)],
        "wall": [dt.datetime(1000, 1, 1, 0, 0, 0, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999)],
        "at": [dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=dt.timezone.utc),
               dt.datetime(2038, 1, 19, 3, 14, 7, 999999, tzinfo=dt.timezone.utc)],
        "span": [dt.timedelta(hours=838, minutes=59, seconds=59), -dt.timedelta(hours=838, minutes=59, seconds=59)],
    }


def commit_typed(catalog) -> None:
    """``typed_values``'s two rows inserted into ``shop.typed``, one column of each batch type."""
    schema = pa.schema([pa.field(c.name, _arrow(c.arrow_type)) for c in TYPED])
    batch = pa.Table.from_pydict(typed_values(), schema=schema)
    catalog.create_table("shop.typed", schema=iceberg_schema(TYPED, "shop.typed"))
    rows = to_iceberg(batch, TYPED, "test")
    rows = rows.append_column(cr.NET_OP, pa.array(["I", "I"])).append_column(cr.NET_COUNT, pa.array([1, 1], pa.int64()))
    change = TableCommit(catalog.load_table("shop.typed"), CommitId(APP, at(100)))
    change.upsert(rows, ["id"])
    change.commit()


def test_every_batch_type_reads_back_exactly(catalog):
    commit_typed(catalog)
    values = typed_values()
    read = catalog.load_table("shop.typed").scan().to_arrow().sort_by("id").to_pydict()
    spans = values.pop("span")
    assert read.pop("span") == [s // dt.timedelta(microseconds=1) for s in spans]  # a TIME's microseconds
    assert read == values
    types = {f.name: str(f.field_type) for f in catalog.load_table("shop.typed").schema().fields}
    assert types == {"id": "long", "t8": "int", "u64": "decimal(20, 0)", "d": "decimal(38, 10)", "f": "float",
                     "g": "double", "s": "string", "bin": "binary", "ok": "boolean", "day": "date",
                     "wall": "timestamp", "at": "timestamptz", "span": "long"}


def _arrow(alias: str) -> pa.DataType:
    import re

    match = re.match(r"decimal128\((\d+), (\d+)\)", alias)
    if match:
        return pa.decimal128(int(match[1]), int(match[2]))
    return {"timestamp[us]": pa.timestamp("us"), "timestamp[us, tz=UTC]": pa.timestamp("us", tz="UTC"),
            "duration[us]": pa.duration("us"), "date32[day]": pa.date32()}.get(alias) or pa.type_for_alias(alias)


@pytest.mark.parametrize("mode", MODES)
def test_duckdb_reads_the_committed_tables_exactly(follower, tmp_path, mode):
    """DuckDB, a reader users run, opens the tables by their metadata (a warehouse on the local file
    system: DuckDB's S3 access is an extension PyPI does not carry), position deletes applied."""
    catalog = open_catalog(follower, StorageSpec(f"file://{tmp_path}/warehouse"))
    create_keyed(catalog, "shop.orders", mode)
    commit_keyed(catalog, "shop.orders", [(1, "a", 1), (2, "b", 2), (3, "c", 3)], ["I", "I", "I"], 100)
    commit_keyed(catalog, "shop.orders", [(2, "b2", 20), (3, "c", 3), (9, "z", 9)], ["U", "D", "I"], 200)
    commit_typed(catalog)
    orders = duckdb_iceberg_scan(catalog.load_table("shop.orders").metadata_location, tmp_path)
    assert sorted(tuple(r.values()) for r in orders.to_pylist()) == [(1, "a", 1), (2, "b2", 20), (9, "z", 9)]
    typed = duckdb_iceberg_scan(catalog.load_table("shop.typed").metadata_location, tmp_path).sort_by("id").to_pydict()
    values = typed_values()
    spans = values.pop("span")
    assert typed.pop("span") == [s // dt.timedelta(microseconds=1) for s in spans]
    assert typed == values


def test_merge_on_read_then_a_rewrite_keeps_the_deleted_rows_deleted(catalog):
    """A change that rewrites files (here a column filled in every row, as an added column's value)
    on a table with position deletes reads the files with their deletes applied: an updated row is
    not brought back in its old version."""
    create_keyed(catalog, "shop.orders", "merge-on-read")
    commit_keyed(catalog, "shop.orders", [(1, "a", 1), (2, "b", 2), (3, "c", 3)], ["I", "I", "I"], 100)
    commit_keyed(catalog, "shop.orders", [(2, "b2", 20), (3, "c", 3)], ["U", "D"], 200)
    assert delete_files(catalog.load_table("shop.orders")) == 1
    change = TableCommit(catalog.load_table("shop.orders"), CommitId(APP, at(300)))
    change.fill("qty", pa.scalar(7, pa.int32()))
    change.commit()
    assert rows_of(catalog, "shop.orders") == [(1, "a", 7), (2, "b2", 7)]


def test_compaction_folds_the_position_deletes_into_the_data_files(catalog):
    """The maintenance job's compaction rewrites every file a delete file applies to and leaves the
    delete files out, dangling ones (whose data file a later rewrite removed) too: the same rows,
    no delete file, the snapshot's totals saying so."""
    from mysql_cdc.kinds.iceberg.maintenance import _compact

    create_keyed(catalog, "shop.orders", "merge-on-read")
    commit_keyed(catalog, "shop.orders", [(i, "a", 1) for i in range(100)], ["I"] * 100, 100)
    commit_keyed(catalog, "shop.orders", [(i, "b", 2) for i in range(0, 100, 3)], ["U"] * 34, 200)
    # keys 0 (its updated row, in the second file) and 1 (in the first): a delete file for each
    commit_keyed(catalog, "shop.orders", [(0, "b", 2), (1, "a", 1)], ["D", "D"], 300)
    expected = rows_of(catalog, "shop.orders")
    assert len(expected) == 98 and delete_files(catalog.load_table("shop.orders")) == 3
    compacted = _compact(catalog.load_table("shop.orders"))
    summary = compacted.current_snapshot().summary
    assert (summary.get("total-delete-files"), summary.get("total-position-deletes"), summary.get("total-data-files"),
            summary.get("total-records")) == ("0", "0", "1", "98")
    assert not any(task.delete_files for task in compacted.scan().plan_files())
    assert rows_of(catalog, "shop.orders") == expected
    assert _compact(compacted) is compacted  # nothing left to do

    # a delete file whose data file a copy-on-write change rewrote since applies to nothing: it goes too
    commit_keyed(catalog, "shop.orders", [(2, "c", 3)], ["U"], 400)
    change = TableCommit(catalog.load_table("shop.orders"), CommitId(APP, at(500)))
    change.fill("sku", pa.scalar("z"))
    change.commit()
    dangling = catalog.load_table("shop.orders")
    assert delete_files(dangling) == 1 and not any(task.delete_files for task in dangling.scan().plan_files())
    expected = rows_of(catalog, "shop.orders")
    assert len(expected) == 98 and {r[1] for r in expected} == {"z"}
    assert delete_files(_compact(dangling)) == 0 and rows_of(catalog, "shop.orders") == expected


KEY_TYPES = (ColumnSpec("u64", "bigint unsigned", "decimal128(20, 0)", nullable=False),
             ColumnSpec("bin", "binary(16)", "binary", nullable=False), ColumnSpec("d", "decimal(10,2)", "decimal128(10, 2)", nullable=False),
             ColumnSpec("wall", "datetime(6)", "timestamp[us]", nullable=False), ColumnSpec("day", "date", "date32[day]", nullable=False),
             ColumnSpec("s", "varchar", "string", nullable=False), ColumnSpec("v", "int", "int32"))


def test_merge_on_read_finds_rows_by_a_key_of_every_key_type(catalog):
    """A composite key of the types keys have (unsigned 64-bit, binary, decimal, datetime, date,
    text): the updated and deleted rows' positions are found, and only theirs."""
    create_keyed(catalog, "shop.keys", "merge-on-read", KEY_TYPES)
    names = [c.name for c in KEY_TYPES][:-1]

    def row(n: int, v: int) -> tuple:
        return (2**64 - 1 - n, uuid.UUID(int=n).bytes, Decimal(f"{n}.25"), dt.datetime(2024, 1, 1, 0, 0, 0, n),
                dt.date(2024, 1, 1) + dt.timedelta(days=n), f"é{n}", v)

    def commit(rows, ops, offset):
        change = TableCommit(catalog.load_table("shop.keys"), CommitId(APP, at(offset)))
        change.upsert(net(KEY_TYPES, rows, ops), names)
        change.commit()

    commit([row(n, 0) for n in range(20)], ["I"] * 20, 100)
    commit([row(3, 1), row(7, 1), row(11, 0)], ["U", "U", "D"], 200)
    table = catalog.load_table("shop.keys")
    assert table.current_snapshot().summary.get("added-position-deletes") == "3"
    got = sorted((r["u64"], r["v"]) for r in table.scan().to_arrow().to_pylist())
    assert got == sorted((2**64 - 1 - n, 1 if n in (3, 7) else 0) for n in range(20) if n != 11)


# a file's key columns (unsigned 64-bit, binary, text; every key type is in the test above) and the
# keys looked for, with a key of the file twice, a key the file lacks, and a composite key matching
# on one column only
_HELD = pa.table({"u64": pa.array([2**64 - 1, 5, 7, 5, 9], pa.uint64()),
                  "bin": pa.array([b"a", b"b", b"c", b"d", b"e"], pa.binary()),
                  "s": pa.array(["é1", "x", "y", "x2", "z"])})
_LOOKED_FOR = pa.table({"u64": pa.array([5, 9, 11], pa.uint64()), "bin": pa.array([b"b", b"x", b"e"], pa.binary()),
                        "s": pa.array(["x", "z", "q"])})


@pytest.mark.parametrize("names, expected", [
    (["u64"], [1, 3, 4]),  # a one-column key: its mask's set bits
    (["bin"], [1, 4]),
    (["s"], [1, 4]),
    (["u64", "bin"], [1]),  # composite: the join (rows 3 and 4 match on one column only)
    (["u64", "bin", "s"], [1]),
])
def test_the_positions_of_the_keys_are_those_of_every_row_holding_one(names, expected):
    """``row_delta.matching_positions``: the row numbers of the file's rows whose key is among the
    looked-for keys, ascending, as int64 (what a position delete file holds), by either path."""
    positions = matching_positions(_HELD.select(names), _LOOKED_FOR.select(names))
    assert positions.type == pa.int64() and positions.to_pylist() == expected


def test_merge_on_read_rewrites_the_small_files_and_deletes_by_position_in_the_others(catalog):
    """The table's ``mysql-cdc.merge-on-read.min-file-bytes``: a changed row in a file below it is
    rewritten with its file, one in a file from it up is deleted by position."""
    create_keyed(catalog, "shop.orders", "merge-on-read")
    commit_keyed(catalog, "shop.orders", [(i, "a", 1) for i in range(20_000)], ["I"] * 20_000, 100)  # a large file
    commit_keyed(catalog, "shop.orders", [(i, "a", 1) for i in range(20_000, 20_010)], ["I"] * 10, 200)  # a small one
    sizes = {task.file.file_path: task.file.file_size_in_bytes for task in catalog.load_table("shop.orders").scan().plan_files()}
    large, small = sorted(sizes, key=sizes.get, reverse=True)
    with catalog.load_table("shop.orders").transaction() as tx:
        tx.set_properties({MIN_FILE_BYTES: str(sizes[small] + 1)})
    commit_keyed(catalog, "shop.orders", [(5, "b", 2), (20_005, "b", 2)], ["U", "U"], 300)
    table = catalog.load_table("shop.orders")
    tasks = {task.file.file_path: task for task in table.scan().plan_files()}
    assert small not in tasks and large in tasks  # the small file rewritten, the large one kept
    assert [d.record_count for d in tasks[large].delete_files] == [1]  # its row 5, by position
    rows = rows_of(catalog, "shop.orders")
    assert len(rows) == 20_010 and (5, "b", 2) in rows and (20_005, "b", 2) in rows


def test_a_bad_min_file_bytes_is_refused_naming_the_table_and_property(catalog):
    create_keyed(catalog, "shop.orders", "merge-on-read")
    commit_keyed(catalog, "shop.orders", [(1, "a", 1)], ["I"], 100)
    with catalog.load_table("shop.orders").transaction() as tx:
        tx.set_properties({MIN_FILE_BYTES: "1MB"})
    with pytest.raises(ValueError, match=r"shop\.orders: table property mysql-cdc\.merge-on-read\.min-file-bytes='1MB'"):
        commit_keyed(catalog, "shop.orders", [(1, "b", 2)], ["U"], 200)
    assert rows_of(catalog, "shop.orders") == [(1, "a", 1)]
