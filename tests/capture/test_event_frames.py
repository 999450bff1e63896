"""The compiled event framer (``native/src/event_frames.rs``) against the library's framing.

First the framer alone, on dump packets built here byte by byte: cut anywhere, long events over
several packets, the end of the dump, and every way a packet can be wrong. Then real servers
(MariaDB and MySQL, plain and with compressed binlogs): one range of every kind of event a
pipeline meets, extracted with the compiled decoder twice, framed by the compiled framer and by
mysql-replication (the reference). The manifests must be byte for byte the same and every table's
changes the same Arrow table; a spy proves the compiled framer handled the rows itself.
"""

from __future__ import annotations

import struct

import pyarrow as pa
import pyarrow.parquet as pq
import pymysql
import pytest

from mysql_cdc.capture.stream import extract
from mysql_cdc.capture.stream.binlog_capture import BinlogCapture
from mysql_cdc.capture.stream.binlog_stream import BinlogReader
from mysql_cdc.capture.stream.extract import BatchTarget, RangeRequest, extract_range
from mysql_cdc.capture.filters import TableFilter
from mysql_cdc.contracts import PositionRange, RowSegment
from mysql_cdc.merge.reader import parquet_files
from mysql_cdc.mysql_server import MySQLSettings
from mysql_cdc.native_core import require
from mysql_cdc.pipeline_options import ExtractOptions
from mysql_cdc.storage import open_store

from .conftest import leader_position

native = require("the compiled core", "run `make native`")
MAX_PAYLOAD = 0xFFFFFF


def event(code: int, log_pos: int, body: bytes, timestamp: int = 1_700_000_000) -> bytes:
    """A binlog event as the server sends it: the common header, then the body."""
    size = 19 + len(body)
    return struct.pack("<IBIIIH", timestamp, code, 7, size, log_pos, 0) + body


def packets(payload: bytes, seq: int) -> tuple[bytes, int]:
    """``payload`` as protocol packets from sequence number ``seq`` (a payload of 0xFFFFFF bytes
    continues in the next packet, and one of exactly that size ends with an empty packet)."""
    out = b""
    while True:
        piece, payload = payload[:MAX_PAYLOAD], payload[MAX_PAYLOAD:]
        out += len(piece).to_bytes(3, "little") + bytes([seq % 256]) + piece
        seq += 1
        if len(piece) < MAX_PAYLOAD:
            return out, seq


def dump(events: list[bytes], seq: int = 1, end: bytes = b"\xfe\x00\x00\x02\x00") -> bytes:
    """A dump's bytes: each event behind its OK marker, then the end packet."""
    out = b""
    for e in events:
        data, seq = packets(b"\x00" + e, seq)
        out += data
    return out + packets(end, seq)[0]


EVENTS = [event(0x10, 200, b"\x01" * 8), event(0x17, 300, b"r" * 81), event(0xA2, 320, b"g" * 13)]


def expected(events: list[bytes]) -> list[tuple]:
    return [(e[4], struct.unpack_from("<I", e)[0], struct.unpack_from("<I", e, 13)[0], len(e), e) for e in events]


def test_the_framer_gives_every_event_with_its_header_fields_wherever_the_bytes_are_cut():
    data = dump(EVENTS)
    for cut in range(len(data) + 1):
        frames = native.EventFrames(1)
        got = frames.feed(data[:cut]) + frames.feed(data[cut:])
        assert got == expected(EVENTS), cut
        assert frames.done and frames.error is None
        assert frames.seq == 5  # three events and the end packet from 1
    one_byte_at_a_time = native.EventFrames(1)
    assert [f for i in range(len(data)) for f in one_byte_at_a_time.feed(data[i:i + 1])] == expected(EVENTS)


def test_an_event_over_several_packets_is_one_event():
    long = [event(0x17, 40_000_000, b"x" * (MAX_PAYLOAD + 100)), event(0x10, 40_000_100, b"\x02" * 8)]
    exact = [event(0x17, MAX_PAYLOAD + 9, b"y" * (MAX_PAYLOAD - 20))]  # OK marker + event = 0xFFFFFF bytes
    for events in (long, exact):
        frames = native.EventFrames(0)
        data = dump(events, seq=0)
        got = [f for at in range(0, len(data), 1 << 20) for f in frames.feed(data[at:at + (1 << 20)])]
        assert got == expected(events) and frames.done


