"""A lake follower's history modes, for each lake kind: tables that keep the rows the leader deleted
(``soft_deletes``) and tables that keep every version of each row (``history``, SCD type 2), through the real merge job on real servers, read at the consistent cut with a reader that is
not the product's (delta-rs's query engine, pyiceberg): deletes, a key moved, a key inserted again,
a TRUNCATE, a copy that finds a row gone, a crash between two tables' commits and its retry,
verification of the live rows; netted on the driver (delta-rs's merge and append for Delta) and by
Spark (Spark's MERGE and append for Delta)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pyarrow as pa
import pytest

from iceberg_helpers import iceberg_submit
from lake_helpers import lake_submit
from merge_helpers import job_output
from mysql_cdc.capture.filters import TableFilter
from mysql_cdc.kinds.delta.state.location import LakeLocation
from mysql_cdc.kinds.delta.verify import checksum_sides as delta_checksums
from mysql_cdc.kinds.iceberg.verify import checksum_sides as iceberg_checksums
from mysql_cdc.merge.job import run_merge
from mysql_cdc.merge.netting import DRIVER_NET_ROWS
from mysql_cdc.merge import history as h
from mysql_cdc.merge.soft_deletes import DELETED, DELETED_AT, DELETED_TXN
from mysql_cdc.monitor.verify import verify_pipeline
from mysql_cdc.pipeline_options import VerifyOptions


def _delta_table(pipeline, table: str, at_cut: bool = True) -> pa.Table:
    from deltalake import DeltaTable, QueryBuilder

    delta = (pipeline.cut().tables[f"{pipeline.database}.{table}"] if at_cut else
             DeltaTable(LakeLocation(pipeline.lake).table_uri(pipeline.database, table),
                        storage_options=LakeLocation(pipeline.lake).storage_options()))
    return pa.table(QueryBuilder().register("t", delta).execute("SELECT * FROM t").read_all())


def _iceberg_table(pipeline, table: str, at_cut: bool = True) -> pa.Table:
    loaded = pipeline.catalog.open().load_table((pipeline.database, table))
    return loaded.scan(snapshot_id=pipeline.cut()[f"{pipeline.database}.{table}"] if at_cut else None).to_arrow()


@dataclass(frozen=True)
class Lake:
    fixture: str
    read: Callable  # (pipeline, table, at_cut) -> its rows, read with a reader that is not the product's
    submit: Callable  # (pipeline, batch, work_dir, env) -> the merge job's CompletedProcess
    sides: Callable  # (pipeline, soft_deletes globs, history globs) -> the kind's checksum sides


LAKES = {
    "delta": Lake("lake_pipeline", _delta_table, lake_submit,
                  lambda p, soft, kept: delta_checksums(LakeLocation(p.lake), soft, kept)),
    "iceberg": Lake("iceberg_pipeline", _iceberg_table, iceberg_submit,
                    lambda p, soft, kept: iceberg_checksums(p.catalog, soft, kept)),
}


@pytest.fixture(params=sorted(LAKES))
def lake(request) -> Lake:
    return LAKES[request.param]


@pytest.fixture
def make(lake, request):
    return request.getfixturevalue(lake.fixture)


def _rows(pipeline, table: str, lake: Lake) -> dict[int, dict]:
    """The table's rows at the cut by id."""
    arrow = lake.read(pipeline, table)
    rows = {r["id"]: r for r in arrow.to_pylist()}
    assert len(rows) == arrow.num_rows, "a key is in the table once"
    return rows


def _leader(pipeline, *statements: str) -> list[tuple]:
    """The last statement's rows, run after the others on one connection of the leader (committed)."""
    conn = pipeline.leader.connect()
    try:
        with conn.cursor() as cur:
            for sql in statements:
                cur.execute(sql)
            rows = list(cur.fetchall())
        conn.commit()
        return rows
    finally:
        conn.close()


def _orders_and_other(db: str, orders: str) -> list[str]:
    """The scenarios' first batch: ``orders`` (the mode's table) with these rows, ``other`` (a plain table)."""
    return [f"CREATE DATABASE {db}", f"USE {db}", "CREATE TABLE orders (id INT PRIMARY KEY, item VARCHAR(16), qty INT)",
            "CREATE TABLE other (id INT PRIMARY KEY)", f"INSERT INTO orders VALUES {orders}",
            "INSERT INTO other VALUES (1), (2)"]


