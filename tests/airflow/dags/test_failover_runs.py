"""A failover, the way a user lives it: real DAG runs against a MariaDB leader with a GTID replica;
the leader is lost, the replica promoted, and the pipeline's leader connection pointed at it. The
next run finds the checkpoint's place on the replica by GTID set and carries everything on; the
follower equals the new leader."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest
import yaml

from merge_helpers import assert_same_database

PIPELINE = "cdc_failover"
SUCCESS = "success"


def leader_conn(params: dict) -> str:
    return json.dumps({"conn_type": "mysql", "host": params["host"], "port": params["port"],
                       "login": params["user"], "password": params["password"]})


def test_a_run_after_a_failover_follows_the_promoted_replica(dag_runner, leader, leader_user, follower,
                                                             make_replica, tmp_path, monkeypatch):
    db = f"fo_{uuid.uuid4().hex[:8]}"
    replica = make_replica(leader)
    Path(os.environ["CDC_PIPELINES_FILE"]).write_text(yaml.safe_dump({"pipelines": [{
        "name": PIPELINE, "schedule": None, "leader_conn_id": "failover_leader", "follower_conn_id": "mysql_follower",
        "storage_uri": f"file://{tmp_path}/batches", "include": [f"{db}.*"], "start_position": "current",
        "wait_timeout": 3, "poke_interval": 1, "retries": 0,
    }]}))
    monkeypatch.setenv("AIRFLOW_CONN_FAILOVER_LEADER", leader_conn(leader_user))
    first = dag_runner.run(PIPELINE)  # starts the pipeline at the leader's current position
    assert first.tasks["extract_batch"] in (SUCCESS, "skipped"), first.log_file
    leader.run_sql([f"CREATE DATABASE {db}", f"USE {db}", "CREATE TABLE t (id INT PRIMARY KEY, v INT)",
                    "INSERT INTO t VALUES (1, 1), (2, 2)"])
    second = dag_runner.run(PIPELINE)
    assert second.tasks["merge_batch"] == SUCCESS, second.log_file

    # the leader's last writes reach the replica, not the pipeline; then the leader is lost
    leader.run_sql([f"USE {db}", "UPDATE t SET v = 20 WHERE id = 2", "INSERT INTO t VALUES (3, 3)"])
    replica.wait_for(leader)
    replica.promote()
    monkeypatch.setenv("AIRFLOW_CONN_FAILOVER_LEADER", leader_conn(replica.conn_params()))
    replica.run_sql([f"USE {db}", "DELETE FROM t WHERE id = 1"])

    third = dag_runner.run(PIPELINE)
    assert third.tasks == {"wait_for_changes": SUCCESS, "extract_batch": SUCCESS, "merge_batch": SUCCESS, "check_lag": SUCCESS, "retire_batches": SUCCESS}, \
        third.log_file
    assert "the leader is another server than the one checkpoint" in third.log  # the sensor saw it
    assert f"the leader is now server '{replica.server_identity}'" in third.log
    assert_same_database(replica, follower, db)


@pytest.fixture(autouse=True)
def _pipelines_file_restored():
    path = Path(os.environ["CDC_PIPELINES_FILE"])
    before = path.read_text() if path.exists() else None
    yield
    if before is not None:
        path.write_text(before)
