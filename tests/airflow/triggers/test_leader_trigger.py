"""LeaderAdvancedTrigger against the real leader and follower."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from mysql_cdc.contracts import Checkpoint
from mysql_cdc.hooks import LeaderHook
from mysql_cdc.kinds.mysql.hook import FollowerHook
from mysql_cdc.triggers import LeaderAdvancedTrigger


@pytest.fixture
def conns(monkeypatch, leader_user, follower_user):
    for conn_id, user in (("cdc_trig_leader", leader_user), ("cdc_trig_follower", follower_user)):
        monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(
            {"conn_type": "mysql", "host": user["host"], "port": user["port"], "login": user["user"],
             "password": user["password"]}))
    return LeaderHook("cdc_trig_leader"), FollowerHook("cdc_trig_follower")


def first_event(trigger: LeaderAdvancedTrigger) -> dict:
    async def run():
        return await anext(trigger.run())

    return asyncio.run(run()).payload


def make(pipeline: str, deadline_in: float, leader_conn_id="cdc_trig_leader") -> LeaderAdvancedTrigger:
    return LeaderAdvancedTrigger(pipeline=pipeline, leader_conn_id=leader_conn_id,
                                 follower="cdc_trig_follower", deadline=time.time() + deadline_in,
                                 poke_interval=0.3)


def test_kwargs_are_json_and_rebuild_the_trigger():
    classpath, kwargs = make("shop", 5).serialize()
    assert classpath == "mysql_cdc.triggers.leader.LeaderAdvancedTrigger"
    again = LeaderAdvancedTrigger(**json.loads(json.dumps(kwargs)))
    assert again.serialize() == (classpath, kwargs)
    assert not any("password" in key for key in kwargs)


def test_success_when_the_pipeline_has_no_checkpoint(conns, unique_name):
    event = first_event(make(unique_name, 5))
    assert event == {"status": "success", "leader": str(conns[0].current_position()), "checkpoint": None,
                     "leader_changed": False}


def test_success_when_the_leader_moves_during_the_wait(conns, unique_name, leader):
    leader_hook, follower_hook = conns
    start = leader_hook.current_position()
    follower_hook.state.initialize(Checkpoint(unique_name, start))

    async def wait_and_write():
        task = asyncio.ensure_future(anext(make(unique_name, 20).run()))
        await asyncio.sleep(1)
        assert not task.done()
        conn = leader.connect()
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE {unique_name}")
        conn.close()
        return (await task).payload

    event = asyncio.run(wait_and_write())
    assert event["status"] == "success" and event["checkpoint"] == str(start)
    assert event["leader"] == str(leader_hook.current_position())


def test_timeout_when_nothing_moves(conns, unique_name):
    leader_hook, follower_hook = conns
    follower_hook.state.initialize(Checkpoint(unique_name, leader_hook.current_position()))
    started = time.monotonic()
    event = first_event(make(unique_name, 1.0))
    assert event["status"] == "timeout"
    assert 0.9 <= time.monotonic() - started < 5


def test_error_event_names_the_bad_connection(unique_name):
    event = first_event(make(unique_name, 5, leader_conn_id="cdc_no_such_leader"))
    assert event["status"] == "error"
    assert "leader connection 'cdc_no_such_leader' is not defined" in event["message"]


def connections(server) -> int:
    """The server's count of connections made since it started (one more for asking)."""
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW GLOBAL STATUS LIKE 'Connections'")
            return int(cur.fetchone()[1])
    finally:
        conn.close()


def test_a_long_wait_polls_the_leader_on_one_connection_and_reads_the_state_once(conns, unique_name, leader,
                                                                                   follower):
    """What a continuous pipeline's hour-long wait costs: one query per poke on one leader connection,
    the follower's state read once (not a connection to each and a state read every second)."""
    leader_hook, follower_hook = conns
    follower_hook.state.initialize(Checkpoint(unique_name, leader_hook.current_position()))
    before = connections(leader), connections(follower)
    trigger = LeaderAdvancedTrigger(pipeline=unique_name, leader_conn_id="cdc_trig_leader", follower="cdc_trig_follower",
                                    deadline=time.time() + 2.0, poke_interval=0.05)
    assert first_event(trigger)["status"] == "timeout"  # about 40 pokes
    after = connections(leader), connections(follower)
    # each count includes the connection that asked for it
    assert after[0] - before[0] == 2, "the trigger opened more than one leader connection"
    assert after[1] - before[1] <= 3, "the trigger read the follower's state more than once"
