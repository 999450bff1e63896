"""LeaderAdvancedSensor: succeed, defer or skip, and its resume handling of trigger events."""

from __future__ import annotations

import json

import pytest
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowSkipException, TaskDeferred

from mysql_cdc.contracts import Checkpoint
from mysql_cdc.hooks import LeaderHook
from mysql_cdc.kinds.mysql.hook import FollowerHook
from mysql_cdc.sensors import LeaderAdvancedSensor
from mysql_cdc.triggers import LeaderAdvancedTrigger


@pytest.fixture
def conns(monkeypatch, leader_user, follower_user):
    for conn_id, user in (("cdc_sens_leader", leader_user), ("cdc_sens_follower", follower_user)):
        monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(
            {"conn_type": "mysql", "host": user["host"], "port": user["port"], "login": user["user"],
             "password": user["password"]}))
    return LeaderHook("cdc_sens_leader"), FollowerHook("cdc_sens_follower")


def sensor(pipeline: str = "shop", **kwargs) -> LeaderAdvancedSensor:
    return LeaderAdvancedSensor(task_id="wait", pipeline=pipeline, leader_conn_id="cdc_sens_leader",
                                follower="cdc_sens_follower", timeout=7, poke_interval=1, **kwargs)


NO_PARAMS = {"params": {"start": None, "end": None}}


def test_no_checkpoint_succeeds_at_once(conns, unique_name):
    assert sensor(unique_name).execute(NO_PARAMS) == {"leader": str(conns[0].current_position()), "checkpoint": None,
                                                      "leader_changed": False}


def test_nothing_new_defers_to_the_trigger(conns, unique_name):
    leader_hook, follower_hook = conns
    follower_hook.state.initialize(Checkpoint(unique_name, leader_hook.current_position()))
    with pytest.raises(TaskDeferred) as info:
        sensor(unique_name).execute(NO_PARAMS)
    trigger = info.value.trigger
    assert isinstance(trigger, LeaderAdvancedTrigger)
    assert info.value.method_name == "execute_complete"
    _, kwargs = trigger.serialize()
    assert kwargs["pipeline"] == unique_name and kwargs["poke_interval"] == 1
    json.dumps(kwargs)


def test_replay_runs_do_not_wait_and_bad_params_fail():
    # no connection is looked up for a replay: the ids below do not exist
    lone = LeaderAdvancedSensor(task_id="w", pipeline="shop", leader_conn_id="nope", follower="nope")
    assert lone.execute({"params": {"start": "binlog.000001:4", "end": "binlog.000001:99"}}) is None
    with pytest.raises(AirflowFailException, match="param 'end': is missing"):
        lone.execute({"params": {"start": "binlog.000001:4", "end": None}})


def test_execute_complete():
    s = sensor()
    assert s.execute_complete({}, {"status": "success", "leader": "b.000002:9", "checkpoint": "b.000002:4"}) == {
        "leader": "b.000002:9", "checkpoint": "b.000002:4"}
    with pytest.raises(AirflowSkipException, match="nothing new for pipeline shop within 7s"):
        s.execute_complete({}, {"status": "timeout", "leader": "b.000002:4", "checkpoint": "b.000002:4"})
    with pytest.raises(AirflowException, match="failed: OperationalError: boom") as info:
        s.execute_complete({}, {"status": "error", "message": "OperationalError: boom"})
    assert not isinstance(info.value, AirflowSkipException)
    with pytest.raises(AirflowException, match="failed"):
        s.execute_complete({}, {"status": "surprise"})


@pytest.mark.parametrize("run_type, refused", [("backfill", True), ("manual", False), ("scheduled", False)])
def test_a_date_range_backfill_run_is_refused_naming_what_to_use(conns, unique_name, run_type, refused):
    """The runs of an Airflow date-range backfill are created and run by the scheduler, which the
    suite does not run; the sensor gets the same DagRun record (its run_type) as in one."""
    from airflow.models.dagrun import DagRun
    from airflow.utils.types import DagRunType

    dag_run = DagRun(dag_id=unique_name, run_id=f"{run_type}__1", run_type=DagRunType(run_type))
    context = {**NO_PARAMS, "dag_run": dag_run}
    if refused:
        with pytest.raises(AirflowFailException, match=r"Airflow date-range backfill.*'Replay binlog range'"):
            sensor(unique_name).execute(context)
    else:
        assert sensor(unique_name).execute(context)["checkpoint"] is None  # a regular run goes on
