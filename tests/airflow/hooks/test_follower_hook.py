"""FollowerHook against the session's real followers (MariaDB and MySQL): the checkpoint row."""

from __future__ import annotations

import json

import pytest

from mysql_cdc.contracts import BinlogPosition, ChangeBatch, PositionRange, batch_id_for
from mysql_cdc.hooks import FollowerHook

P1 = BinlogPosition("binlog.000001", 4)
P2 = BinlogPosition("binlog.000001", 900)
P3 = BinlogPosition("binlog.000002", 4)


@pytest.fixture(params=["mariadb", "mysql"])
def hook(request, monkeypatch) -> FollowerHook:
    follower_user = request.getfixturevalue("follower_user" if request.param == "mariadb" else "mysql_follower_user")
    monkeypatch.setenv("AIRFLOW_CONN_CDC_TEST_FOLLOWER", json.dumps(
        {"conn_type": "mysql", "host": follower_user["host"], "port": follower_user["port"],
         "login": follower_user["user"], "password": follower_user["password"]}))
    return FollowerHook("cdc_test_follower")


def empty_batch(pipeline: str, start: BinlogPosition, end: BinlogPosition) -> ChangeBatch:
    return ChangeBatch(pipeline=pipeline, batch_id=batch_id_for(PositionRange(start, end)), start=start, end=end,
                       segments=())


def test_initialize_creates_once_and_never_moves_an_existing_checkpoint(hook, unique_name):
    assert hook.read_checkpoint(unique_name) is None
    created = hook.initialize_checkpoint(unique_name, P2)
    assert (created.pipeline, created.position) == (unique_name, P2)
    again = hook.initialize_checkpoint(unique_name, P1)
    assert again.position == P2
    assert hook.read_checkpoint(unique_name).position == P2


def test_advance_over_an_empty_batch_is_compare_and_set(hook, unique_name):
    hook.initialize_checkpoint(unique_name, P1)
    assert not hook.advance_over_empty_batch(empty_batch(unique_name, P2, P3))  # does not start at it
    assert hook.read_checkpoint(unique_name).position == P1
    batch = empty_batch(unique_name, P1, P2)
    assert hook.advance_over_empty_batch(batch)
    moved = hook.read_checkpoint(unique_name)
    assert (moved.position, moved.batch_id) == (P2, batch.batch_id)
    assert not hook.advance_over_empty_batch(batch)  # replayed: the checkpoint is past it now
    assert hook.read_checkpoint(unique_name).position == P2


def test_advance_refuses_an_unknown_pipeline(hook, unique_name):
    assert not hook.advance_over_empty_batch(empty_batch(unique_name, P1, P2))
    assert hook.read_checkpoint(unique_name) is None


def test_a_fresh_mysql_follower_has_no_checkpoint_until_the_first_run(monkeypatch, mysql_follower, mysql_follower_user,
                                                                       unique_name):
    """MySQL answers a query on a missing schema with 1049 (OperationalError in PyMySQL), MariaDB
    with 1146: both mean "no checkpoint yet", and the first run creates the schema."""
    mysql_follower.run_sql(["DROP DATABASE IF EXISTS _mysql_cdc"])
    monkeypatch.setenv("AIRFLOW_CONN_CDC_FRESH_MYSQL", json.dumps(
        {"conn_type": "mysql", "host": mysql_follower_user["host"], "port": mysql_follower_user["port"],
         "login": mysql_follower_user["user"], "password": mysql_follower_user["password"]}))
    hook = FollowerHook("cdc_fresh_mysql")
    assert hook.read_checkpoint(unique_name) is None
    assert hook.initialize_checkpoint(unique_name, P1).position == P1
    assert hook.read_checkpoint(unique_name).position == P1
