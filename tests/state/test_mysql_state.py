"""MySQLStateStore against the session's real followers (MariaDB and MySQL): the checkpoint row,
the pipeline state the Airflow side reads and writes (``tests/airflow/hooks/test_follower_hook.py``
shows the hook handing it out)."""

from __future__ import annotations

import pytest

from mysql_cdc.contracts import BinlogPosition, Checkpoint
from mysql_cdc.state import StateStore
from mysql_cdc.settings import MySQLSettings
from mysql_cdc.state.mysql import MySQLStateStore

P1 = BinlogPosition("binlog.000001", 4)
P2 = BinlogPosition("binlog.000001", 900)
P3 = BinlogPosition("binlog.000002", 4)


@pytest.fixture(params=["mariadb", "mysql"])
def state(request) -> StateStore:
    follower_user = request.getfixturevalue("follower_user" if request.param == "mariadb" else "mysql_follower_user")
    return MySQLStateStore(MySQLSettings(**follower_user))


def test_initialize_creates_once_and_never_moves_an_existing_checkpoint(state, unique_name):
    assert state.checkpoint(unique_name) is None
    created = state.initialize(Checkpoint(unique_name, P2))
    assert (created.pipeline, created.position) == (unique_name, P2)
    again = state.initialize(Checkpoint(unique_name, P1))
    assert again.position == P2
    assert state.checkpoint(unique_name).position == P2


def test_move_is_compare_and_set(state, unique_name):
    first = state.initialize(Checkpoint(unique_name, P1))
    elsewhere = Checkpoint(unique_name, P2)
    assert not state.move(elsewhere, Checkpoint(unique_name, P3))  # it is not where the caller thinks
    assert state.checkpoint(unique_name).position == P1
    assert state.move(first, Checkpoint(unique_name, P2, batch_id="b1"))
    moved = state.checkpoint(unique_name)
    assert (moved.position, moved.batch_id) == (P2, "b1")
    assert not state.move(first, Checkpoint(unique_name, P3))  # replayed: the checkpoint is past it now
    assert state.checkpoint(unique_name).position == P2


def test_move_refuses_an_unknown_pipeline(state, unique_name):
    assert not state.move(Checkpoint(unique_name, P1), Checkpoint(unique_name, P2))
    assert state.checkpoint(unique_name) is None


def test_a_fresh_mysql_follower_has_no_checkpoint_until_the_first_run(mysql_follower, mysql_follower_user, unique_name):
    """MySQL answers a query on a missing schema with 1049 (OperationalError in PyMySQL), MariaDB
    with 1146: both mean "no checkpoint yet", and the first run creates the schema."""
    mysql_follower.run_sql(["DROP DATABASE IF EXISTS _mysql_cdc"])
    state = MySQLStateStore(MySQLSettings(**mysql_follower_user))
    assert state.checkpoint(unique_name) is None
    assert state.history(unique_name) == [] and state.latest_verification(unique_name) is None
    assert state.initialize(Checkpoint(unique_name, P1)).position == P1
    assert state.checkpoint(unique_name).position == P1
