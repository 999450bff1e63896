"""The leader restarted, cleanly or by a crash (SIGKILL: no shutdown at all), as a managed database
is during maintenance or a failover test: in the middle of a binlog read, in the middle of a
snapshot copy, and between the two ends of a range. Each case ends with the follower equal to the
leader after the next successful run, nothing lost or doubled.

Each test has a leader of its own (a module's server, restarted by the tests), so the suite's
shared leader keeps running. Where a test needs the restart to happen at an exact step of a read,
it wraps the capture's event handler to restart the server after a given event (in the reading
thread, so the step is exact); the server, its restart and the reader's connection are real."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from local_services import MariaDBServer, MySQLServer
from merge_helpers import Pipeline, assert_same_database, leader_position
from mysql_cdc.capture.filters import TableFilter
from mysql_cdc.capture.snapshot.copy import snapshot_tables
from mysql_cdc.capture.stream.binlog_capture import BinlogCapture
from mysql_cdc.capture.stream.extract import BatchTarget, RangeRequest, extract_range
from mysql_cdc.contracts import PositionRange, RowSegment
from mysql_cdc.merge.job import run_merge
from mysql_cdc.merge.reader import parquet_files
from mysql_cdc.mysql_server import MySQLSettings
from mysql_cdc.pipeline_options import ExtractOptions, SnapshotOptions
from mysql_cdc.retry_policy import is_permanent
from mysql_cdc.storage import StorageSpec

FOLLOWERS = {"mariadb": ("follower", "follower_user"), "mysql": ("mysql_follower", "mysql_follower_user")}


@pytest.fixture(scope="module", params=["mariadb", "mysql"])
def restartable(request, tmp_path_factory):
    """A leader of the module's own, and a capture account on it."""
    server_class = MariaDBServer if request.param == "mariadb" else MySQLServer
    server = server_class(tmp_path_factory.mktemp("restartable"), f"restartable-{request.param}", server_id=31,
                          binlog=True, die_with_parent=True)
    server.start()
    user = server.create_user("cdc_reader", "reader-pw",
                              ["REPLICATION SLAVE, REPLICATION CLIENT, SELECT, RELOAD ON *.*"])
    yield request.param, server, MySQLSettings(**user)
    server.stop()


@pytest.fixture
def pipeline(restartable, request, tmp_path, unique_name) -> Pipeline:
    flavor, server, settings = restartable
    follower_name, user_name = FOLLOWERS[flavor]
    return Pipeline(name=f"pipe_{unique_name}", database=unique_name, leader=server,
                    follower=request.getfixturevalue(follower_name), leader_settings=settings,
                    follower_settings=MySQLSettings(**request.getfixturevalue(user_name)),
                    storage=StorageSpec(f"file://{tmp_path}/store"))


