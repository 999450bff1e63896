"""Compressed binlogs are captured exactly, and an event the capture does not know stops it.

Real servers: a MariaDB leader with ``log_bin_compress=ON`` and a MySQL leader with
``binlog_transaction_compression=ON`` (both with thresholds low enough that every event of the
workload is compressed), and the session's MySQL leader for partial JSON. Each test first proves
that the binlog really holds the event kind it is about (read with mysql-replication directly), so
none can pass because the server quietly wrote something else.
"""

from __future__ import annotations

import datetime as dt
import io
import json
from decimal import Decimal

import pyarrow.parquet as pq
import pytest
from pymysqlreplication import BinLogStreamReader

from mysql_cdc.capture.stream.binlog_capture import BinlogCapture, StopReading
from mysql_cdc.capture.stream.binlog_stream import BinlogReader
from mysql_cdc.capture.change_batch import ChangeBatchWriter
from mysql_cdc.capture.stream import extract
from mysql_cdc.capture.stream.extract import BatchTarget, RangeRequest, extract_range
from mysql_cdc.capture.events import UnknownEventError
from mysql_cdc.capture.filters import TableFilter
from mysql_cdc.capture.leader import Leader, PreflightError
from mysql_cdc.capture.snapshot.copy import snapshot_tables
from mysql_cdc.contracts import DONE, TablePosition, TablePositions
from mysql_cdc.contracts import DdlSegment, PositionRange, RowSegment
from mysql_cdc.mysql_server import MySQLSettings
from mysql_cdc.storage import StorageSpec, open_store

from .conftest import Captured, leader_position

WORKLOAD = [
    "CREATE DATABASE shop",
    "CREATE TABLE shop.orders (id INT PRIMARY KEY, note VARCHAR(300), amount DECIMAL(10,2), at DATETIME(6))",
    "INSERT INTO shop.orders VALUES (1, REPEAT('a', 200), 1.50, '2026-01-02 03:04:05.000006'), "
    "(2, 'two', NULL, NULL), (3, 'three', 3.00, '2026-03-03 00:00:00')",
    "UPDATE shop.orders SET note = 'one', amount = 9.99 WHERE id = 1",
    "DELETE FROM shop.orders WHERE id = 2",
    "ALTER TABLE shop.orders ADD COLUMN tag VARCHAR(20) DEFAULT 'x'",
    "BEGIN", "INSERT INTO shop.orders VALUES (4, 'four', 4.00, NULL, 'y')",
    "UPDATE shop.orders SET tag = 'z' WHERE id = 3", "COMMIT",
]

# (op, id, note) of every change row of the workload, in binlog order, and the columns' last image
EXPECTED_BEFORE_ALTER = [("I", 1), ("I", 2), ("I", 3), ("U", 1), ("D", 2)]
EXPECTED_AFTER_ALTER = [("I", 4), ("U", 3)]
GTID_TAGGED = 0x2A


def event_types(server, start) -> list[int]:
    """The type code of every event from ``start``, as the server sent it."""
    stream = BinLogStreamReader(connection_settings=server.conn_params(), server_id=4242, log_file=start.file,
                                log_pos=start.offset, resume_stream=True, blocking=False, only_events=None,
                                filter_non_implemented_events=False)
    try:
        return [e.packet.event_type for e in stream]
    finally:
        stream.close()


def run_and_capture(server, tmp_path) -> tuple[Captured, list[int]]:
    settings = MySQLSettings(**server.conn_params())
    start = leader_position(settings)
    server.run_sql(WORKLOAD)
    end = leader_position(settings)
    store = open_store(f"file://{tmp_path}/store")
    batch = extract_range(settings, RangeRequest("p", PositionRange(start, end)), BatchTarget(store))
    return Captured(batch, store), event_types(server, start)


def assert_workload_captured(captured: Captured) -> None:
    segments = captured.batch.segments
    kinds = [type(s).__name__ for s in segments]
    assert kinds == ["DdlSegment", "DdlSegment", "RowSegment", "DdlSegment", "RowSegment"], kinds
    first, alter, second = segments[2], segments[3], segments[4]
    assert isinstance(alter, DdlSegment) and alter.statement.startswith("ALTER TABLE shop.orders ADD COLUMN tag")
    rows = captured.rows(first, "orders")
    assert [(r["_op"], r["id"]) for r in rows] == EXPECTED_BEFORE_ALTER
    assert rows[0]["note"] == "a" * 200 and rows[0]["at"] == dt.datetime(2026, 1, 2, 3, 4, 5, 6)
    assert (rows[3]["note"], rows[3]["amount"], rows[3]["_before"]["note"]) == ("one", Decimal("9.99"), "a" * 200)
    later = captured.rows(second, "orders")
    assert [(r["_op"], r["id"]) for r in later] == EXPECTED_AFTER_ALTER
    assert (later[1]["tag"], later[1]["_before"]["tag"]) == ("z", "x")
    assert isinstance(first, RowSegment) and first.row_count == 5 and captured.batch.row_count == 7
    # the total order of change rows holds inside one (compressed) transaction too
    order = [(r["_binlog_seq"], r["_binlog_pos"], r["_row_index"]) for r in later]
    assert order == sorted(order) and len(set(order)) == len(order)


