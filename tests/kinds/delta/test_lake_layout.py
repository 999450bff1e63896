"""Tables partitioned as the pipelines file says (``follower.partition_by``, ``kinds.delta.options``):
created so, their rows merged exactly when an update moves a row to another partition (by delta-rs
in the driver and by Spark's MERGE, keyed and keyless), rewritten in one commit when the file's
partitioning of a table changes, a DDL that would take a partition column away refused by name
until the file says how the table is partitioned after it, and compacted per partition by the
maintenance job. Rows are read back with delta-rs's own query engine (``assert_lake_equals_leader``)
and the partitioning from the tables' logs (delta-rs)."""

from __future__ import annotations

import pytest
from deltalake import DeltaTable

from lake_helpers import assert_lake_equals_leader
from merge_helpers import _fetch
from mysql_cdc.kinds.delta import KIND
from mysql_cdc.kinds.delta.state.location import LakeLocation
from mysql_cdc.merge.errors import FollowerSchemaError
from mysql_cdc.merge.job import run_merge

# the first glob naming a table wins; a column is named in any case (MySQL's names ignore it)
PARTITION_BY = (("*.orders", ("region",)), ("*.events", ("KIND",)))


def _table(pipeline, table: str) -> DeltaTable:
    return DeltaTable(LakeLocation(pipeline.lake).table_uri(pipeline.database, table))


def _partitioning(pipeline, table: str) -> list[str]:
    return _table(pipeline, table).metadata().partition_columns


def _partition_values(pipeline, table: str, column: str) -> set:
    """The partition values of the table's live files (its log's add actions)."""
    import pyarrow as pa

    actions = pa.table(_table(pipeline, table).get_add_actions(flatten=True))
    return set(actions.column(f"partition.{column}").to_pylist())


def _leader_values(pipeline, table: str, column: str) -> set:
    query = f"SELECT DISTINCT `{column}` FROM `{pipeline.database}`.`{table}`"
    return {row[0] for row in _fetch(pipeline.leader, query)}


@pytest.mark.parametrize("driver_merge_bytes", [None, 0], ids=["small-tables-in-the-driver", "every-merge-by-spark"])
@pytest.mark.parametrize("features", ["standard", "portable"])
def test_partitioned_tables_follow_rows_that_move_between_partitions(lake_pipeline, spark, monkeypatch, features,
                                                                      driver_merge_bytes):
    from mysql_cdc.kinds.delta import sink as delta_sink

    if driver_merge_bytes is not None:
        monkeypatch.setattr(delta_sink, "DRIVER_MERGE_BYTES", driver_merge_bytes)
    pipeline = lake_pipeline(features=features, partition_by=PARTITION_BY)
    db = pipeline.database
    first = pipeline.capture([
        f"CREATE DATABASE {db}", f"USE {db}",
        "CREATE TABLE orders (id INT PRIMARY KEY, region VARCHAR(8), amount INT)",
        "CREATE TABLE events (kind VARCHAR(8), n INT)",  # keyless: a multiset
        "CREATE TABLE other (id INT PRIMARY KEY, v INT)",
        "INSERT INTO orders VALUES (1, 'eu', 10), (2, 'eu', 20), (3, 'us', 30), (4, NULL, 40)",
        "INSERT INTO events VALUES ('a', 1), ('a', 1), ('b', 2)",
        "INSERT INTO other VALUES (1, 1)",
    ])
    run_merge(spark, pipeline.manifest_uri(first), pipeline.secrets)
    assert [_partitioning(pipeline, t) for t in ("orders", "events", "other")] == [["region"], ["kind"], []]
    second = pipeline.capture([
        f"USE {db}",
        "UPDATE orders SET region = 'us' WHERE id = 1",  # to another partition
        "UPDATE orders SET id = 20, region = 'apac' WHERE id = 2",  # a key change into a new partition
        "UPDATE orders SET region = 'eu' WHERE id = 4",  # out of the NULL partition
        "DELETE FROM orders WHERE id = 3",
        "UPDATE events SET kind = 'c' WHERE kind = 'a' LIMIT 1",  # one of two equal rows moves
        "UPDATE other SET v = 2",
    ])
    run_merge(spark, pipeline.manifest_uri(second), pipeline.secrets)
    assert_lake_equals_leader(pipeline)
    if features == "portable":  # no deletion vectors: a partition's files hold only its live rows
        assert _partition_values(pipeline, "orders", "region") == _leader_values(pipeline, "orders", "region")
        assert _partition_values(pipeline, "events", "kind") == _leader_values(pipeline, "events", "kind")
    assert [_partitioning(pipeline, t) for t in ("orders", "events", "other")] == [["region"], ["kind"], []]


