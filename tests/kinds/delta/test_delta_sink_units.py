"""The Delta Lake sink's Spark-free parts: what an ALTER TABLE statement does to columns, each MySQL
type's Delta type (from the batch's Arrow type and from a DDL statement), the transaction version
of a position, the lake's spellings of one location for delta-rs and for Spark, which tables a lake
copies again instead of merging, the schema changes a table needs, and an empty table's append and a
small table's merge from Arrow, keyed and keyless (delta-rs, no Spark)."""

import datetime as dt
import random
from collections import Counter

import pyarrow as pa
import pytest

from mysql_cdc.contracts import BinlogPosition, ChangeBatch, ColumnSpec, DdlSegment, DdlTarget, RowSegment, TableChanges
from mysql_cdc.contracts import change_row as cr
from mysql_cdc.kinds.delta.sink.merges import Txn, append_arrow, arrow_inserts, done, merge_arrow, merge_arrow_keyless
from mysql_cdc.merge.multiset import keyless_rewrite
from mysql_cdc.merge.ddl_statements import added_columns, column_drops, column_renames, created_columns, ddl_spark_type
from mysql_cdc.merge.ddl_statements import existing_value
from mysql_cdc.kinds.delta.sink.recopy import spark_type, tables_to_copy
from mysql_cdc.kinds.delta.sink.tables import delta_type, schema_changes
from mysql_cdc.merge.errors import FollowerSchemaError
from mysql_cdc.kinds.delta.state.location import LakeLocation, position_version
from mysql_cdc.storage import StorageSpec

P = BinlogPosition.parse


def test_renames_drops_and_adds_of_one_statement():
    statement = ("ALTER TABLE `shop`.`orders` RENAME COLUMN `note` TO `memo`, CHANGE COLUMN qty quantity INT, "
                 "DROP COLUMN legacy, DROP INDEX by_note, ADD COLUMN flag TINYINT NOT NULL, "
                 "ADD INDEX (flag), ADD `price, net` DECIMAL(10,2) UNSIGNED DEFAULT '1.50' AFTER flag")
    assert column_renames(statement) == [("note", "memo"), ("qty", "quantity")]
    assert column_drops(statement) == ["legacy"]
    added = added_columns(statement)
    assert [(a.name, ddl_spark_type(a), existing_value(a, ddl_spark_type(a))) for a in added] == [
        ("flag", "TINYINT", "0"), ("price, net", "DECIMAL(10,2)", "'1.50'")]


def test_a_change_that_keeps_the_name_is_no_rename():
    assert column_renames("ALTER TABLE t CHANGE c c BIGINT NOT NULL") == []


@pytest.mark.parametrize(("definition", "expected"), [
    ("x INT UNSIGNED", ("BIGINT", None)),
    ("x BIGINT UNSIGNED DEFAULT 7", ("DECIMAL(20,0)", "7")),
    ("x DECIMAL(65,30)", ("STRING", None)),
    ("x VARCHAR(20) NOT NULL", ("STRING", "''")),
    ("x DATETIME(6) DEFAULT NULL", ("TIMESTAMP_NTZ", None)),
    ("x TIME NOT NULL DEFAULT '00:00:00'", ("BIGINT", "'00:00:00'")),
])
def test_an_added_columns_delta_type_and_the_value_of_existing_rows(definition, expected):
    (column,) = added_columns(f"ALTER TABLE t ADD COLUMN {definition}")
    assert (ddl_spark_type(column), existing_value(column, ddl_spark_type(column))) == expected


def test_values_existing_rows_get_that_no_literal_gives_are_refused():
    for definition in ("d DATE NOT NULL", "e ENUM('a','b') NOT NULL", "t DATETIME DEFAULT CURRENT_TIMESTAMP"):
        (column,) = added_columns(f"ALTER TABLE t ADD COLUMN {definition}")
        assert existing_value(column, ddl_spark_type(column)) == "" or ddl_spark_type(column) is None, definition


