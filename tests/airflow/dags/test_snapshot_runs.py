"""Snapshot through real DAG runs, the way a user starts a pipeline on a leader that already has
years of rows: the first run copies every table (start_position: snapshot, the default), later runs
stream; a follower table dropped by mistake is repaired by a run triggered with {"resnapshot": [...]}
while the other tables keep streaming; and with on_purged: snapshot a run whose binlog was purged
copies everything again instead of failing. After every run the follower equals the leader."""

from __future__ import annotations

import json
import os
import re
import uuid
from pathlib import Path

import pytest
import yaml

from merge_helpers import assert_same_database

PIPELINE = "cdc_snapshot"
SUCCESS, SKIPPED = "success", "skipped"
ALL_SUCCESS = {"wait_for_changes": SUCCESS, "extract_batch": SUCCESS, "merge_batch": SUCCESS, "check_lag": SUCCESS, "retire_batches": SUCCESS}


@pytest.fixture(scope="module")
def history(leader, airflow_connections, tmp_path_factory):
    """A leader database with rows written long ago: their binlog is purged."""
    db = f"snap_{uuid.uuid4().hex[:8]}"
    leader.run_sql([
        f"CREATE DATABASE {db}", f"USE {db}",
        "CREATE TABLE customers (id INT PRIMARY KEY, name VARCHAR(40), since DATE)",
        "CREATE TABLE visits (customer INT, at DATETIME(6), note TEXT)",  # no key, duplicates
        "INSERT INTO customers VALUES (1, 'Ada', '2001-01-01'), (2, 'Bo', NULL), (3, 'Cy', '2003-03-03')",
        "INSERT INTO visits VALUES (1, '2020-01-01 10:00:00.5', 'x'), (1, '2020-01-01 10:00:00.5', 'x'), "
        "(3, NULL, NULL)",
    ], database=None)
    leader.purge_binary_logs()
    pipeline = {
        "name": PIPELINE, "schedule": None, "leader_conn_id": "mysql_leader", "follower_conn_id": "mysql_follower",
        "storage_uri": f"file://{tmp_path_factory.mktemp('snapshot-batches')}", "include": [f"{db}.*"],
        "on_purged": "snapshot", "wait_timeout": 3, "poke_interval": 1, "retries": 0,
    }
    Path(os.environ["CDC_PIPELINES_FILE"]).write_text(yaml.safe_dump({"pipelines": [pipeline]}))
    return db


def test_snapshot_stream_resnapshot_and_purged_binlog(dag_runner, history, leader, follower):
    db = history
    first = dag_runner.run(PIPELINE)
    assert first.tasks == ALL_SUCCESS, first.log_file
    assert "copied 2 tables (6 rows)" in first.log, first.log_file
    assert_same_database(leader, follower, db)

    leader.run_sql([f"INSERT INTO {db}.customers VALUES (4, 'Di', NULL)", f"DELETE FROM {db}.visits WHERE customer = 3"])
    second = dag_runner.run(PIPELINE)
    assert second.tasks == ALL_SUCCESS, second.log_file
    assert_same_database(leader, follower, db)

    # a follower table lost by mistake; the leader goes on writing to it and to the other table
    follower.run_sql([f"DROP TABLE {db}.customers"])
    leader.run_sql([f"UPDATE {db}.customers SET name = 'Ada L.' WHERE id = 1", f"INSERT INTO {db}.visits VALUES (4, NULL, 'new')"])
    repair = dag_runner.run(PIPELINE, conf={"resnapshot": [f"{db}.customers"]})
    assert repair.tasks == ALL_SUCCESS, repair.log_file
    assert "replay or resnapshot run: not waiting for the leader" in repair.log
    # right after the repair, every table at one position: customers' update is in its copy, and
    # visits' insert was caught up in the same run (not left for the next one)
    assert_same_database(leader, follower, db)
    stream = dag_runner.run(PIPELINE)
    assert stream.tasks["wait_for_changes"] == SKIPPED, stream.log_file

    # the binlog after the checkpoint is purged while the pipeline is stopped: on_purged: snapshot
    leader.run_sql([f"INSERT INTO {db}.customers VALUES (5, 'Ed', NULL)"])
    leader.purge_binary_logs()
    recopied = dag_runner.run(PIPELINE)
    assert recopied.tasks == ALL_SUCCESS, recopied.log_file
    assert "on_purged: snapshot copies every table again" in recopied.log
    assert_same_database(leader, follower, db)
    idle = dag_runner.run(PIPELINE)
    assert idle.tasks["wait_for_changes"] == SKIPPED, idle.log_file


def test_a_purged_checkpoint_fails_naming_the_conf_that_recovers_it(dag_runner, history, leader, follower):
    """on_purged: fail (the default). The run fails; its message names a conf; that conf, copied
    from the message as a user would, recovers the pipeline with the follower equal to the leader."""
    db = history
    path = Path(os.environ["CDC_PIPELINES_FILE"])
    config = yaml.safe_load(path.read_text())
    config["pipelines"][0]["on_purged"] = "fail"
    path.write_text(yaml.safe_dump(config))
    assert dag_runner.run(PIPELINE).tasks["merge_batch"] in (SUCCESS, SKIPPED)  # caught up first
    leader.run_sql([f"UPDATE {db}.customers SET name = 'lost' WHERE id = 2"])
    leader.purge_binary_logs()

    failed = dag_runner.run(PIPELINE)
    assert failed.tasks["extract_batch"] == "failed", failed.log_file
    named = re.search(r"trigger the pipeline's DAG with conf (\{.*?\]\})", failed.log)
    assert named, failed.log_file
    recovered = dag_runner.run(PIPELINE, conf=json.loads(named.group(1)))
    assert recovered.tasks == ALL_SUCCESS, recovered.log_file
    assert_same_database(leader, follower, db)
    after = dag_runner.run(PIPELINE)  # and it streams again
    assert after.tasks["wait_for_changes"] == SKIPPED, after.log_file