@pytest.mark.parametrize("features", ["standard", "portable"])
def test_a_ddl_that_takes_a_partition_column_away_waits_for_the_pipelines_file(lake_pipeline, spark, features):
    pipeline = lake_pipeline(features=features, partition_by=PARTITION_BY)
    db = pipeline.database
    first = pipeline.capture([f"CREATE DATABASE {db}", f"USE {db}",
                              "CREATE TABLE orders (id INT PRIMARY KEY, region VARCHAR(8), amount INT)",
                              "INSERT INTO orders VALUES (1, 'eu', 10), (2, 'us', 20)"])
    run_merge(spark, pipeline.manifest_uri(first), pipeline.secrets)

    renamed = pipeline.capture([f"ALTER TABLE {db}.orders RENAME COLUMN region TO area",
                                f"INSERT INTO {db}.orders VALUES (3, 'apac', 30)"])
    with pytest.raises(FollowerSchemaError) as refused:
        run_merge(spark, pipeline.manifest_uri(renamed), pipeline.secrets)
    assert f"the leader renamed {db}.orders.region to area" in str(refused.value)
    assert "name 'area' instead in partition_by" in str(refused.value)
    assert pipeline.checkpoint().position == first.end and _partitioning(pipeline, "orders") == ["region"]
    # the user names the new column; the retry renames it, and the table stays partitioned by it
    pipeline = type(pipeline).of(pipeline, pipeline.lake, features=features, partition_by=(("*.orders", ("area",)),))
    run_merge(spark, pipeline.manifest_uri(renamed), pipeline.secrets)
    assert_lake_equals_leader(pipeline)
    assert _partitioning(pipeline, "orders") == ["area"]

    dropped = pipeline.capture([f"ALTER TABLE {db}.orders DROP COLUMN area",
                                f"INSERT INTO {db}.orders VALUES (4, 40)"])
    with pytest.raises(FollowerSchemaError) as refused:
        run_merge(spark, pipeline.manifest_uri(dropped), pipeline.secrets)
    assert f"the leader dropped {db}.orders.area" in str(refused.value) and "remove it in partition_by" in str(
        refused.value)
    assert pipeline.checkpoint().position == renamed.end
    pipeline = type(pipeline).of(pipeline, pipeline.lake, features=features)  # no partitioning any more
    run_merge(spark, pipeline.manifest_uri(dropped), pipeline.secrets)
    assert_lake_equals_leader(pipeline)
    assert _partitioning(pipeline, "orders") == []


