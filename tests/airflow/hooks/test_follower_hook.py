"""FollowerHook: the follower's spec and state store from its Airflow connection, secrets kept out
of what gets logged."""

from __future__ import annotations

import json

from mysql_cdc.kinds import FollowerSpec
from mysql_cdc.kinds.mysql.hook import FollowerHook
from mysql_cdc.server_state import MySQLStateStore


def test_the_spec_and_the_state_store_come_from_the_connection(monkeypatch, follower_user, unique_name):
    monkeypatch.setenv("AIRFLOW_CONN_CDC_SPEC_FOLLOWER", json.dumps(
        {"conn_type": "mysql", "host": follower_user["host"], "port": follower_user["port"],
         "login": follower_user["user"], "password": follower_user["password"]}))
    hook = FollowerHook("cdc_spec_follower")
    spec = hook.spec()
    assert spec.kind == "mysql"
    assert (spec.settings["host"], spec.settings["port"], spec.settings["user"]) == (
        follower_user["host"], follower_user["port"], follower_user["user"])
    assert spec.settings["password"] == follower_user["password"]  # for the job's 0600 secrets file only
    assert follower_user["password"] not in repr(spec)  # specs get logged; their settings never
    assert FollowerSpec.from_json(json.loads(json.dumps(spec.to_json())), "test") == spec
    assert isinstance(hook.state, MySQLStateStore) and hook.state.checkpoint(unique_name) is None