def test_the_dump_ends_with_an_error_packet_kept_whole():
    error = b"\xff\x8f\x07#HY000Connection was killed"
    frames = native.EventFrames(1)
    assert frames.feed(dump(EVENTS[:1], end=error)) == expected(EVENTS[:1])
    assert frames.done and frames.error == error
    with pytest.raises(pymysql.err.OperationalError) as raised:
        pymysql.err.raise_mysql_exception(frames.error)
    assert raised.value.args[0] == 1935


@pytest.mark.parametrize("data, message", [
    (dump(EVENTS, seq=2), "packet sequence number 2 where 1 was due"),
    (packets(b"\x00" + EVENTS[0][:-1], 1)[0], "says it is 27 bytes, its packet holds 26"),
    (packets(b"\x00" + b"\x01" * 10, 1)[0], "an event of 10 bytes, shorter than its header"),
    (packets(b"\x07abc", 1)[0], "a packet starting with 0x07 where a binlog event was due"),
    (dump(EVENTS) + b"\x00", "1 bytes after the end of the dump"),
])
def test_a_wrong_packet_is_an_error_naming_what_is_wrong(data, message):
    with pytest.raises(native.DecodeError) as raised:
        native.EventFrames(1).feed(data)
    assert raised.value.args[0] == "protocol" and message in raised.value.args[2]


# -- real servers ---------------------------------------------------------------------------------

def _workload(db: str) -> list[str]:
    return [
        f"CREATE DATABASE {db}",
        f"CREATE TABLE {db}.keyed (id INT PRIMARY KEY, note VARCHAR(40), amount DECIMAL(10,2))",
        f"CREATE TABLE {db}.keyless (v INT, w VARCHAR(10))",
        f"CREATE TABLE {db}.skipped (id INT PRIMARY KEY)",
        # latin1 text has no compiled plan: the reference decoder reads this table's rows
        f"CREATE TABLE {db}.latin (id INT PRIMARY KEY, t VARCHAR(20) CHARACTER SET latin1)",
        *[f"INSERT INTO {db}.keyed VALUES ({i}, 'one row {i}', {i}.25)" for i in range(30)],  # one-row transactions
        "BEGIN",
        f"INSERT INTO {db}.keyed VALUES (100, 'in a transaction', 1), (101, 'and another', 2)",
        f"INSERT INTO {db}.keyless VALUES (1, 'a'), (1, 'a'), (2, 'b')",
        f"INSERT INTO {db}.skipped VALUES (1)",
        f"INSERT INTO {db}.latin VALUES (1, 'café')",
        "COMMIT",
        "FLUSH BINARY LOGS",  # a rotate, and a new file's format description: table ids read again
        f"UPDATE {db}.keyed SET note = 'changed', amount = amount + 1 WHERE id < 10",
        f"ALTER TABLE {db}.keyed ADD COLUMN tag VARCHAR(8) DEFAULT 'x'",
        f"DELETE FROM {db}.keyless WHERE v = 1 LIMIT 1",
        f"INSERT INTO {db}.keyed VALUES (200, 'after the alter', 3, 'y')",
        f"UPDATE {db}.latin SET t = 'naïve' WHERE id = 1",
        f"TRUNCATE TABLE {db}.keyless",
        f"INSERT INTO {db}.keyless VALUES (3, 'c')",
    ]


@pytest.fixture
def framed(monkeypatch):
    """Events each framing's capture read itself: (the framing's name, type code) per event."""
    calls = []
    real = BinlogCapture.handle_frame

    def spy(self, code, *args):
        handled = real(self, code, *args)
        calls.append((code, handled))
        return handled

    monkeypatch.setattr(BinlogCapture, "handle_frame", spy)
    return calls


def _extract(settings, range_, tmp_path, framing: str, monkeypatch, db: str):
    # the compiled decoder both times; only who frames the events differs
    monkeypatch.setitem(extract.FRAMING_OF, "native", framing)
    store = open_store(f"file://{tmp_path}/{framing}")
    batch = extract_range(settings, RangeRequest("p", range_, TableFilter(exclude=(f"{db}.skipped",))),
                          BatchTarget(store), ExtractOptions(workers=1, decoder="native"))
    tables = []
    for segment in batch.segments:
        if isinstance(segment, RowSegment):
            for changes in segment.tables:
                parts = [pq.read_table(pa.BufferReader(f)) for f in parquet_files(store, batch.prefix, changes)]
                tables.append((changes.table, pa.concat_tables(parts)))
    return batch, tables


