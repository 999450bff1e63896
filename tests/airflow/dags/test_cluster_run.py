"""The merge on a real Spark standalone cluster: DAG runs whose ``spark_default`` connection points at
a master and a worker started from pyspark's own distribution, batches in a real S3 endpoint, a
seeded random OLTP workload (keyed, composite-keyed, keyless and unique-only tables, rollbacks, key
changes, DDL) on the real MariaDB leader; after each run the follower equals the leader, and the
master's own status page shows that the merge application ran on the cluster with executors."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest
import yaml

from apply_workload import Workload
from merge_helpers import assert_same_database, table_names
from mysql_cdc.capture.leader import Leader
from mysql_cdc.mysql_server import MySQLSettings

PIPELINE = "cdc_cluster"
SEED = 20261123
SUCCESS = "success"


@pytest.fixture(scope="module")
def cluster_pipeline(leader, leader_user, spark_cluster, airflow_connections, s3_endpoint):
    """The pipeline file with one pipeline on S3, its Spark connection on the cluster."""
    db = f"cluster_{uuid.uuid4().hex[:8]}"
    with Leader(MySQLSettings(**leader_user)) as server:
        start = server.current_position()
    pipeline = {
        "name": PIPELINE, "schedule": None, "leader_conn_id": "mysql_leader", "follower_conn_id": "mysql_follower",
        "storage_uri": f"s3://{s3_endpoint.bucket}/cluster", "aws_conn_id": "aws_default",
        "spark_conn_id": "spark_default", "include": [f"{db}.*"], "start_position": str(start),
        "wait_timeout": 3, "poke_interval": 1, "retries": 0,
        # what a cluster deployment sets: small executors, the job's Python on every node; and
        # every table netted by the executors, however small (not on the driver beside Airflow)
        "spark_conf": {"spark.executor.memory": "1g", "spark.executor.cores": 1, "spark.cores.max": 2,
                       "spark.mysql_cdc.driverNetRows": 0},
    }
    Path(os.environ["CDC_PIPELINES_FILE"]).write_text(yaml.safe_dump({"pipelines": [pipeline]}))
    with pytest.MonkeyPatch.context() as mp:
        # spark_default is the cluster's master, as it would be in a deployment
        mp.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps(
            {"conn_type": "spark", "host": f"spark://{spark_cluster.host}", "port": spark_cluster.port}))
        yield db


def test_random_workload_merges_on_the_standalone_cluster(dag_runner, cluster_pipeline, leader, follower,
                                                          spark_cluster, spark_submit_spy):
    db = cluster_pipeline
    workload = Workload(SEED, db)
    conn = leader.connect()
    try:
        for number in range(2):
            if number == 0:
                workload.setup(conn)
            workload.run(conn, transactions=15)
            calls = len(spark_submit_spy.calls())

            result = dag_runner.run(PIPELINE)

            assert result.tasks == {"wait_for_changes": SUCCESS, "extract_batch": SUCCESS,
                                    "merge_batch": SUCCESS, "check_lag": SUCCESS, "retire_batches": SUCCESS}, result.log_file
            assert_same_database(leader, follower, db)
            (call,) = spark_submit_spy.calls()[calls:]
            assert call["rc"] == 0, call
            master = call["argv"][call["argv"].index("--master") + 1]
            assert master == spark_cluster.master_url, call["argv"]
    finally:
        conn.close()

    # a re-copy of every table: the cluster's executors load each copy into its shadow table
    follower.run_sql([f"DELETE FROM {db}.{t}" for t in sorted(table_names(follower, db))])
    recopy = dag_runner.run(PIPELINE, conf={"resnapshot": ["*"]})
    assert recopy.tasks["merge_batch"] == SUCCESS, recopy.log_file
    assert "merge summary" in recopy.log and "not through a shadow table" not in recopy.log, recopy.log_file
    assert_same_database(leader, follower, db)

    # the cluster's own account: every merge ran there, and got executors on its worker
    apps = [a for a in spark_cluster.applications() if a["name"] == f"mysql-cdc-merge-{PIPELINE}"]
    assert len(apps) == 3, spark_cluster.applications()
    assert all(a["state"] == "FINISHED" and a["cores"] > 0 for a in apps), apps


def test_a_delta_lake_on_s3_merged_on_the_standalone_cluster(dag_runner, leader, leader_user, spark_cluster,
                                                             airflow_connections, s3_endpoint, spark_submit_spy):
    """A Delta Lake follower on S3, its merge on the cluster: the Delta and S3A jars travel with
    --jars (the executors download them from the driver, nothing from the internet), the lake's
    credentials reach the executors from the job's secrets file."""
    from lake_helpers import LakePipeline, assert_lake_equals_leader
    from merge_helpers import Pipeline
    from mysql_cdc.storage import StorageSpec

    db = f"lake_{uuid.uuid4().hex[:8]}"
    name = "cdc_cluster_lake"
    with Leader(MySQLSettings(**leader_user)) as server:
        start = server.current_position()
    lake_uri = f"s3://{s3_endpoint.bucket}/lake-{db}"
    Path(os.environ["CDC_PIPELINES_FILE"]).write_text(yaml.safe_dump({"pipelines": [{
        "name": name, "schedule": None, "leader_conn_id": "mysql_leader",
        "follower": {"kind": "delta", "location": lake_uri},
        "storage_uri": f"s3://{s3_endpoint.bucket}/cluster-lake", "aws_conn_id": "aws_default",
        "include": [f"{db}.*"], "start_position": str(start), "wait_timeout": 3, "poke_interval": 1, "retries": 0,
        "spark_conf": {"spark.executor.memory": "1g", "spark.executor.cores": 1, "spark.cores.max": 2}}]}))
    leader.run_sql([f"CREATE DATABASE {db}", f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(10))",
                    f"CREATE TABLE {db}.bag (v INT)", f"INSERT INTO {db}.t VALUES (1, 'a'), (2, 'b')",
                    f"INSERT INTO {db}.bag VALUES (1), (1), (2)", f"UPDATE {db}.t SET v = 'c' WHERE id = 2",
                    f"DELETE FROM {db}.bag WHERE v = 1 LIMIT 1"])
    aws = json.loads(airflow_connections["AIRFLOW_CONN_AWS_DEFAULT"])
    options = {"endpoint_url": s3_endpoint.url, "region_name": "us-east-1",
               "aws_access_key_id": aws["login"], "aws_secret_access_key": aws["password"]}
    base = Pipeline(name, db, leader, None, MySQLSettings(**leader_user), None, StorageSpec(lake_uri, options))
    lake = LakePipeline.of(base, StorageSpec(lake_uri, options))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps(
            {"conn_type": "spark", "host": f"spark://{spark_cluster.host}", "port": spark_cluster.port}))
        calls = len(spark_submit_spy.calls())
        result = dag_runner.run(name)
    assert result.tasks["merge_batch"] == SUCCESS, result.log_file
    (call,) = spark_submit_spy.calls()[calls:]
    assert call["argv"][call["argv"].index("--master") + 1] == spark_cluster.master_url
    assert any(arg.endswith(".jar") and "delta-spark" in arg for arg in call["argv"]), call["argv"]
    assert aws["password"] not in " ".join(call["argv"]), "the lake's secret must not be on the command line"
    assert_lake_equals_leader(lake)
