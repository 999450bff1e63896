"""An Iceberg follower's tables that keep the rows the leader deleted (``soft_deletes``), through the
real merge job on real servers, read with pyiceberg at the consistent cut (not the product's reader):
deletes, a key moved, a key inserted again, a TRUNCATE, a copy that finds a row gone, a crash
between two tables' commits and its retry, and verification of the live rows."""

from __future__ import annotations

import pytest

from iceberg_helpers import iceberg_submit
from merge_helpers import job_output
from mysql_cdc.capture.filters import TableFilter
from mysql_cdc.kinds.iceberg.verify import checksum_sides
from mysql_cdc.merge.job import run_merge
from mysql_cdc.merge.netting import DRIVER_NET_ROWS
from mysql_cdc.merge.soft_deletes import DELETED, DELETED_AT, DELETED_TXN
from mysql_cdc.monitor.verify import verify_pipeline
from mysql_cdc.pipeline_options import VerifyOptions


def _rows(pipeline, table: str) -> dict[int, dict]:
    """The table's rows at the cut by id, read with pyiceberg."""
    snapshot = pipeline.cut()[f"{pipeline.database}.{table}"]
    arrow = pipeline.catalog.open().load_table((pipeline.database, table)).scan(snapshot_id=snapshot).to_arrow()
    rows = {r["id"]: r for r in arrow.to_pylist()}
    assert len(rows) == arrow.num_rows, "a key is in the table once"
    return rows


def _leader(pipeline, sql: str) -> list[tuple]:
    conn = pipeline.leader.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            return list(cur.fetchall())
    finally:
        conn.close()


def _live(rows: dict[int, dict]) -> dict[int, tuple]:
    return {k: (r["item"], r["qty"]) for k, r in rows.items() if not r[DELETED]}


def _leader_orders(pipeline) -> dict[int, tuple]:
    return {r[0]: (r[1], r[2]) for r in _leader(pipeline, f"SELECT id, item, qty FROM {pipeline.database}.orders")}


def _verify(pipeline, soft_deletes: tuple[str, ...] | None = None):
    sides = checksum_sides(pipeline.catalog, pipeline.soft_deletes if soft_deletes is None else soft_deletes)
    return verify_pipeline(pipeline.name, pipeline.leader_settings, sides, pipeline.state,
                           TableFilter((f"{pipeline.database}.*",)), VerifyOptions(chunk_rows=2), log=lambda _: None)