def test_a_changed_partitioning_rewrites_the_table_in_one_commit(lake_pipeline, spark):
    pipeline = lake_pipeline()
    db = pipeline.database
    first = pipeline.capture([f"CREATE DATABASE {db}", f"USE {db}",
                              "CREATE TABLE orders (id INT PRIMARY KEY, region VARCHAR(8), amount INT)",
                              "CREATE TABLE other (id INT PRIMARY KEY)",
                              "INSERT INTO orders VALUES (1, 'eu', 10), (2, 'us', 20)", "INSERT INTO other VALUES (1)"])
    run_merge(spark, pipeline.manifest_uri(first), pipeline.secrets)
    assert _partitioning(pipeline, "orders") == []
    before = _table(pipeline, "orders").version()

    pipeline = type(pipeline).of(pipeline, pipeline.lake, partition_by=(("*.*", ("region",)), ("*.other", ("id",))))
    second = pipeline.capture([f"UPDATE {db}.orders SET amount = amount + 1 WHERE id = 1",
                               f"ALTER TABLE {db}.orders ADD COLUMN note VARCHAR(10)",
                               f"INSERT INTO {db}.orders VALUES (3, 'apac', 30, 'new')"])
    run_merge(spark, pipeline.manifest_uri(second), pipeline.secrets)
    assert_lake_equals_leader(pipeline)
    assert _partitioning(pipeline, "orders") == ["region"]
    assert _partitioning(pipeline, "other") == []  # no change reached it: rewritten when one does
    operations = [h["operation"] for h in reversed(_table(pipeline, "orders").history()) if h["version"] > before]
    # the rewrite is one commit of the rows (after the properties of a new shape: timestampNtz
    # supported, the change feed off; then the feed on again), before the first segment's MERGE;
    # then the DDL's ADD COLUMNS and the last segment's MERGE
    assert operations == ["SET TBLPROPERTIES"] * 2 + ["WRITE", "SET TBLPROPERTIES", "MERGE", "ADD COLUMNS", "MERGE"], \
        operations


def test_a_partition_column_the_table_lacks_is_named_before_the_table_is_written(lake_pipeline, spark):
    pipeline = lake_pipeline(partition_by=(("*.orders", ("regoin",)),))
    db = pipeline.database
    first = pipeline.capture([f"CREATE DATABASE {db}", f"USE {db}",
                              "CREATE TABLE orders (id INT PRIMARY KEY, region VARCHAR(8))",
                              "INSERT INTO orders VALUES (1, 'eu')"])
    started = pipeline.checkpoint().position
    with pytest.raises(FollowerSchemaError) as refused:
        run_merge(spark, pipeline.manifest_uri(first), pipeline.secrets)
    assert f"{db}.orders: partition_by names the column(s) regoin, which the table does not have" in str(refused.value)
    assert "(its columns: id, region)" in str(refused.value)
    # the CREATE DATABASE before it is applied; the CREATE TABLE is not, nor anything after it
    assert started < pipeline.checkpoint().position < first.end
    assert not DeltaTable.is_deltatable(LakeLocation(pipeline.lake).table_uri(db, "orders"))
    fixed = type(pipeline).of(pipeline, pipeline.lake, partition_by=(("*.orders", ("region",)),))
    run_merge(spark, fixed.manifest_uri(first), fixed.secrets)
    assert_lake_equals_leader(fixed)
    assert _partitioning(fixed, "orders") == ["region"]


def test_maintenance_compacts_each_partition_and_keeps_the_partitioning(lake_pipeline, spark):
    pipeline = lake_pipeline(features="portable", partition_by=PARTITION_BY)
    db = pipeline.database
    schema = pipeline.capture([f"CREATE DATABASE {db}",
                               f"CREATE TABLE {db}.orders (id INT PRIMARY KEY, region VARCHAR(8), amount INT)"])
    run_merge(spark, pipeline.manifest_uri(schema), pipeline.secrets)
    for n in range(4):
        batch = pipeline.capture([f"INSERT INTO {db}.orders VALUES ({2 * n}, 'eu', {n}), ({2 * n + 1}, 'us', {n})"])
        run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets)
    assert len(_table(pipeline, "orders").file_uris()) > 2

    summary = {t.table: t for t in KIND.maintain(spark, pipeline.secrets.sink.settings, pipeline.name, 1)}
    assert summary[f"{db}.orders"].files_after == 2  # one file for each partition
    assert _partitioning(pipeline, "orders") == ["region"]
    assert _partition_values(pipeline, "orders", "region") == {"eu", "us"}
    assert_lake_equals_leader(pipeline)