def _outside_the_binlog(pipeline, statements: list[str]) -> None:
    """Change the leader without writing the binlog (the drift a resnapshot repairs)."""
    _leader(pipeline, "SET sql_log_bin = 0", *statements)


def _live(rows: dict[int, dict]) -> dict[int, tuple]:
    return {k: (r["item"], r["qty"]) for k, r in rows.items() if not r[DELETED]}


def _leader_orders(pipeline) -> dict[int, tuple]:
    return {r[0]: (r[1], r[2]) for r in _leader(pipeline, f"SELECT id, item, qty FROM {pipeline.database}.orders")}


def _verify(pipeline, lake: Lake, soft_deletes: tuple[str, ...] | None = None, history: tuple[str, ...] | None = None):
    sides = lake.sides(pipeline, pipeline.soft_deletes if soft_deletes is None else soft_deletes,
                       pipeline.history if history is None else history)
    return verify_pipeline(pipeline.name, pipeline.leader_settings, sides, pipeline.state,
                           TableFilter((f"{pipeline.database}.*",)), VerifyOptions(chunk_rows=2), log=lambda _: None)


@pytest.mark.parametrize("driver_rows", [DRIVER_NET_ROWS, 0], ids=["netted on the driver", "netted by Spark"])
def test_deleted_rows_stay_marked_through_deletes_truncate_copies_and_a_crash(lake, make, spark, tmp_path,
                                                                               driver_rows):
    pipeline = make(soft_deletes=("*.orders",))
    db = pipeline.database
    first = pipeline.capture(_orders_and_other(db, "(1, 'a', 1), (2, 'b', 2), (3, 'c', 3), (4, 'd', 4)"))
    run_merge(spark, pipeline.manifest_uri(first), pipeline.secrets, driver_rows)
    assert {k: r[DELETED] for k, r in _rows(pipeline, "orders", lake).items()} == {1: False, 2: False, 3: False, 4: False}

    (before,), = _leader(pipeline, "SELECT UTC_TIMESTAMP()")
    second = pipeline.capture([f"USE {db}", "DELETE FROM orders WHERE id = 1",
                               "BEGIN", "DELETE FROM orders WHERE id = 2", "UPDATE orders SET id = 30 WHERE id = 3",
                               "COMMIT", "UPDATE orders SET qty = 9 WHERE id = 4", "DELETE FROM other WHERE id = 1"])
    (after,), = _leader(pipeline, "SELECT UTC_TIMESTAMP()")
    # killed between the two tables' commits, then retried: each table's rows once
    crashed = lake.submit(pipeline, second, tmp_path / "crash", {"MYSQL_CDC_CRASH_AT": "between_tables"})
    assert crashed.returncode != 0 and "MYSQL_CDC_CRASH_AT=between_tables" in job_output(crashed)
    run_merge(spark, pipeline.manifest_uri(second), pipeline.secrets, driver_rows)
    rows = _rows(pipeline, "orders", lake)
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
    other = lake.read(pipeline, "other")
    assert other.column_names == ["id"] and other.column("id").to_pylist() == [2]
    verified = _verify(pipeline, lake)
    assert (verified.status, verified.rows, verified.drifted) == ("ok", 3, []), verified
    # (its deleted rows are what verification leaves out: counted as the leader's, they are drift)
    assert _verify(pipeline, lake, soft_deletes=()).drifted
    # replayed (a binlog range run again): nothing changes
    assert run_merge(spark, pipeline.manifest_uri(second), pipeline.secrets, driver_rows).noop
    assert _rows(pipeline, "orders", lake) == rows

    third = pipeline.capture([f"USE {db}", "INSERT INTO orders VALUES (1, 'back', 10)"])
    run_merge(spark, pipeline.manifest_uri(third), pipeline.secrets, driver_rows)
    rows = _rows(pipeline, "orders", lake)
    assert (rows[1]["item"], rows[1][DELETED], rows[1][DELETED_AT], rows[1][DELETED_TXN]) == ("back", False, None, None)

    fourth = pipeline.capture([f"USE {db}", "TRUNCATE TABLE orders", "INSERT INTO orders VALUES (7, 'new', 7)"])
    run_merge(spark, pipeline.manifest_uri(fourth), pipeline.secrets, driver_rows)
    rows = _rows(pipeline, "orders", lake)
    assert _live(rows) == _leader_orders(pipeline) == {7: ("new", 7)}
    truncated = {rows[k][DELETED_TXN] for k in (1, 4, 30)}
    assert len(truncated) == 1 and None not in truncated, "the TRUNCATE marks every row it removed, by its position"
    assert all(rows[k][DELETED_AT] is None for k in (1, 4, 30))
    assert (rows[2][DELETED_TXN], rows[3][DELETED_TXN]) == (gone[2][DELETED_TXN], gone[3][DELETED_TXN]), \
        "rows deleted before keep their marks"

    # a row removed outside the binlog: the repair's copy marks it deleted by the copy's position
    _outside_the_binlog(pipeline, [f"DELETE FROM {db}.orders WHERE id = 7",
                                   f"INSERT INTO {db}.orders VALUES (8, 'copied', 8)"])
    copy = pipeline.snapshot(only=[f"{db}.orders"])
    run_merge(spark, pipeline.manifest_uri(copy), pipeline.secrets)
    rows = _rows(pipeline, "orders", lake)
    assert _live(rows) == _leader_orders(pipeline) == {8: ("copied", 8)}
    (copied,) = [s for s in copy.segments if s.kind == "snapshot"]
    assert (rows[7][DELETED], rows[7]["item"], rows[7][DELETED_AT], rows[7][DELETED_TXN]) == (
        True, "new", None, str(copied.at))
    assert {k for k, r in rows.items() if r[DELETED]} == {1, 2, 3, 4, 7, 30}
    assert rows[2][DELETED_TXN] == gone[2][DELETED_TXN]
    assert _verify(pipeline, lake).status == "ok"