@pytest.mark.parametrize("driver_rows", [DRIVER_NET_ROWS, 0], ids=["netted on the driver", "netted by Spark"])
def test_deleted_rows_stay_marked_through_deletes_truncate_copies_and_a_crash(iceberg_pipeline, spark, tmp_path,
                                                                               driver_rows):
    pipeline = iceberg_pipeline(soft_deletes=("*.orders",))
    db = pipeline.database
    first = pipeline.capture([f"CREATE DATABASE {db}", f"USE {db}",
                              "CREATE TABLE orders (id INT PRIMARY KEY, item VARCHAR(16), qty INT)",
                              "CREATE TABLE other (id INT PRIMARY KEY)",
                              "INSERT INTO orders VALUES (1, 'a', 1), (2, 'b', 2), (3, 'c', 3), (4, 'd', 4)",
                              "INSERT INTO other VALUES (1), (2)"])
    run_merge(spark, pipeline.manifest_uri(first), pipeline.secrets)
    assert {k: r[DELETED] for k, r in _rows(pipeline, "orders").items()} == {1: False, 2: False, 3: False, 4: False}

    (before,), = _leader(pipeline, "SELECT UTC_TIMESTAMP()")
    second = pipeline.capture([f"USE {db}", "DELETE FROM orders WHERE id = 1",
                               "BEGIN", "DELETE FROM orders WHERE id = 2", "UPDATE orders SET id = 30 WHERE id = 3",
                               "COMMIT", "UPDATE orders SET qty = 9 WHERE id = 4", "DELETE FROM other WHERE id = 1"])
    (after,), = _leader(pipeline, "SELECT UTC_TIMESTAMP()")
    # killed between the two tables' commits, then retried: each table's rows once
    crashed = iceberg_submit(pipeline, second, tmp_path / "crash", {"MYSQL_CDC_CRASH_AT": "between_tables"})
    assert crashed.returncode != 0 and "MYSQL_CDC_CRASH_AT=between_tables" in job_output(crashed)
    run_merge(spark, pipeline.manifest_uri(second), pipeline.secrets, driver_rows)
    rows = _rows(pipeline, "orders")
    assert _live(rows) == _leader_orders(pipeline) == {4: ("d", 9), 30: ("c", 3)}
    gone = {k: r for k, r in rows.items() if r[DELETED]}
    assert {k: (r["item"], r["qty"]) for k, r in gone.items()} == {1: ("a", 1), 2: ("b", 2), 3: ("c", 3)}
    for r in gone.values():
        assert before.replace(microsecond=0) <= r[DELETED_AT].replace(tzinfo=None) <= after, r
        assert r[DELETED_TXN].count(":") == 1
    # 2's delete and 3's move were one transaction; 1's delete another
    assert gone[2][DELETED_TXN] == gone[3][DELETED_TXN] != gone[1][DELETED_TXN]
    assert all(r[DELETED_AT] is None and r[DELETED_TXN] is None for r in rows.values() if not r[DELETED])
    # a table soft_deletes does not name deletes as always
    other = pipeline.catalog.open().load_table((db, "other")).scan().to_arrow()
    assert other.column_names == ["id"] and other.column("id").to_pylist() == [2]
    verified = _verify(pipeline)
    assert (verified.status, verified.rows, verified.drifted) == ("ok", 3, []), verified
    # (its deleted rows are what verification leaves out: counted as the leader's, they are drift)
    assert _verify(pipeline, soft_deletes=()).drifted

    third = pipeline.capture([f"USE {db}", "INSERT INTO orders VALUES (1, 'back', 10)"])
    run_merge(spark, pipeline.manifest_uri(third), pipeline.secrets)
    rows = _rows(pipeline, "orders")
    assert (rows[1]["item"], rows[1][DELETED], rows[1][DELETED_AT], rows[1][DELETED_TXN]) == ("back", False, None, None)

    fourth = pipeline.capture([f"USE {db}", "TRUNCATE TABLE orders", "INSERT INTO orders VALUES (7, 'new', 7)"])
    run_merge(spark, pipeline.manifest_uri(fourth), pipeline.secrets)
    rows = _rows(pipeline, "orders")
    assert _live(rows) == _leader_orders(pipeline) == {7: ("new", 7)}
    truncated = {rows[k][DELETED_TXN] for k in (1, 4, 30)}
    assert len(truncated) == 1 and None not in truncated, "the TRUNCATE marks every row it removed, by its position"
    assert all(rows[k][DELETED_AT] is None for k in (1, 4, 30))
    assert (rows[2][DELETED_TXN], rows[3][DELETED_TXN]) == (gone[2][DELETED_TXN], gone[3][DELETED_TXN]), \
        "rows deleted before keep their marks"

    # a row removed outside the binlog: the repair's copy marks it deleted by the copy's position
    conn = pipeline.leader.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SET sql_log_bin = 0")
            cur.execute(f"DELETE FROM {db}.orders WHERE id = 7")
            cur.execute(f"INSERT INTO {db}.orders VALUES (8, 'copied', 8)")
        conn.commit()
    finally:
        conn.close()
    copy = pipeline.snapshot(only=[f"{db}.orders"])
    run_merge(spark, pipeline.manifest_uri(copy), pipeline.secrets)
    rows = _rows(pipeline, "orders")
    assert _live(rows) == _leader_orders(pipeline) == {8: ("copied", 8)}
    (copied,) = [s for s in copy.segments if s.kind == "snapshot"]
    assert (rows[7][DELETED], rows[7]["item"], rows[7][DELETED_AT], rows[7][DELETED_TXN]) == (
        True, "new", None, str(copied.at))
    assert {k for k, r in rows.items() if r[DELETED]} == {1, 2, 3, 4, 7, 30}
    assert rows[2][DELETED_TXN] == gone[2][DELETED_TXN]
    assert _verify(pipeline).status == "ok"


def test_a_keyless_table_named_by_soft_deletes_stops_the_merge_naming_it(iceberg_pipeline, spark):
    pipeline = iceberg_pipeline(soft_deletes=("*.*",))
    db = pipeline.database
    batch = pipeline.capture([f"CREATE DATABASE {db}", f"USE {db}", "CREATE TABLE log (a INT)",
                              "INSERT INTO log VALUES (1)"])
    with pytest.raises(Exception, match=rf"{db}.log has no primary key, and soft_deletes names it"):
        run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets)
    assert pipeline.checkpoint().position != batch.end


def test_a_table_made_before_soft_deletes_named_it_gets_the_marks_with_its_next_change(iceberg_pipeline, spark):
    pipeline = iceberg_pipeline()
    db = pipeline.database
    first = pipeline.capture([f"CREATE DATABASE {db}", f"USE {db}",
                              "CREATE TABLE orders (id INT PRIMARY KEY, item VARCHAR(16), qty INT)",
                              "INSERT INTO orders VALUES (1, 'a', 1), (2, 'b', 2)"])
    run_merge(spark, pipeline.manifest_uri(first), pipeline.secrets)
    assert DELETED not in pipeline.catalog.open().load_table((db, "orders")).schema().column_names
    pipeline.soft_deletes = ("*.orders",)  # the pipelines file changed
    second = pipeline.capture([f"USE {db}", "TRUNCATE TABLE orders", "INSERT INTO orders VALUES (3, 'c', 3)"])
    run_merge(spark, pipeline.manifest_uri(second), pipeline.secrets)
    rows = _rows(pipeline, "orders")
    assert {k: (r["item"], r[DELETED]) for k, r in rows.items()} == {1: ("a", True), 2: ("b", True), 3: ("c", False)}
    assert rows[1][DELETED_TXN] == rows[2][DELETED_TXN] is not None and rows[3][DELETED_TXN] is None
    assert _verify(pipeline).status == "ok"
