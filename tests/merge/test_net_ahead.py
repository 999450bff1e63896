"""The next row segment's large tables netted on the driver while what comes before them is applied
(``merge.job._NetAhead``): which segment each item of a merge's plan nets ahead, and a real merge of
DDL between row segments into a MySQL follower where every large table is netted exactly once, ahead,
and the follower equals the leader."""

from __future__ import annotations

import threading
from collections import Counter

import pytest

from merge_helpers import assert_same_database
from mysql_cdc.contracts import BinlogPosition, DdlSegment, RowSegment
from mysql_cdc.merge import job, netting
from mysql_cdc.merge.joined import JoinedRows


def _position(n: int) -> BinlogPosition:
    return BinlogPosition("binlog.000001", n)


def _rows(index: int) -> RowSegment:
    return RowSegment(index, _position(index * 10), _position(index * 10 + 10), ())


def _ddl(index: int) -> DdlSegment:
    return DdlSegment(index, _position(index * 10), _position(index * 10 + 10), "db", "ALTER TABLE t ADD c INT",
                      "alter_table", ())


def test_each_item_nets_ahead_the_row_segment_that_follows_it_unless_it_stages_rows_itself():
    rows0, ddl1, rows2, ddl3 = _rows(0), _ddl(1), _rows(2), _ddl(3)
    joined = JoinedRows((_ddl(5),), _rows(4), 3)
    plan = [rows0, ddl1, rows2, ddl3, joined]
    # before the first item (while the sink starts): the first item's rows
    assert job._ahead_of(plan, -1) is rows0
    # a row segment stages its own rows with every core: nothing ahead while it does
    assert job._ahead_of(plan, 0) is None and job._ahead_of(plan, 2) is None
    # a DDL statement: the row segment after it
    assert job._ahead_of(plan, 1) is rows2
    assert job._ahead_of(plan, 3) is joined.rows
    # joined rows: their own, while the DDL they carry replays first
    assert job._ahead_of(plan, 4) is joined.rows
    # the last item, and a plan that starts with DDL
    assert job._ahead_of([ddl1], 0) is None and job._ahead_of([ddl1, rows2], -1) is None


def _no_spark():
    pytest.fail("the tables are merged on the driver: the job must not start Spark")


def test_tables_after_ddl_are_netted_once_ahead_and_the_follower_equals_the_leader(make_pipeline, monkeypatch):
    # every table of more than 5 change rows is a group of its own (those are netted ahead): the
    # tables here are that large without a real one's 50,000 rows
    monkeypatch.setattr(job, "DRIVER_GROUP_ROWS", 5)
    netted: list[tuple[str, str]] = []
    read_and_net = netting.read_and_net

    def recording(store, prefix, items):
        netted.extend((threading.current_thread().name, item[1].qualified_name) for item in items)
        return read_and_net(store, prefix, items)

    monkeypatch.setattr(netting, "read_and_net", recording)
    pipeline = make_pipeline()
    db, leader = pipeline.database, pipeline.leader
    rows = ", ".join(f"({i}, 'v{i}')" for i in range(1, 21))
    batch = pipeline.capture([
        f"CREATE DATABASE {db}", f"USE {db}",
        "CREATE TABLE orders (id INT PRIMARY KEY, note VARCHAR(20))",
        "CREATE TABLE tiny (id INT PRIMARY KEY)",
        f"INSERT INTO orders VALUES {rows}",  # netted while CREATE TABLE tiny replays
        "INSERT INTO tiny VALUES (1)",
        "ALTER TABLE tiny ADD COLUMN n INT",  # DDL on another table between row segments
        "BEGIN", "UPDATE orders SET note = CONCAT(note, '!') WHERE id <= 10", "DELETE FROM orders WHERE id > 15",
        "UPDATE orders SET id = id + 100 WHERE id = 1", "COMMIT",
        "ALTER TABLE orders ADD COLUMN at DATETIME(6)",  # DDL on the table itself
        f"INSERT INTO orders (id, note, at) VALUES {', '.join(f'({i}, NULL, NOW(6))' for i in range(30, 40))}",
    ])
    assert [s.kind for s in batch.segments].count("ddl") >= 4
    job.run_merge(_no_spark, pipeline.manifest_uri(batch), pipeline.secrets)
    assert_same_database(leader, pipeline.follower, db)

    large = [(thread, name) for thread, name in netted if name == f"{db}.orders"]
    row_segments_of_orders = sum(1 for s in batch.segments if s.kind == "rows"
                                 for t in s.tables if t.qualified_name == f"{db}.orders")
    assert len(large) == row_segments_of_orders, f"each of the table's row segments netted once: {large}"
    assert all(thread.startswith("mysql-cdc net-ahead") for thread, _ in large), large
    # a small table is netted with its group, when its segment is staged
    assert not any(thread.startswith("mysql-cdc net-ahead") for thread, name in netted if name == f"{db}.tiny")
    assert Counter(name for _, name in netted)[f"{db}.tiny"] >= 1