def test_mariadb_compressed_query_and_rows_events_are_captured_exactly(mariadb_compressed, tmp_path):
    captured, types = run_and_capture(mariadb_compressed, tmp_path)
    assert {0xA5, 0xA6, 0xA7} <= set(types), f"the binlog holds no compressed events: {types}"
    assert_workload_captured(captured)


def test_mysql_transaction_payload_events_are_captured_exactly(mysql_compressed, tmp_path):
    captured, types = run_and_capture(mysql_compressed, tmp_path)
    assert types.count(0x28) >= 3, f"the binlog holds no transaction payload events: {types}"
    assert_workload_captured(captured)
    assert captured.batch.end_gtid, "GTIDs are on: the batch records the last one"


class _KnowsNoCompression(BinlogCapture):
    """A capture that has never heard of compressed events: they must stop it, never vanish."""

    _RAW_HANDLERS = {}


def test_an_event_type_the_capture_does_not_know_stops_it_naming_type_and_position(mariadb_compressed, tmp_path):
    settings = MySQLSettings(**mariadb_compressed.conn_params())
    start = leader_position(settings)
    mariadb_compressed.run_sql(["CREATE DATABASE unknown_events", "CREATE TABLE unknown_events.t (id INT)"])
    end = leader_position(settings)
    store = open_store(f"file://{tmp_path}/store")
    range_ = PositionRange(start, end)
    with pytest.raises(UnknownEventError) as error:
        with ChangeBatchWriter(store, "p", range_) as writer, BinlogReader(settings, start) as reader:
            builder = _KnowsNoCompression(writer, TableFilter())
            try:
                for event in reader:
                    builder.handle(event)
                    if builder.done():
                        break
            except StopReading:
                pass
    message = str(error.value)
    assert message.startswith(f"binlog event QUERY_COMPRESSED_EVENT (type 165) at {start.file}:")
    assert "Reading past it could lose changes" in message and "upgrade mysql-cdc" in message
    assert store.list_keys("p/") == [], "a refused range leaves no batch behind"


def test_partial_json_updates_are_refused_in_preflight_and_in_the_binlog(mysql_leader, tmp_path, unique_name):
    settings = MySQLSettings(**mysql_leader.conn_params())
    mysql_leader.run_sql(["SET GLOBAL binlog_row_value_options = 'PARTIAL_JSON'"])
    try:
        with pytest.raises(PreflightError, match="binlog_row_value_options is PARTIAL_JSON"):
            Leader(settings).check_settings()
    finally:
        mysql_leader.run_sql(["SET GLOBAL binlog_row_value_options = ''"])
    # one session that sets it anyway: its partial updates stop the extract with the cause and the fix
    start = leader_position(settings)
    db = unique_name
    mysql_leader.run_sql([f"CREATE DATABASE {db}", f"CREATE TABLE {db}.docs (id INT PRIMARY KEY, doc JSON)",
                          f"INSERT INTO {db}.docs VALUES (1, '{{\"a\": 1, \"b\": \"{'x' * 100}\"}}')",
                          "SET SESSION binlog_row_value_options = 'PARTIAL_JSON'",
                          "SET SESSION binlog_row_image = 'MINIMAL'",
                          f"UPDATE {db}.docs SET doc = JSON_SET(doc, '$.a', 2) WHERE id = 1"])
    end = leader_position(settings)
    assert 0x27 in event_types(mysql_leader, start), "the server wrote no partial update"
    with pytest.raises(UnknownEventError, match=r"PARTIAL_UPDATE_ROWS_EVENT \(type 39\) at .*binlog_row_value_options"
                                                r"=PARTIAL_JSON.*resnapshot"):
        extract_range(settings, RangeRequest("p", PositionRange(start, end)),
                      BatchTarget(open_store(f"file://{tmp_path}/store")))
    # the fix it names, followed word for word: a copy of the table, after which the range extracts
    store = open_store(f"file://{tmp_path}/store")
    copy = snapshot_tables(settings, StorageSpec(f"file://{tmp_path}/store"), "p", TableFilter((f"{db}.*",)),
                           only=[f"{db}.docs"])
    positions = TablePositions({(db, "docs"): TablePosition(db, "docs", copy.segments[0].at, copy.batch_id, DONE)})
    batch = extract_range(settings, RangeRequest("p", PositionRange(start, end), positions=positions),
                          BatchTarget(store))
    assert [s for s in batch.segments if isinstance(s, RowSegment)] == []  # the copy holds the document
    (docs,) = copy.segments
    rows = pq.read_table(io.BytesIO(store.get_bytes(f"{copy.prefix}/{docs.files[0]}"))).to_pylist()
    assert json.loads(rows[0]["doc"])["a"] == 2


