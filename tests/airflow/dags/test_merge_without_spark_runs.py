"""``merge: {spark: when_needed}`` in real DAG runs: a batch the follower kind applies without Spark
is merged by the worker's Python alone (no spark-submit at all), a copy of a table included; one
that needs Spark is submitted as always. Real MariaDB, real Airflow DAG runs, the real spark-submit
behind the suite's spy (which records every call)."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
import yaml

from merge_helpers import assert_same_database
from mysql_cdc.capture.leader import Leader
from mysql_cdc.mysql_server import MySQLSettings

SUCCESS = "success"


def write_pipeline(name: str, db: str, start: str, batches: Path, spark_conf: dict | None = None) -> None:
    entry = {"name": name, "schedule": None, "leader_conn_id": "mysql_leader", "follower_conn_id": "mysql_follower",
             "storage_uri": f"file://{batches}", "include": [f"{db}.*"], "start_position": start,
             "wait_timeout": 3, "poke_interval": 1, "retries": 0, "merge": {"spark": "when_needed"}}
    if spark_conf:
        entry["spark_conf"] = spark_conf
    Path(os.environ["CDC_PIPELINES_FILE"]).write_text(yaml.safe_dump({"pipelines": [entry]}))


@pytest.fixture
def pipeline(leader, leader_user, tmp_path, airflow_connections):
    db = f"ws_{uuid.uuid4().hex[:8]}"
    with Leader(MySQLSettings(**leader_user)) as server:
        start = str(server.current_position())
    name = f"cdc_{db}"
    write_pipeline(name, db, start, tmp_path / "batches")
    leader.run_sql([f"CREATE DATABASE {db}", f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(10))",
                    f"INSERT INTO {db}.t VALUES (1, 'a'), (2, 'b')"])
    return name, db, start, tmp_path / "batches"


def test_batches_that_need_no_spark_are_merged_without_spark_submit(dag_runner, pipeline, leader, follower,
                                                                    spark_submit_spy):
    name, db, start, batches = pipeline
    calls = len(spark_submit_spy.calls())

    first = dag_runner.run(name)  # DDL and a small table's rows
    leader.run_sql([f"UPDATE {db}.t SET v = 'b2' WHERE id = 2", f"ALTER TABLE {db}.t ADD COLUMN n INT",
                    f"INSERT INTO {db}.t VALUES (3, 'c', 3)", f"CREATE TABLE {db}.u (id INT PRIMARY KEY)",
                    f"INSERT INTO {db}.u VALUES (1)"])
    second = dag_runner.run(name)
    repaired = dag_runner.run(name, conf={"resnapshot": [f"{db}.t"]})  # a copy with nothing to fold in

    for result in (first, second, repaired):
        assert result.tasks["merge_batch"] == SUCCESS, result.log_file
        assert "merging without Spark" in result.log and "submitting the merge to Spark" not in result.log, \
            result.log_file
    assert f"{db}.t: copied 3 rows" in repaired.log, repaired.log_file
    assert spark_submit_spy.calls()[calls:] == []
    assert_same_database(leader, follower, db)

    # a batch that needs Spark (every table netted by the executors) goes to spark-submit, saying why
    write_pipeline(name, db, start, batches, {"spark.mysql_cdc.driverNetRows": 0})
    leader.run_sql([f"INSERT INTO {db}.t VALUES (4, 'd', 4)"])
    submitted = dag_runner.run(name)

    assert submitted.tasks["merge_batch"] == SUCCESS, submitted.log_file
    assert (f"submitting the merge to Spark: {db}.t: more than 0 change rows in a segment "
            "(spark.mysql_cdc.driverNetRows)") in submitted.log, submitted.log_file
    assert [c["rc"] for c in spark_submit_spy.calls()[calls:]] == [0]
    assert_same_database(leader, follower, db)