@pytest.mark.parametrize(("arrow", "delta"), [
    ("int8", "TINYINT"), ("int64", "BIGINT"), ("decimal128(20, 0)", "DECIMAL(20,0)"), ("string", "STRING"),
    ("timestamp[us]", "TIMESTAMP_NTZ"), ("timestamp[us, tz=UTC]", "TIMESTAMP"), ("duration[us]", "BIGINT"),
    ("date32[day]", "DATE"), ("binary", "BINARY"), ("float", "FLOAT"),
])
def test_each_batch_type_has_its_delta_type(arrow, delta):
    assert delta_type(ColumnSpec("c", "x", arrow), "db.t") == delta


def test_transaction_versions_follow_binlog_order_across_files():
    positions = [P("binlog.000001:4"), P("binlog.000001:999999"), P("binlog.000002:4"), P("binlog.1000000:4")]
    versions = [position_version(p) for p in positions]
    assert versions == sorted(versions) and len(set(versions)) == 4 and versions[-1] < 2**63


def test_one_location_spelled_for_delta_rs_and_for_spark():
    lake = LakeLocation(StorageSpec("s3://lake/mysql", {"endpoint_url": "http://127.0.0.1:9000",
                                                        "region_name": "us-east-1", "aws_access_key_id": "k",
                                                        "aws_secret_access_key": "s"}))
    assert lake.table_uri("shop", "orders") == "s3://lake/mysql/shop/orders"
    assert lake.spark_path(lake.table_uri("shop", "orders")) == "s3a://lake/mysql/shop/orders"
    assert lake.state_uri("p", "checkpoint") == "s3://lake/mysql/_mysql_cdc/p/checkpoint"
    options = lake.storage_options()
    assert (options["AWS_ENDPOINT_URL"], options["AWS_ALLOW_HTTP"], options["AWS_ACCESS_KEY_ID"]) == (
        "http://127.0.0.1:9000", "true", "k")
    conf = lake.hadoop_conf()
    assert conf["fs.s3a.bucket.lake.endpoint"] == "http://127.0.0.1:9000"
    assert conf["fs.s3a.bucket.lake.connection.ssl.enabled"] == "false"
    assert LakeLocation(StorageSpec("file:///data/lake")).hadoop_conf() == {}


# -- which tables a lake copies again instead of merging (sinks.delta.recopy) ----------------------


def _rows(index, *tables):
    return RowSegment(index, P(f"b.000001:{100 * index + 4}"), P(f"b.000001:{100 * index + 50}"), tuple(
        TableChanges("shop", name, tuple(ColumnSpec(c, "", arrow) for c, arrow in columns), ("id",), ("f",), 1)
        for name, columns in tables))


def _alter(index, statement):
    return DdlSegment(index, P(f"b.000001:{100 * index + 4}"), P(f"b.000001:{100 * index + 50}"), "shop", statement,
                      "alter_table", (DdlTarget("shop", "orders"),))


def _batch(*segments):
    return ChangeBatch("p", "b1", segments[0].start, segments[-1].end, tuple(segments))


LAKE = {("shop", "orders"): {"id": "INT", "qty": "INT", "price": "DECIMAL(10,2)"}}


@pytest.mark.parametrize(("segments", "copied"), [
    # exact widenings and new columns merge
    ([_rows(0, ("orders", [("id", "int64"), ("qty", "int32"), ("price", "decimal128(12, 3)"), ("note", "string")]))],
     {}),
    # a narrower DECIMAL, INT -> STRING: copied again
    ([_rows(0, ("orders", [("id", "int32"), ("price", "decimal128(10, 1)")]))],
     {"shop.orders": "price changed type from DECIMAL(10,2) to DECIMAL(10,1)"}),
    # a column added in the batch, then retyped in it: checked against the batch's own earlier rows
    ([_rows(0, ("orders", [("id", "int32"), ("n", "int32")])), _rows(1, ("orders", [("id", "int32"), ("n", "string")]))],
     {"shop.orders": "n changed type from INT to STRING"}),
    # a table the lake does not have yet is created with its rows
    ([_rows(0, ("fresh", [("id", "string")])), _rows(1, ("fresh", [("id", "string")]))], {}),
    # values for existing rows: a literal is given, a computed one is not
    ([_alter(0, "ALTER TABLE orders ADD COLUMN flag INT NOT NULL DEFAULT 3")], {}),
    ([_alter(0, "ALTER TABLE orders ADD COLUMN at DATETIME DEFAULT CURRENT_TIMESTAMP")],
     {"shop.orders": "ADD COLUMN at gives the existing rows a value the leader computed"}),
])
def test_a_lake_copies_again_the_tables_whose_changes_it_cannot_take_exactly(segments, copied):
    found = tables_to_copy(_batch(*segments), lambda db, t: LAKE.get((db, t)))
    assert {name: why.split(", which")[0] for name, why in found.items()} == copied


