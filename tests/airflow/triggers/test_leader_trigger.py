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
