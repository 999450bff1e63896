"""Real DAG runs with MySQL (sid's 9.x) as leader AND follower, the way a MySQL user runs them: a
fresh follower with no `_mysql_cdc` schema (the first run creates it: MySQL answers the checkpoint
query with 1049, which once stopped the first run), GTIDs on, caching_sha2_password accounts, and
the leader's transactions compressed (binlog_transaction_compression=ON). The seed workload and a
random OLTP mix with DDL; after each run the follower equals the leader."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest
import yaml

from apply_workload import Workload
from demo_workload import seed_statements
from merge_helpers import assert_same_database
from mysql_cdc.capture.leader import Leader
from mysql_cdc.mysql_server import MySQLSettings

PIPELINE = "cdc_mysql"
SUCCESS = "success"


@pytest.fixture(scope="module")
def mysql_pipeline(mysql_leader, mysql_leader_user, mysql_follower, mysql_follower_user, airflow_connections,
                   tmp_path_factory):
    db = f"my_{uuid.uuid4().hex[:8]}"
    mysql_follower.run_sql(["DROP DATABASE IF EXISTS _mysql_cdc"])  # a follower no pipeline ever ran on
    mysql_leader.run_sql(["SET GLOBAL binlog_transaction_compression = ON"])
    with Leader(MySQLSettings(**mysql_leader_user)) as server:
        start = server.current_position()
    pipeline = {
        "name": PIPELINE, "schedule": None, "leader_conn_id": "mysql9_leader", "follower_conn_id": "mysql9_follower",
        "storage_uri": f"file://{tmp_path_factory.mktemp('mysql-batches')}", "spark_conn_id": "spark_default",
        "include": [f"{db}.*", f"{db}_w.*"], "start_position": str(start), "wait_timeout": 3, "poke_interval": 1, "retries": 0,
    }
    Path(os.environ["CDC_PIPELINES_FILE"]).write_text(yaml.safe_dump({"pipelines": [pipeline]}))

    def conn(user: dict) -> str:
        return json.dumps({"conn_type": "mysql", "host": user["host"], "port": user["port"],
                           "login": user["user"], "password": user["password"]})

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AIRFLOW_CONN_MYSQL9_LEADER", conn(mysql_leader_user))
        mp.setenv("AIRFLOW_CONN_MYSQL9_FOLLOWER", conn(mysql_follower_user))
        yield db
    mysql_leader.run_sql(["SET GLOBAL binlog_transaction_compression = OFF"])


def test_seed_and_random_workload_through_dag_runs_on_mysql(dag_runner, mysql_pipeline, mysql_leader,
                                                            mysql_follower):
    db = mysql_pipeline
    mysql_leader.run_sql(seed_statements(db))
    first = dag_runner.run(PIPELINE)
    assert first.tasks == {"wait_for_changes": SUCCESS, "extract_batch": SUCCESS, "merge_batch": SUCCESS, "check_lag": SUCCESS, "retire_batches": SUCCESS}, \
        first.log_file
    assert "no checkpoint yet" in first.log
    assert_same_database(mysql_leader, mysql_follower, db)

    workload = Workload(20261125, f"{db}_w")
    conn = mysql_leader.connect()
    try:
        workload.setup(conn)
        workload.run(conn, transactions=15)
    finally:
        conn.close()
    second = dag_runner.run(PIPELINE)
    assert second.tasks == {"wait_for_changes": SUCCESS, "extract_batch": SUCCESS, "merge_batch": SUCCESS, "check_lag": SUCCESS, "retire_batches": SUCCESS}, \
        second.log_file
    assert_same_database(mysql_leader, mysql_follower, db)
    assert_same_database(mysql_leader, mysql_follower, f"{db}_w")