def test_a_copy_into_a_partitioned_lake_and_its_resnapshot_keep_the_partitioning(lake_pipeline, spark):
    pipeline = lake_pipeline(partition_by=PARTITION_BY)
    db = pipeline.database
    pipeline.leader.run_sql([f"CREATE DATABASE {db}", f"USE {db}",
                             "CREATE TABLE orders (id INT PRIMARY KEY, region VARCHAR(8), amount INT)",
                             "CREATE TABLE events (kind VARCHAR(8), n INT)",
                             "INSERT INTO orders VALUES (1, 'eu', 10), (2, 'us', 20), (3, NULL, 30)",
                             "INSERT INTO events VALUES ('a', 1), ('a', 1), ('b', 2)"])
    copy = pipeline.snapshot()
    run_merge(spark, pipeline.manifest_uri(copy), pipeline.secrets)
    assert_lake_equals_leader(pipeline)
    assert [_partitioning(pipeline, t) for t in ("orders", "events")] == [["region"], ["kind"]]
    pipeline.leader.run_sql([f"UPDATE {db}.orders SET region = 'apac' WHERE id = 1"])
    again = pipeline.snapshot(only=[f"{db}.orders"])  # a resnapshot: the copy replaces the table in one commit
    run_merge(spark, pipeline.manifest_uri(again), pipeline.secrets)
    assert_lake_equals_leader(pipeline)
    leader = _leader_values(pipeline, "orders", "region")
    assert _partition_values(pipeline, "orders", "region") == leader == {"apac", "us", None}
    assert _partitioning(pipeline, "orders") == ["region"]


@pytest.mark.parametrize("driver_rows", [None, 0], ids=["netted-in-the-driver", "netted-by-spark"])
def test_an_empty_string_in_a_partition_column_is_refused_by_name_and_nothing_is_lost(lake_pipeline, spark,
                                                                                    driver_rows):
    """Delta writes an empty partition value as NULL: the row would not be the leader's."""
    merge_args = {} if driver_rows is None else {"driver_rows": driver_rows}
    pipeline = lake_pipeline(partition_by=(("*.tags", ("tag",)),))
    db = pipeline.database
    first = pipeline.capture([f"CREATE DATABASE {db}", f"USE {db}", "CREATE TABLE tags (id INT PRIMARY KEY, tag VARCHAR(8))",
                              "INSERT INTO tags VALUES (1, 'a')"])
    run_merge(spark, pipeline.manifest_uri(first), pipeline.secrets)
    second = pipeline.capture([f"USE {db}", "INSERT INTO tags VALUES (2, '')", "UPDATE tags SET tag = 'b' WHERE id = 1"])
    with pytest.raises(FollowerSchemaError) as refused:
        run_merge(spark, pipeline.manifest_uri(second), pipeline.secrets, **merge_args)
    assert f"{db}.tags: a row has '' in tag, which the follower's partition_by partitions the table by" in str(refused.value)
    assert pipeline.checkpoint().position == first.end
    assert _partition_values(pipeline, "tags", "tag") == {"a"}
    # the fix the error names: another partition column, then the same batch again
    fixed = type(pipeline).of(pipeline, pipeline.lake, partition_by=(("*.tags", ("id",)),))
    run_merge(spark, fixed.manifest_uri(second), fixed.secrets)
    assert_lake_equals_leader(fixed)
    assert _partitioning(fixed, "tags") == ["id"]


@pytest.mark.parametrize(("column", "lake_type"), [("VARBINARY(4)", "BINARY"), ("DECIMAL(8,2)", "DECIMAL")])
def test_a_partition_column_whose_values_would_not_read_back_is_refused_before_anything_is_written(
        lake_pipeline, spark, column, lake_type):
    """BINARY values come back escaped from delta-rs; delta-rs writes -3.50 as '-3.-50' and fails."""
    pipeline = lake_pipeline(partition_by=(("*.odd", ("v",)),))
    db = pipeline.database
    batch = pipeline.capture([f"CREATE DATABASE {db}", f"USE {db}", f"CREATE TABLE odd (id INT PRIMARY KEY, v {column})",
                              "INSERT INTO odd VALUES (1, NULL)"])
    with pytest.raises(FollowerSchemaError, match=rf"{db}\.odd: partition_by names v, a {lake_type} column in the lake"):
        run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets)
    assert not DeltaTable.is_deltatable(LakeLocation(pipeline.lake).table_uri(db, "odd"))