def rows_by_table(pipeline: Pipeline, batch) -> dict[str, list[tuple]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    found: dict[str, list[tuple]] = {}
    for segment in batch.segments:
        if isinstance(segment, RowSegment):
            for changes in segment.tables:
                for data in parquet_files(pipeline.store, batch.prefix, changes):
                    for row in pq.read_table(pa.BufferReader(data)).to_pylist():
                        values = tuple(v for k, v in row.items() if not k.startswith("_"))
                        found.setdefault(changes.table, []).append((row["_op"], *values))
    return found


@pytest.mark.parametrize("decoder", ["native", "python"])
@pytest.mark.parametrize("crash", [False, True], ids=["clean-restart", "crash"])
def test_a_range_across_a_restart_reads_each_table_with_its_own_map(pipeline, crash, decoder):
    """A server numbers its tables again from the start after a restart, so the range's second
    half reuses the first half's table ids for other tables (here `b` takes the id `a` had).
    Before the reader forgot table ids at each binlog file's start, the library kept `a`'s map
    for `b`'s rows: the compiled decoder refused them, and the Python one decoded `b`'s bytes with
    `a`'s columns (here it failed on the garbage; with columns of matching types it would not)."""
    db, leader = pipeline.database, pipeline.leader
    leader.run_sql([f"CREATE DATABASE {db}", f"CREATE TABLE {db}.a (id INT PRIMARY KEY, v VARCHAR(20))",
                    f"CREATE TABLE {db}.b (k VARCHAR(10) PRIMARY KEY, n BIGINT, d DOUBLE)"])
    leader.restart()  # so that `a` and `b` are the first of the test's tables the server opens
    start = leader_position(pipeline.leader_settings)
    leader.run_sql([f"INSERT INTO {db}.a VALUES (1, 'one')", f"INSERT INTO {db}.b VALUES ('x', 7, 1.5)"])
    leader.restart(crash=crash)
    leader.run_sql([f"INSERT INTO {db}.b VALUES ('y', 8, 2.5)", f"INSERT INTO {db}.a VALUES (2, 'two')",
                    f"UPDATE {db}.b SET n = 9 WHERE k = 'x'"])
    end = leader_position(pipeline.leader_settings)
    assert end.sequence > start.sequence  # the restart began a new binlog file

    request = RangeRequest(pipeline.name, PositionRange(start, end), TableFilter((f"{db}.*",)))
    batch = extract_range(pipeline.leader_settings, request, BatchTarget(pipeline.store), ExtractOptions(decoder=decoder))

    assert rows_by_table(pipeline, batch) == {
        "a": [("I", 1, "one"), ("I", 2, "two")],
        "b": [("I", "x", 7, 1.5), ("I", "y", 8, 2.5), ("U", "x", 9, 1.5)],
    }


def restart_after(monkeypatch, events: int, restart) -> threading.Event:
    """Run ``restart()`` once, in the reading thread, after the capture has handled ``events``
    events of a range (framed by the compiled framer or by the library); the returned event is set
    once it has run."""
    seen, done = [0], threading.Event()

    def counting(handle):
        def handled(self, *event):
            result = handle(self, *event)
            seen[0] += 1
            if seen[0] == events and not done.is_set():
                restart()
                done.set()
            return result
        return handled

    monkeypatch.setattr(BinlogCapture, "handle", counting(BinlogCapture.handle))
    monkeypatch.setattr(BinlogCapture, "handle_frame", counting(BinlogCapture.handle_frame))
    return done


def wide_rows(db: str, first: int, count: int) -> list[str]:
    """``count`` rows of about 200 bytes each, 500 to a transaction: enough binlog that the reader
    is mid-range, with most of the range still on the server, when the restart comes."""
    pad = "p" * 180
    return [f"INSERT INTO {db}.t VALUES " + ", ".join(f"({i}, '{pad}')" for i in range(lo, min(lo + 500, first + count)))
            for lo in range(first, first + count, 500)]


@pytest.mark.parametrize("decoder", ["native", "python"])
@pytest.mark.parametrize("crash", [False, True], ids=["clean-restart", "crash"])
def test_a_restart_in_the_middle_of_a_binlog_read(pipeline, spark, monkeypatch, caplog, crash, decoder):
    """Clean: the server is back before the reader notices; the reader reconnects on the lost
    connection and goes on from the last event it read, and the batch is whole (mysql-replication's
    own reading with the reference decoder, the compiled framer's with the compiled one). Crash:
    the reader notices while the server is down; the extract fails with a lost-connection error
    that the retry policy counts as transient (Airflow retries the task), and the next try reads
    the range from the checkpoint. Both: the merge makes the follower equal to the leader."""
    db, leader = pipeline.database, pipeline.leader
    pipeline.start()
    leader.run_sql([f"CREATE DATABASE {db}", f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(200))"])
    leader.run_sql(wide_rows(db, 0, 60_000) + [f"UPDATE {db}.t SET v = 'moved' WHERE id % 1000 = 0",
                                                f"DELETE FROM {db}.t WHERE id % 997 = 0"])
    end = leader_position(pipeline.leader_settings)
    caplog.set_level(logging.WARNING, logger="pymysqlreplication.binlogstream")
    caplog.set_level(logging.WARNING, logger="mysql_cdc.capture.stream.binlog_stream")
    if crash:
        # killed, and not back until the reader has failed
        restarted = restart_after(monkeypatch, 50, leader.kill)
        try:
            with pytest.raises(Exception) as lost:
                pipeline.extract(pipeline.position, end, ExtractOptions(workers=1, decoder=decoder))
        finally:
            leader.start_again()
        assert restarted.is_set()
        assert not is_permanent(lost.value), lost.value  # Airflow's retries of the task are the answer
        assert f"reading the leader's binlog from {pipeline.position} failed" in str(lost.value)
        assert "is unreachable (restarting?)" in str(lost.value)
        monkeypatch.undo()
        batch = pipeline.extract(pipeline.position, end, ExtractOptions(workers=1, decoder=decoder))
    else:
        restarted = restart_after(monkeypatch, 50, leader.restart)
        batch = pipeline.extract(pipeline.position, end, ExtractOptions(workers=1, decoder=decoder))
        assert restarted.is_set()
        reconnected = ("Re-request the connection" if decoder == "python"
                       else "the leader's binlog dump was lost after")
        assert any(reconnected in r.getMessage() for r in caplog.records)  # it did reconnect
    assert batch.end == end
    run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets)
    assert_same_database(leader, pipeline.follower, db)
    assert pipeline.follower.scalar(f"SELECT COUNT(*) FROM {db}.t") == 60_000 - 61


def test_a_crash_in_the_middle_of_a_snapshot_copy(pipeline, spark):
    """The leader killed while a copy's chunks are read: the copy fails (a transient error: Airflow
    retries the task), the chunks already recorded stay, and the next try copies the rest from
    read views of the restarted server. Its catch-up range then spans the restart, with rows
    changed after it; the follower ends equal to the leader."""
    db, leader = pipeline.database, pipeline.leader
    leader.run_sql([f"CREATE DATABASE {db}", f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(200))",
                    f"CREATE TABLE {db}.small (id INT PRIMARY KEY, v INT)", f"INSERT INTO {db}.small VALUES (1, 1)"])
    leader.run_sql(wide_rows(db, 0, 40_000))
    pipeline.start()
    options = SnapshotOptions(split_rows=1000, workers=1)
    store = pipeline.store

    def first_chunk_recorded() -> bool:
        return any(k.rsplit("/", 1)[-1].startswith("chunk-") and k.endswith(".json") for k in store.list_keys(""))

    def kill_after_first_chunk():
        deadline = time.monotonic() + 120
        while not first_chunk_recorded() and time.monotonic() < deadline:
            time.sleep(0.01)
        leader.kill()

    killer = threading.Thread(target=kill_after_first_chunk)
    killer.start()
    try:
        with pytest.raises(Exception) as lost:
            snapshot_tables(pipeline.leader_settings, pipeline.storage, pipeline.name, TableFilter((f"{db}.*",)),
                            options=options)
    finally:
        killer.join()
        leader.start_again()
    assert not is_permanent(lost.value), lost.value
    recorded = [k for k in store.list_keys("") if k.rsplit("/", 1)[-1].startswith("chunk-") and k.endswith(".json")]
    assert 1 <= len(recorded) < 40, recorded  # some chunks copied before the crash, not all

    leader.run_sql([f"UPDATE {db}.t SET v = 'after the restart' WHERE id % 100 = 0", f"DELETE FROM {db}.t WHERE id < 50",
                    f"INSERT INTO {db}.small VALUES (2, 2)"])
    copy = pipeline.snapshot(options=options)  # the next try: resumes the same copy
    assert set(recorded) <= set(store.list_keys(""))  # what was copied before the crash was kept
    run_merge(spark, pipeline.manifest_uri(copy), pipeline.secrets)
    stream = pipeline.capture([f"UPDATE {db}.small SET v = 3"])
    run_merge(spark, pipeline.manifest_uri(stream), pipeline.secrets)
    assert_same_database(leader, pipeline.follower, db)


def test_a_leader_down_when_a_read_starts_is_a_failure_the_retry_fixes(pipeline):
    """Refused while it restarts: not a preflight failure (a password, a grant, TLS: those fail at once),
    but one the task's retries ride out."""
    from mysql_cdc.capture.events import LeaderUnreachableError

    settings = pipeline.leader_settings
    pipeline.leader.kill()
    try:
        with pytest.raises(LeaderUnreachableError) as refused:
            leader_position(settings)
    finally:
        pipeline.leader.start_again()
    assert str(refused.value).startswith(f"cannot connect to the leader at {settings.host}:{settings.port}")
    assert not is_permanent(refused.value)
    assert leader_position(settings)  # back