def test_a_keyless_table_named_by_soft_deletes_stops_the_merge_naming_it(make, spark):
    pipeline = make(soft_deletes=("*.*",))
    db = pipeline.database
    batch = pipeline.capture([f"CREATE DATABASE {db}", f"USE {db}", "CREATE TABLE log (a INT)",
                              "INSERT INTO log VALUES (1)"])
    with pytest.raises(Exception, match=rf"{db}.log has no primary key, and soft_deletes names it"):
        run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets)
    assert pipeline.checkpoint().position != batch.end


def test_a_table_made_before_soft_deletes_named_it_gets_the_marks_with_its_next_change(lake, make, spark):
    pipeline = make()
    db = pipeline.database
    first = pipeline.capture([f"CREATE DATABASE {db}", f"USE {db}",
                              "CREATE TABLE orders (id INT PRIMARY KEY, item VARCHAR(16), qty INT)",
                              "INSERT INTO orders VALUES (1, 'a', 1), (2, 'b', 2)"])
    run_merge(spark, pipeline.manifest_uri(first), pipeline.secrets)
    assert DELETED not in lake.read(pipeline, "orders").column_names
    pipeline.soft_deletes = ("*.orders",)  # the pipelines file changed
    second = pipeline.capture([f"USE {db}", "TRUNCATE TABLE orders", "INSERT INTO orders VALUES (3, 'c', 3)"])
    run_merge(spark, pipeline.manifest_uri(second), pipeline.secrets)
    rows = _rows(pipeline, "orders", lake)
    assert {k: (r["item"], r[DELETED]) for k, r in rows.items()} == {1: ("a", True), 2: ("b", True), 3: ("c", False)}
    assert rows[1][DELETED_TXN] == rows[2][DELETED_TXN] is not None and rows[3][DELETED_TXN] is None
    assert _verify(pipeline, lake).status == "ok"


def _versions(pipeline, lake: Lake, table: str = "orders") -> list[tuple]:
    """The history table's versions at the cut: (id, item, qty, from seq, to seq, current), in order."""
    rows = lake.read(pipeline, table).to_pylist()
    return sorted(((r["id"], r["item"], r["qty"], r[h.VALID_FROM_SEQ], r[h.VALID_TO_SEQ], r[h.CURRENT])
                   for r in rows), key=lambda v: (v[0], v[3] is not None, v[3] or 0))


def _chained(versions: list[tuple]) -> None:
    """Each key's versions follow each other: one ends where the next begins, only the last may be current."""
    by_key: dict[int, list[tuple]] = {}
    for v in versions:
        by_key.setdefault(v[0], []).append(v)
    for key, chain in by_key.items():
        for earlier, later in zip(chain, chain[1:]):
            assert earlier[4] == later[3] and not earlier[5], (key, chain)


