"""Errors no retry can fix fail the task on its first try, with the cause first everywhere it is
recorded; errors a retry may fix keep Airflow's retries. Real DAG runs, real MariaDB, real
spark-submit (the merge job's own verdict travels back in its outcome file)."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
import yaml

from merge_helpers import assert_same_database
from mysql_cdc.capture.leader import Leader
from mysql_cdc.server_state.history import read_history
from mysql_cdc.mysql_server import MySQLSettings

SUCCESS, FAILED = "success", "failed"


@pytest.fixture
def pipeline(leader, leader_user, follower_user, tmp_path, airflow_connections):
    db = f"ff_{uuid.uuid4().hex[:8]}"
    with Leader(MySQLSettings(**leader_user)) as server:
        start = str(server.current_position())
    name = f"cdc_{db}"
    Path(os.environ["CDC_PIPELINES_FILE"]).write_text(yaml.safe_dump({"pipelines": [{
        "name": name, "schedule": None, "leader_conn_id": "mysql_leader", "follower_conn_id": "mysql_follower",
        "storage_uri": f"file://{tmp_path / 'batches'}", "include": [f"{db}.*"], "start_position": start,
        "wait_timeout": 3, "poke_interval": 1, "retries": 2, "retry_delay": 1}]}))
    leader.run_sql([f"CREATE DATABASE {db}", f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(10))",
                    f"INSERT INTO {db}.t VALUES (1, 'a')"])
    return name, db, MySQLSettings(**follower_user)


def history(settings: MySQLSettings, name: str):
    conn = settings.connect()
    try:
        return read_history(conn, name)
    finally:
        conn.close()


def test_a_permanent_merge_error_fails_at_once_cause_first(dag_runner, pipeline, leader, follower):
    name, db, follower_settings = pipeline
    assert dag_runner.run(name).tasks["merge_batch"] == SUCCESS
    # the follower's table changed outside the pipeline: no retry can make the batch fit it
    follower.run_sql([f"ALTER TABLE {db}.t ADD COLUMN extra INT"])
    leader.run_sql([f"INSERT INTO {db}.t VALUES (2, 'b')"])

    failed = dag_runner.run(name)

    assert failed.tasks["merge_batch"] == FAILED, failed.log_file
    assert failed.tries["merge_batch"] == 1, "retries: 2, but no retry can fix a drifted follower table"
    record = history(follower_settings, name)[0]
    cause = f"merge_batch: the columns of `{db}`.`t` in batch differ from the follower table"
    assert record.status == FAILED and record.error.startswith(cause), record.error
    # the fix comes before spark-submit's report of the command (secrets masked) and exit code
    assert record.error.index("resnapshot") < record.error.index("Cannot execute"), record.error
    (only_try,) = record.failed_tries
    assert only_try.try_number == 1 and only_try.error.startswith(cause)

    # following the fix the message names repairs it
    repaired = dag_runner.run(name, conf={"resnapshot": [f"{db}.t"]})
    assert repaired.tasks["merge_batch"] == SUCCESS, repaired.log_file
    assert_same_database(leader, follower, db)


def test_a_transient_merge_error_is_retried(dag_runner, pipeline, leader, follower, spark_submit_spy):
    """The merge job killed outright (what an OOM kill or a lost executor looks like) says nothing
    of its own: the task keeps Airflow's retries, and the retry applies the batch once."""
    name, db, follower_settings = pipeline
    assert dag_runner.run(name).tasks["merge_batch"] == SUCCESS
    leader.run_sql([f"INSERT INTO {db}.t VALUES (3, 'c')"])
    spark_submit_spy.crash_next()

    result = dag_runner.run(name)

    assert result.tasks["merge_batch"] == SUCCESS and result.tries["merge_batch"] == 2, result.log_file
    record = history(follower_settings, name)[0]
    (killed,) = record.failed_tries
    assert killed.error.startswith("merge_batch: the merge job ended without an error of its own"), killed.error
    assert_same_database(leader, follower, db)


def test_a_batch_the_plan_refuses_fails_before_spark_starts(dag_runner, pipeline, leader, follower,
                                                             spark_submit_spy):
    """A batch ``contracts.replay`` refuses (here: the checkpoint holds a DDL pending at its position,
    and the batch starts with rows instead) is refused by the merge task's plan, the same rule the
    job applies: no spark-submit, no retry."""
    name, db, follower_settings = pipeline
    assert dag_runner.run(name).tasks["merge_batch"] == SUCCESS
    follower.run_sql([f"UPDATE _mysql_cdc.checkpoint SET pending_ddl_pos = CONCAT(binlog_file, ':', binlog_pos), "
                      f"pending_ddl_fingerprint = 'x' WHERE pipeline = '{name}'"])
    leader.run_sql([f"INSERT INTO {db}.t VALUES (4, 'd')"])
    submitted = len(spark_submit_spy.calls())

    refused = dag_runner.run(name)

    assert refused.tasks["merge_batch"] == FAILED, refused.log_file
    assert refused.tries["merge_batch"] == 1, "retries: 2, but no retry can settle a pending DDL the batch lacks"
    assert len(spark_submit_spy.calls()) == submitted, "the plan refused the batch: Spark must not start"
    record = history(follower_settings, name)[0]
    assert record.status == FAILED and "has a pending DDL at" in record.error, record.error