def test_tagged_gtids_are_recorded_exactly(mysql_leader, tmp_path, unique_name):
    """MySQL 8.3+ tagged GTIDs (uuid:tag:N) reach the change rows and the batch's end GTID, as
    the server itself counts them (gtid_executed), untagged ones beside them."""
    settings = MySQLSettings(**mysql_leader.conn_params())
    db = unique_name
    mysql_leader.run_sql([f"CREATE DATABASE {db}", f"CREATE TABLE {db}.t (id INT PRIMARY KEY)"])
    start = leader_position(settings)
    conn = mysql_leader.connect()
    try:
        with conn.cursor() as cur:
            for i, tag in enumerate(["orders", "", "billing", "orders"], start=1):
                cur.execute(f"SET gtid_next = 'AUTOMATIC{':' + tag if tag else ''}'")
                cur.execute(f"INSERT INTO {db}.t VALUES ({i})")
            cur.execute("SET gtid_next = 'AUTOMATIC'")
            cur.execute("SELECT @@server_uuid, @@gtid_executed")
            server_uuid, executed = cur.fetchone()
    finally:
        conn.close()
    end = leader_position(settings)
    assert GTID_TAGGED in event_types(mysql_leader, start), "the server wrote no tagged GTID event"
    store = open_store(f"file://{tmp_path}/store")
    batch = extract_range(settings, RangeRequest("p", PositionRange(start, end), TableFilter((f"{db}.*",))),
                          BatchTarget(store))
    (segment,) = batch.segments
    gtids = [r["_gtid"] for r in Captured(batch, store).rows(segment, "t")]
    tagged = {tag: int(executed.replace("\n", "").split(f":{tag}:")[1].split(":")[0].split("-")[-1].split(",")[0])
              for tag in ("orders", "billing")}
    assert gtids[0] == f"{server_uuid}:orders:{tagged['orders'] - 1}"
    assert gtids[1].startswith(f"{server_uuid}:") and gtids[1].count(":") == 1
    assert gtids[2] == f"{server_uuid}:billing:{tagged['billing']}"
    assert gtids[3] == f"{server_uuid}:orders:{tagged['orders']}"
    assert batch.end_gtid == gtids[3]


@pytest.mark.parametrize("framing", ["native", "library"])
def test_a_range_across_a_binlog_file_that_starts_after_tagged_gtids_is_captured(mysql_leader, tmp_path,
                                                                                  unique_name, framing, monkeypatch):
    """A new binlog file starts with a Previous_gtids event: every GTID executed before it, the
    tagged ones (uuid:tag:N) included, in a layout mysql-replication cannot read (its reading broke
    mid-event: "Result length not requested length"). A range that crosses into such a file is
    captured whole, by both framings (the library's is the reference path)."""
    monkeypatch.setitem(extract.FRAMING_OF, "native", framing)
    settings = MySQLSettings(**mysql_leader.conn_params())
    db = unique_name
    mysql_leader.run_sql([f"CREATE DATABASE {db}", f"CREATE TABLE {db}.t (id INT PRIMARY KEY)"])
    start = leader_position(settings)
    conn = mysql_leader.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SET gtid_next = 'AUTOMATIC:orders'")
            cur.execute(f"INSERT INTO {db}.t VALUES (1)")
            cur.execute("SET gtid_next = 'AUTOMATIC'")
            cur.execute("FLUSH BINARY LOGS")  # the next file's Previous_gtids holds the tagged GTID
            cur.execute(f"INSERT INTO {db}.t VALUES (2)")
    finally:
        conn.close()
    end = leader_position(settings)
    assert end.sequence > start.sequence, "the range does not cross into a new binlog file"
    store = open_store(f"file://{tmp_path}/store")
    batch = extract_range(settings, RangeRequest("p", PositionRange(start, end), TableFilter((f"{db}.*",))),
                          BatchTarget(store))
    ids = [r["id"] for s in batch.segments if isinstance(s, RowSegment) for r in Captured(batch, store).rows(s, "t")]
    assert ids == [1, 2]