@pytest.mark.parametrize(("delta_rs", "spark"), [
    ("integer", "INT"), ("long", "BIGINT"), ("short", "SMALLINT"), ("byte", "TINYINT"), ("decimal(20,0)", "DECIMAL(20,0)"),
    ("timestamp_ntz", "TIMESTAMP_NTZ"), ("string", "STRING"), ("binary", "BINARY")])
def test_delta_rs_type_names_as_spark_spells_them(delta_rs, spark):
    assert spark_type(delta_rs) == spark


@pytest.mark.parametrize(("statement", "columns"), [
    ("CREATE TABLE IF NOT EXISTS `shop`.`t` (id INT UNSIGNED NOT NULL AUTO_INCREMENT, `a, b` DECIMAL(65,30), "
     "e ENUM('x,y','z') DEFAULT 'z', PRIMARY KEY (id), KEY k (e)) ENGINE=InnoDB",
     [("id", "BIGINT"), ("a, b", "STRING"), ("e", "STRING")]),
    ("CREATE TABLE t (d DATETIME(6), tm TIME, y YEAR, bits BIT(3), CONSTRAINT c CHECK (y > 2000))",
     [("d", "TIMESTAMP_NTZ"), ("tm", "BIGINT"), ("y", "SMALLINT"), ("bits", "BINARY")]),
    ("CREATE TABLE t LIKE u", None),  # the rows (or a copy) bring its columns
    ("CREATE TABLE t (id INT) SELECT * FROM u", None),
    ("CREATE TABLE t (a INT, b INT AS (a + 1))", None),  # generated: the rows say whether it is carried
    ("CREATE TABLE t (g GEOMETRY)", None),
])
def test_the_columns_a_create_table_defines(statement, columns):
    assert created_columns(statement) == columns


def test_an_empty_tables_append_keeps_every_net_row_but_the_deletes_in_delta_values():
    table = TableChanges("d", "t", (ColumnSpec("id", "int", "int32", False), ColumnSpec("tm", "time(6)", "duration[us]"),
                                    ColumnSpec("at", "datetime(6)", "timestamp[us]")), ("id",), (), 3)
    net = pa.table({
        "id": pa.array([1, 2, 3], pa.int32()),
        "tm": pa.array([dt.timedelta(hours=-838, microseconds=-1), None, dt.timedelta(seconds=1)], pa.duration("us")),
        "at": pa.array([dt.datetime(2024, 1, 1, 12), None, None], pa.timestamp("us")),
        cr.NET_OP: [cr.INSERT, cr.DELETE, cr.UPDATE], cr.NET_COUNT: pa.array([1, 1, 1], pa.int64()),
    })
    rows = arrow_inserts(table, net)
    assert rows.schema == pa.schema([("id", pa.int32()), ("tm", pa.int64()), ("at", pa.timestamp("us"))])
    assert rows.to_pylist() == [{"id": 1, "tm": -838 * 3600 * 10**6 - 1, "at": dt.datetime(2024, 1, 1, 12)},
                                {"id": 3, "tm": 10**6, "at": None}]