@pytest.mark.parametrize("driver_rows", [DRIVER_NET_ROWS, 0], ids=["netted on the driver", "netted by Spark"])
def test_every_version_of_a_row_is_kept_through_crashes_truncate_and_copies(lake, make, spark, tmp_path, driver_rows):
    pipeline = make(history=("*.orders",))
    db = pipeline.database
    first = pipeline.capture(_orders_and_other(db, "(1, 'a', 1), (2, 'b', 2), (3, 'c', 3)"))
    run_merge(spark, pipeline.manifest_uri(first), pipeline.secrets, driver_rows)
    created = _versions(pipeline, lake)
    assert [(v[0], v[1], v[4], v[5]) for v in created] == [(1, "a", None, True), (2, "b", None, True),
                                                          (3, "c", None, True)]
    assert all(r[h.VALID_FROM] is not None for r in lake.read(pipeline, "orders").to_pylist())

    second = pipeline.capture([f"USE {db}", "UPDATE orders SET qty = 10 WHERE id = 1",
                               "BEGIN", "UPDATE orders SET qty = 11 WHERE id = 1", "DELETE FROM orders WHERE id = 2",
                               "UPDATE orders SET id = 30 WHERE id = 3", "COMMIT",
                               "INSERT INTO orders VALUES (4, 'd', 4)", "DELETE FROM orders WHERE id = 4",
                               "DELETE FROM other WHERE id = 1"])
    # killed between the two tables' commits, then retried: every version once
    crashed = lake.submit(pipeline, second, tmp_path / "crash", {"MYSQL_CDC_CRASH_AT": "between_tables"})
    assert crashed.returncode != 0 and "MYSQL_CDC_CRASH_AT=between_tables" in job_output(crashed)
    run_merge(spark, pipeline.manifest_uri(second), pipeline.secrets, driver_rows)
    versions = _versions(pipeline, lake)
    assert [(v[0], v[1], v[2], v[5]) for v in versions] == [
        (1, "a", 1, False), (1, "a", 10, False), (1, "a", 11, True), (2, "b", 2, False), (3, "c", 3, False),
        (4, "d", 4, False), (30, "c", 3, True)]
    _chained(versions)
    assert versions[3][4] is not None and versions[4][4] == versions[6][3], "3's version ends where 30's begins"
    assert versions[5][4] is not None, "a row that lived between two runs is one closed version"
    assert {v[0]: (v[1], v[2]) for v in versions if v[5]} == {
        r[0]: (r[1], r[2]) for r in _leader(pipeline, f"SELECT id, item, qty FROM {db}.orders")}
    verified = _verify(pipeline, lake)
    assert (verified.status, verified.drifted) == ("ok", []), verified
    assert _verify(pipeline, lake, history=()).drifted, "the closed versions are what verification leaves out"
    # replayed (a binlog range run again): no version twice
    assert run_merge(spark, pipeline.manifest_uri(second), pipeline.secrets, driver_rows).noop
    assert _versions(pipeline, lake) == versions

    # a column added with a DEFAULT: the rows the leader holds get it (their current versions), the
    # closed versions never had it; the next change of a row is a version with its own value
    ddl = pipeline.capture([f"USE {db}", "ALTER TABLE orders ADD COLUMN note VARCHAR(8) DEFAULT 'd'",
                            "UPDATE orders SET note = 'x' WHERE id = 30"])
    run_merge(spark, pipeline.manifest_uri(ddl), pipeline.secrets, driver_rows)
    rows = lake.read(pipeline, "orders").to_pylist()
    assert sorted((r["note"], r[h.CURRENT]) for r in rows if r["id"] == 30) == [("d", False), ("x", True)]
    assert sorted((r["qty"], r["note"], r[h.CURRENT]) for r in rows if r["id"] == 1) == [
        (1, None, False), (10, None, False), (11, "d", True)]
    assert _verify(pipeline, lake).status == "ok"
    # the column dropped: the table keeps it, the versions their values of it; the next version has none
    drop = pipeline.capture([f"USE {db}", "ALTER TABLE orders DROP COLUMN note", "UPDATE orders SET qty = 4 WHERE id = 30"])
    run_merge(spark, pipeline.manifest_uri(drop), pipeline.secrets, driver_rows)
    notes = sorted(((r["qty"], r["note"], r[h.CURRENT]) for r in lake.read(pipeline, "orders").to_pylist()
                    if r["id"] == 30), key=lambda n: (n[2], n[1] or ""))
    assert notes == [(3, "d", False), (3, "x", False), (4, None, True)]
    assert _verify(pipeline, lake).status == "ok"
    current = {(v[0], v[3]) for v in _versions(pipeline, lake) if v[5]}
    assert {key for key, _ in current} == {1, 30}

    third = pipeline.capture([f"USE {db}", "TRUNCATE TABLE orders", "INSERT INTO orders (id, item, qty) VALUES (7, 'g', 7), (9, 'i', 9)"])
    run_merge(spark, pipeline.manifest_uri(third), pipeline.secrets, driver_rows)
    versions = _versions(pipeline, lake)
    truncated = [(v[4], v[5]) for v in versions if (v[0], v[3]) in current]
    assert len(truncated) == 2 and len(set(truncated)) == 1 and truncated[0][0] is not None and not truncated[0][1], \
        "the TRUNCATE closes every current version at its position"
    assert [(v[0], v[5]) for v in versions if v[5]] == [(7, True), (9, True)]
    _chained(versions)

    # rows changed outside the binlog: the repair's copy closes 7's version and opens the copy's; 9 is unchanged
    _outside_the_binlog(pipeline, [f"UPDATE {db}.orders SET qty = 70 WHERE id = 7",
                                   f"INSERT INTO {db}.orders (id, item, qty) VALUES (8, 'h', 8)"])
    copy = pipeline.snapshot(only=[f"{db}.orders"])
    run_merge(spark, pipeline.manifest_uri(copy), pipeline.secrets)
    (copied,) = [s for s in copy.segments if s.kind == "snapshot"]
    at = h.seq_number(copied.at.sequence, copied.at.offset)
    after = _versions(pipeline, lake)
    assert len(after) == len(versions) + 2, "a version for 7's new values and one for 8; none for 9"
    assert sorted(r["note"] for r in lake.read(pipeline, "orders").to_pylist() if r["note"] is not None) == [
        "d", "d", "x"], "the copy keeps the dropped column's values in the versions that had them"
    assert [(v[0], v[2], v[3] == at, v[4] == at, v[5]) for v in after if v[0] in (7, 8, 9)] == [
        (7, 7, False, True, False), (7, 70, True, False, True), (8, 8, True, False, True), (9, 9, False, False, True)]
    _chained(after)
    assert _verify(pipeline, lake).status == "ok"