@pytest.mark.parametrize("server", ["mariadb", "mysql", "mariadb_compressed", "mysql_compressed"])
def test_the_compiled_framer_and_the_library_give_the_same_batch(server, request, tmp_path, unique_name, framed,
                                                                  monkeypatch):
    if server in ("mariadb", "mysql"):
        prefix = "" if server == "mariadb" else "mysql_"
        leader = request.getfixturevalue(prefix + "leader")
        settings = MySQLSettings(**request.getfixturevalue(prefix + "leader_user"))
    else:
        leader = request.getfixturevalue(server)
        settings = MySQLSettings(**leader.conn_params())
    start = leader_position(settings)
    leader.run_sql(_workload(unique_name))
    range_ = PositionRange(start, leader_position(settings))

    reference, reference_tables = _extract(settings, range_, tmp_path, "library", monkeypatch, unique_name)
    assert framed == []
    compiled, compiled_tables = _extract(settings, range_, tmp_path, "native", monkeypatch, unique_name)

    assert compiled.to_json() == reference.to_json()
    assert [t for t, _ in compiled_tables] == [t for t, _ in reference_tables]
    assert {"keyed", "keyless", "latin"} <= {t for t, _ in reference_tables}
    for (table, actual), (_, wanted) in zip(compiled_tables, reference_tables):
        assert actual.equals(wanted), table
    handled = {code for code, done in framed if done}
    if server.endswith("compressed"):
        # compressed events went to the library (which inflates them), so the range held some
        assert {code for code, done in framed if not done} & {0x28, *range(0xA5, 0xAC)}
    if server != "mysql_compressed":  # (MySQL compresses whole transactions: nothing is left outside)
        assert handled & {0x17, 0x18, 0x19, 0x1E, 0x1F, 0x20}, "no rows event was read through the compiled framer"
        assert 0x10 in handled  # XID
        assert (0x21 if server.startswith("mysql") else 0xA2) in handled  # the flavour's GTID event


def _framed_events(settings, start, end, kill_after: int | None = None) -> list[tuple]:
    """(file, type, end position, size) of every framed event from ``start`` to ``end``, the made-up
    events of each connection left out; the dump's connection killed after ``kill_after`` of them."""
    killer = settings.connect()
    events, file = [], None
    try:
        with BinlogReader(settings, start, framing="native") as reader:
            for item in reader:
                if type(item) is not tuple:  # the library's event: the first of each connection
                    file = getattr(item, "next_binlog", file)
                    continue
                if item[2] == 0:  # a made-up format description follows each connection's rotate
                    continue
                events.append((file, item[0], item[2], item[3]))
                if len(events) == kill_after:
                    with killer.cursor() as cur:
                        cur.execute(f"KILL CONNECTION {reader.stream._stream_connection.thread_id()}")
                if (file, item[2]) == (end.file, end.offset):
                    break
    finally:
        killer.close()
    return events


def test_a_dump_connection_killed_midway_is_read_again_from_the_last_event(leader, leader_user, unique_name, caplog):
    """The leader drops the dump while events are on their way (its connection killed): the reader
    reconnects from the last event it read, as mysql-replication's own reading does, and the
    range's events arrive as they do without the kill: each once, in order, none skipped."""
    settings = MySQLSettings(**leader_user)
    leader.run_sql([f"CREATE DATABASE {unique_name}"])
    start = leader_position(settings)
    leader.run_sql(["CREATE TABLE t (id INT PRIMARY KEY, pad TEXT)",
                    "INSERT INTO t SELECT seq, REPEAT('x', 100) FROM seq_1_to_300000"], database=unique_name)
    end = leader_position(settings)
    caplog.set_level("WARNING", logger="mysql_cdc.capture.stream.binlog_stream")

    whole = _framed_events(settings, start, end)
    killed = _framed_events(settings, start, end, kill_after=3)  # 33 MB of binlog still to come

    assert any("the leader's binlog dump was lost after" in r.getMessage() for r in caplog.records)
    assert len(whole) > 100 and whole[-1][2] == end.offset
    assert killed == whole