def test_an_arrow_append_is_one_commit_per_transaction_id(tmp_path):
    """delta-rs does not skip a transaction id it has by itself (Spark does): ``append_arrow`` reads the
    table's record of it first. No rows: no commit at all."""
    from deltalake import DeltaTable, write_deltalake

    uri = str(tmp_path / "t")
    write_deltalake(uri, pa.table({"id": pa.array([], pa.int64())}))  # an empty table: version 0
    rows = pa.table({"id": pa.array([1, 2], pa.int64())})
    append_arrow(DeltaTable(uri), rows, Txn("mysql-cdc/p/leader", 7))
    append_arrow(DeltaTable(uri), rows, Txn("mysql-cdc/p/leader", 7))  # a retry of the same commit
    append_arrow(DeltaTable(uri), rows.slice(0, 0), Txn("mysql-cdc/p/leader", 9))
    table = DeltaTable(uri)
    assert table.version() == 1 and table.transaction_version("mysql-cdc/p/leader") == 7
    assert sorted(table.to_pyarrow_table().column("id").to_pylist()) == [1, 2]
    append_arrow(DeltaTable(uri), rows, Txn("mysql-cdc/p/leader", 8))  # the next segment's
    assert DeltaTable(uri).version() == 2 and DeltaTable(uri).transaction_version("mysql-cdc/p/leader") == 8
    # a batch that spells the column in another case (MySQL's names ignore case) appends to it
    append_arrow(DeltaTable(uri), pa.table({"ID": pa.array([3], pa.int64())}), Txn("mysql-cdc/p/leader", 10))
    assert sorted(DeltaTable(uri).to_pyarrow_table().column("id").to_pylist()) == [1, 1, 2, 2, 3]


def test_a_table_at_its_cut_version_is_known_not_to_hold_the_segment_without_reading_its_log(tmp_path):
    """``done`` reads the app's last transaction version (every log entry since the last log
    checkpoint) only for a table that moved past its version in the cut: one still at it had no
    commit since the state row was written. Here the log is gone after the table was opened, so a
    read of it would fail."""
    import shutil

    from deltalake import DeltaTable, write_deltalake

    uri = str(tmp_path / "t")
    write_deltalake(uri, pa.table({"id": pa.array([1], pa.int64())}))
    append_arrow(DeltaTable(uri), pa.table({"id": pa.array([2], pa.int64())}), Txn("mysql-cdc/p/leader", 7))
    opened = DeltaTable(uri)  # version 1, holding the app's commit at 7
    assert done(opened, Txn("mysql-cdc/p/leader", 7, cut_version=0))  # moved past the cut: its log says
    assert not done(opened, Txn("mysql-cdc/p/leader", 8, cut_version=0))
    shutil.rmtree(tmp_path / "t" / "_delta_log")
    assert not done(opened, Txn("mysql-cdc/p/leader", 9, cut_version=1))  # at the cut: no read
    with pytest.raises(Exception):
        done(opened, Txn("mysql-cdc/p/leader", 9))  # (without a cut version, the log is read)


def test_a_driver_merge_applies_each_keys_net_row_once_per_transaction_id(tmp_path):
    """``merge_arrow`` (delta-rs, no Spark): a delete, an update, an insert and a delete of a key the table
    lacks, on a composite key with names SQL must quote, a column the table spells in another case;
    its retry under the same transaction id changes nothing."""
    from deltalake import DeltaTable, write_deltalake

    uri = str(tmp_path / "t")
    # the table spells a column "V", the batch "v" (MySQL's names ignore case; a case-only rename keeps the lake's)
    write_deltalake(uri, pa.table({"Id": pa.array([1, 1, 2], pa.int32()), "k 2": ["a", "b", "a"], "V": ["x", "y", "z"]}))
    table = TableChanges("d", "t", (ColumnSpec("Id", "int", "int32", False), ColumnSpec("k 2", "varchar(4)", "string"),
                                    ColumnSpec("v", "varchar(4)", "string")), ("Id", "k 2"), (), 4)
    net = pa.table({"Id": pa.array([1, 1, 3, 9], pa.int32()), "k 2": ["a", "b", "a", "a"], "v": [None, "Y", "new", None],
                    cr.NET_OP: [cr.DELETE, cr.UPDATE, cr.INSERT, cr.DELETE]})
    merge_arrow(DeltaTable(uri), table, net, Txn("mysql-cdc/p/leader", 5))
    merge_arrow(DeltaTable(uri), table, net, Txn("mysql-cdc/p/leader", 5))  # a retry of the same commit
    after = DeltaTable(uri)
    assert after.version() == 1 and after.transaction_version("mysql-cdc/p/leader") == 5
    assert sorted(after.to_pyarrow_table().to_pylist(), key=lambda r: (r["Id"], r["k 2"])) == [
        {"Id": 1, "k 2": "b", "V": "Y"}, {"Id": 2, "k 2": "a", "V": "z"}, {"Id": 3, "k 2": "a", "V": "new"}]