def test_a_table_in_both_history_modes_is_refused_naming_it(make, spark):
    pipeline = make(soft_deletes=("*.orders",), history=("*.orders",))
    db = pipeline.database
    batch = pipeline.capture([f"CREATE DATABASE {db}", f"USE {db}", "CREATE TABLE orders (id INT PRIMARY KEY)",
                              "INSERT INTO orders VALUES (1)"])
    with pytest.raises(Exception, match=rf"{db}.orders is named by both soft_deletes and history"):
        run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets)


@pytest.mark.parametrize("mode", ["soft_deletes", "history"])
def test_a_copy_that_retypes_a_column_of_a_kept_table_stops_and_keeps_the_table(lake, make, spark, mode):
    """The leader changes a column's type in a way the lake cannot follow in place: the run's copy
    of the table would have to drop the rows the table keeps (deleted rows, earlier versions),
    whose values the new type cannot hold exactly. It stops, naming the table and the choices."""
    pipeline = make(**{mode: ("*.orders",)})
    db = pipeline.database
    first = pipeline.capture([f"CREATE DATABASE {db}", f"USE {db}",
                              "CREATE TABLE orders (id INT PRIMARY KEY, item VARCHAR(16), qty INT)",
                              "INSERT INTO orders VALUES (1, 'a', 1), (2, 'b', 2)", "UPDATE orders SET qty = 5 WHERE id = 1",
                              "DELETE FROM orders WHERE id = 2"])
    run_merge(spark, pipeline.manifest_uri(first), pipeline.secrets)
    before = lake.read(pipeline, "orders").to_pylist()
    pipeline.leader.run_sql([f"ALTER TABLE {db}.orders MODIFY qty VARCHAR(8)"])
    copy = pipeline.snapshot(only=[f"{db}.orders"])
    kept = "deleted rows" if mode == "soft_deletes" else "earlier versions"
    with pytest.raises(Exception, match=rf"(?i){db}.orders.qty changed type from INT\w* to \w*STRING on the leader, "
                                        rf"and {db}.orders keeps its {kept} \({mode}\).*resnapshot"):
        run_merge(spark, pipeline.manifest_uri(copy), pipeline.secrets)
    assert lake.read(pipeline, "orders").to_pylist() == before
