"""Each preflight error, asserted by message, against real servers."""

import pytest

from mysql_cdc.capture.stream.extract import CaptureError, BatchTarget, RangeRequest, extract_range
from mysql_cdc.capture.leader import Leader, PreflightError
from mysql_cdc.contracts import BinlogPosition, InvalidPosition, PositionRange
from mysql_cdc.mysql_server import MySQLSettings
from mysql_cdc.storage import open_store

from .conftest import leader_position


@pytest.fixture
def store(tmp_path):
    return open_store(f"file://{tmp_path}/store")


def _extract(settings, store, start, end):
    return extract_range(settings, RangeRequest("p", PositionRange(start, end)), BatchTarget(store))


def test_binlog_disabled(follower_user, store):
    settings = MySQLSettings(**follower_user)  # the follower runs without --log-bin
    with pytest.raises(PreflightError, match=r"binary logging is disabled on the leader \(log_bin=OFF\)"):
        Leader(settings).check_settings()


@pytest.mark.parametrize(
    "variable, bad_value",
    [("binlog_format", "STATEMENT"), ("binlog_row_image", "MINIMAL"), ("binlog_row_metadata", "MINIMAL")],
)
def test_binlog_settings_must_be_row_full_full(leader, leader_settings, variable, bad_value):
    leader.run_sql([f"SET GLOBAL {variable} = '{bad_value}'"])
    try:
        with pytest.raises(PreflightError, match=rf"leader {variable} is {bad_value}, mysql-cdc needs (ROW|FULL)"):
            Leader(leader_settings).check_settings()
    finally:
        leader.run_sql([f"SET GLOBAL {variable} = '{'ROW' if variable == 'binlog_format' else 'FULL'}'"])


def test_missing_replication_privileges(leader, unique_name):
    params = leader.create_user(unique_name, "pw", ["SELECT ON *.*"])
    with pytest.raises(PreflightError, match=r"lacks REPLICATION SLAVE, REPLICATION CLIENT: run GRANT"):
        Leader(MySQLSettings(**params)).check_settings()
    params = leader.create_user(unique_name + "c", "pw", ["REPLICATION CLIENT ON *.*"])
    with pytest.raises(PreflightError, match=r"lacks REPLICATION SLAVE:"):
        Leader(MySQLSettings(**params)).check_settings()


def test_purged_start_names_earliest_position_and_recovery(leader, leader_settings, store, unique_name):
    old = leader_position(leader_settings)
    leader.run_sql([f"CREATE DATABASE {unique_name}", "FLUSH BINARY LOGS"])
    current = leader_position(leader_settings)
    leader.purge_binary_logs_to(current.file)
    with pytest.raises(PreflightError) as err:
        _extract(leader_settings, store, old, current)
    message = str(err.value)
    assert f"start position {old} is no longer on the leader" in message
    assert f"earliest available position is {current.file}:4" in message
    assert '{"resnapshot": ["*"]}' in message and "on_purged: snapshot" in message


def test_end_before_start_and_end_past_leader(leader_settings, store):
    now = leader_position(leader_settings)
    earlier = BinlogPosition(now.file, 4)
    with pytest.raises(InvalidPosition, match=rf"range end {earlier} is before its start {now}"):
        _extract(leader_settings, store, now, earlier)
    future = BinlogPosition(now.file, now.offset + 10_000)
    with pytest.raises(PreflightError, match=rf"end position {future} is past the leader's current position {now}"):
        _extract(leader_settings, store, now, future)


def test_positions_inside_a_transaction_are_refused(leader, leader_settings, store, unique_name):
    db = unique_name
    leader.run_sql([f"CREATE DATABASE {db}", f"CREATE TABLE {db}.t (id INT PRIMARY KEY)"])
    start = leader_position(leader_settings)
    leader.run_sql([f"INSERT INTO {db}.t VALUES (1), (2)"])
    end = leader_position(leader_settings)
    batch = _extract(leader_settings, store, start, end)
    inside = BinlogPosition(start.file, _rows_event_pos(store, batch))  # the rows event, mid-transaction
    with pytest.raises(CaptureError, match=rf"end position {inside} is not a transaction boundary"):
        _extract(leader_settings, store, start, inside)
    with pytest.raises(CaptureError, match=rf"start position {inside} is inside a transaction"):
        _extract(leader_settings, store, inside, end)


def _rows_event_pos(store, batch) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from mysql_cdc.merge.reader import parquet_files

    first = parquet_files(store, batch.prefix, batch.segments[0].tables[0])[0]
    return pq.read_table(pa.BufferReader(first)).column("_binlog_pos")[0].as_py()


def test_statement_format_dml_is_an_error_not_a_silent_skip(leader, leader_settings, store, unique_name):
    db = unique_name
    leader.run_sql([f"CREATE DATABASE {db}", f"CREATE TABLE {db}.t (id INT PRIMARY KEY)"])
    start = leader_position(leader_settings)
    leader.run_sql(["SET SESSION binlog_format = 'STATEMENT'", f"INSERT INTO {db}.t VALUES (1)"])
    with pytest.raises(CaptureError, match=r"statement-format DML at .* binlog_format=STATEMENT or MIXED"):
        _extract(leader_settings, store, start, leader_position(leader_settings))


def test_unparseable_table_ddl_is_an_error(unique_name):
    from mysql_cdc.capture.stream.ddl import UnparseableDdl, parse_statement

    with pytest.raises(UnparseableDdl, match=r"cannot parse the statement 'ALTER TABLE' .* must know which tables"):
        parse_statement("ALTER TABLE", unique_name)