def net_of(before: Counter, after: Counter) -> pa.Table:
    """Keyless net rows as the netting makes them: per row value, ``I`` with the copies added or
    ``D`` with the copies removed."""
    rows = {"a": [], "b": [], cr.NET_OP: [], cr.NET_COUNT: []}
    for value in set(before) | set(after):
        change = after[value] - before[value]
        if change:
            for column, v in zip(("a", "b"), value):
                rows[column].append(v)
            rows[cr.NET_OP].append(cr.INSERT if change > 0 else cr.DELETE)
            rows[cr.NET_COUNT].append(abs(change))
    return pa.table({"a": pa.array(rows["a"], pa.int32()), "b": pa.array(rows["b"], pa.string()),
                     cr.NET_OP: pa.array(rows[cr.NET_OP], pa.string()), cr.NET_COUNT: pa.array(rows[cr.NET_COUNT], pa.int64())})


def held_of(rows: Counter) -> pa.Table:
    # as copies_held returns them: strings read as views, counts not null
    values = list(rows)
    return pa.table({"a": pa.array([v[0] for v in values], pa.int32()),
                     "b": pa.array([v[1] for v in values], pa.string_view()),
                     "__mcdc_copies": pa.array([rows[v] for v in values], pa.int64())})


def applied(table: Counter, source: pa.Table) -> Counter:
    """What the rewrite's MERGE does: every copy of a ``del`` value goes, each ``ins`` row is a copy."""
    rows = source.to_pylist()
    gone = {(r["a"], r["b"]) for r in rows if r["__mcdc_side"] == "del"}
    out = Counter({v: n for v, n in table.items() if v not in gone})
    out.update((r["a"], r["b"]) for r in rows if r["__mcdc_side"] == "ins")
    return out


def test_a_keyless_rewrite_in_arrow_on_inline_rows():
    """Equal rows are one value, NULLs included; a value's held copies are all removed and the count it
    must hold inserted back; values the batch does not touch are not in the source at all."""
    held = Counter({(1, "x"): 1, (2, None): 3, (3, "z"): 1, (None, None): 2})
    after = Counter({(1, "x"): 3, (2, None): 2, (3, "z"): 1, (None, None): 0, (4, None): 1})
    source = keyless_rewrite(net_of(held, after), held_of(held), ["a", "b"])
    rows = sorted(((r["__mcdc_side"], r["a"], r["b"]) for r in source.to_pylist()), key=repr)
    assert rows == sorted([("del", 1, "x"), ("del", 2, None), ("del", None, None),
                           ("ins", 1, "x"), ("ins", 1, "x"), ("ins", 1, "x"), ("ins", 2, None), ("ins", 2, None),
                           ("ins", 4, None)], key=repr)
    assert source.schema.field("b").type == pa.string()  # the batch's types, not delta-rs's views


def test_a_keyless_rewrite_matches_multiset_arithmetic_on_random_tables():
    rng = random.Random(7)
    values = [(a, b) for a in (1, 2, None) for b in ("x", "", None)]
    for _ in range(200):
        held = Counter({v: rng.randint(1, 3) for v in rng.sample(values, rng.randint(0, 6))})
        after = Counter({v: rng.randint(0, 4) for v in rng.sample(values, rng.randint(0, 6))})
        after.update({v: n for v, n in held.items() if v not in after})
        after = +after
        assert applied(held, keyless_rewrite(net_of(held, after), held_of(held), ["a", "b"])) == after


