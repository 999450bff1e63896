"""LeaderHook against the session's real MariaDB leader."""

from __future__ import annotations

import json

import pytest

from mysql_cdc.capture.stream.extract import BatchTarget, RangeRequest
from mysql_cdc.capture.filters import TableFilter
from mysql_cdc.capture.leader import PreflightError
from mysql_cdc.contracts import BinlogPosition, PositionRange
from mysql_cdc.hooks import LeaderHook
from mysql_cdc.storage import StorageSpec


@pytest.fixture
def hook(monkeypatch, leader_user) -> LeaderHook:
    monkeypatch.setenv("AIRFLOW_CONN_CDC_TEST_LEADER", json.dumps(
        {"conn_type": "mysql", "host": leader_user["host"], "port": leader_user["port"],
         "login": leader_user["user"], "password": leader_user["password"]}))
    return LeaderHook("cdc_test_leader")


def test_positions_and_preflight(hook):
    hook.preflight()
    earliest, current = hook.earliest_position(), hook.current_position()
    assert earliest == BinlogPosition(earliest.file, 4)
    assert earliest <= current


def test_resolve_start(hook):
    current = hook.current_position()
    assert hook.resolve_start("current") == current
    assert hook.resolve_start("earliest") == hook.earliest_position()
    assert hook.resolve_start(str(current)) == current


def test_resolve_start_refuses_positions_the_leader_does_not_have(hook):
    current = hook.current_position()
    with pytest.raises(PreflightError, match="past the leader's current position"):
        hook.resolve_start(str(BinlogPosition(current.file, current.offset + 1_000_000)))
    with pytest.raises(PreflightError, match="no longer on the leader"):
        hook.resolve_start("binlog.000000:4")


def test_extract_writes_a_batch(hook, leader, unique_name, tmp_path):
    start = hook.current_position()
    conn = leader.connect()
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {unique_name}")
        cur.execute(f"CREATE TABLE {unique_name}.t (id INT PRIMARY KEY)")
        cur.execute(f"INSERT INTO {unique_name}.t VALUES (1), (2)")
    conn.close()
    end = hook.current_position()
    spec = StorageSpec(f"file://{tmp_path}")
    target = BatchTarget(spec.open(), spec)
    batch = hook.extract(RangeRequest("p", PositionRange(start, end), TableFilter((f"{unique_name}.*",))), target)
    assert (batch.start, batch.end, batch.row_count) == (start, end, 2)
    assert batch.leader_id == hook.leader_id() and batch.end_gtid_set == hook.gtid_set_at(end)
    assert hook.extract(RangeRequest("p", PositionRange(end, end)), target) is None