def test_a_driver_merge_of_a_keyless_table_rewrites_the_touched_values_once_per_transaction_id(tmp_path):
    """``merge_arrow_keyless`` (delta-rs, no Spark) on a table with deletion vectors and column mapping
    (the lake's defaults): copies added and removed, a value with NULLs, a value deleted whole; its
    retry under the same transaction id changes nothing."""
    from deltalake import DeltaTable, QueryBuilder, write_deltalake

    uri = str(tmp_path / "bag")
    held = Counter({(1, "x"): 2, (2, None): 1, (None, None): 1, (5, "keep"): 1})
    rows = [v for v, n in held.items() for _ in range(n)]
    write_deltalake(uri, pa.table({"a": pa.array([r[0] for r in rows], pa.int32()), "B": [r[1] for r in rows]}),
                    configuration={"delta.enableDeletionVectors": "true", "delta.columnMapping.mode": "name",
                                   "delta.minReaderVersion": "3", "delta.minWriterVersion": "7"})
    table = TableChanges("d", "bag", (ColumnSpec("a", "int", "int32"), ColumnSpec("b", "varchar(4)", "string")),
                         (), (), 4)
    after = Counter({(1, "x"): 1, (2, None): 3, (None, None): 0, (5, "keep"): 1, (6, None): 2})
    net = net_of(held, after)
    merge_arrow_keyless(DeltaTable(uri), table, net, Txn("mysql-cdc/p/leader", 5))
    merge_arrow_keyless(DeltaTable(uri), table, net, Txn("mysql-cdc/p/leader", 5))  # a retry of the same commit
    lake = DeltaTable(uri)
    assert lake.version() == 1 and lake.transaction_version("mysql-cdc/p/leader") == 5
    read = pa.table(QueryBuilder().register("t", lake).execute('SELECT a, "B" FROM t').read_all()).to_pylist()
    assert Counter((r["a"], r["B"]) for r in read) == +after


def test_the_schema_changes_that_make_a_tables_columns_the_batchs():
    existing = {"id": ("id", "INT"), "n": ("N", "INT"), "gone": ("gone", "STRING")}
    columns = (ColumnSpec("id", "int", "int32", False), ColumnSpec("n", "bigint", "int64"),
               ColumnSpec("added", "date", "date32[day]"))
    changes = schema_changes(existing, columns, "d.t")
    assert [c.name for c in changes.added] == ["added"]
    assert changes.dropped == ("gone",) and changes.widened == (("N", "BIGINT"),)
    assert not schema_changes({"id": ("id", "INT")}, columns[:1], "d.t")
    with pytest.raises(FollowerSchemaError, match=r"d\.t\.n changed type from BIGINT to INT.*resnapshot"):
        schema_changes({"n": ("n", "BIGINT")}, (ColumnSpec("n", "int", "int32"),), "d.t")


# -- which delta-rs failures the lake retries itself (state.location.lake_retry) -------------------


@pytest.mark.parametrize("message, retried", [
    ("Generic S3 error: Error performing GET http://s3/x/_delta_log/1.json - HTTP error: request or response body "
     "error: error reading a body from connection: Connection reset by peer (os error 104)", True),
    ("Generic S3 error: Error performing PUT http://s3/x/_delta_log/2.json in 5ms, after 2 retries - HTTP error: "
     "error sending request: connection error: Connection reset by peer (os error 104)", True),
    # object_store retried a 5xx for its whole retry_timeout already: not again
    ("Generic S3 error: Error performing PUT http://s3/x in 30s, after 5 retries - Server error with status "
     "503 Service Unavailable: <Error><Code>SlowDown</Code></Error>", False),
    ("Generic S3 error: Client error with status 403 Forbidden: <Error><Code>AccessDenied</Code></Error>", False),
])
def test_the_lake_retries_a_broken_connection_not_what_object_store_retried_or_a_refusal(message, retried):
    from mysql_cdc.kinds.delta.state.location import transient_lake_error

    assert (transient_lake_error(OSError(message)) is not None) is retried
    assert transient_lake_error(ValueError(message)) is None  # not delta-rs's I/O error
