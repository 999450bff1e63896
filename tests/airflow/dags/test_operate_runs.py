"""Operating a pipeline through real DAG runs: the batch history and lag figures every run records,
the metrics Airflow sends (to a real StatsD socket), the lag alert, the heartbeat on an idle
leader, failures in the history, and the verification DAG finding drift whose named resnapshot
repairs it. Real MariaDB leader and follower, real spark-submit of the merge job."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from mysql_cdc.capture.leader import Leader
from mysql_cdc.server_state.checkpoint import read_checkpoint
from mysql_cdc.server_state.history import read_history
from mysql_cdc.server_state.history import latest_verification
from mysql_cdc.mysql_server import MySQLSettings

OPS, BEAT = "cdc_ops", "cdc_beat"
SUCCESS, SKIPPED, FAILED, UPSTREAM_FAILED = "success", "skipped", "failed", "upstream_failed"
ALL_SUCCESS = {"wait_for_changes": SUCCESS, "extract_batch": SUCCESS, "merge_batch": SUCCESS, "check_lag": SUCCESS, "retire_batches": SUCCESS}


@dataclass
class Ops:
    db: str
    leader: object
    follower: object
    leader_settings: MySQLSettings
    follower_settings: MySQLSettings

    def history(self, pipeline: str = OPS):
        conn = self.follower_settings.connect()
        try:
            return read_history(conn, pipeline)
        finally:
            conn.close()

    def checkpoint(self, pipeline: str = OPS):
        conn = self.follower_settings.connect()
        try:
            return read_checkpoint(conn, pipeline)
        finally:
            conn.close()

    def leader_position(self):
        with Leader(self.leader_settings) as server:
            return server.current_position()

    def rows(self, server, table: str) -> list[tuple]:
        conn = server.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(f"SELECT * FROM `{self.db}`.`{table}`")
                return sorted(cur.fetchall(), key=repr)
        finally:
            conn.close()


@pytest.fixture(scope="module")
def ops(leader, leader_user, follower, follower_user, tmp_path_factory, airflow_connections) -> Ops:
    db = f"ops_{uuid.uuid4().hex[:8]}"
    settings = MySQLSettings(**leader_user)
    with Leader(settings) as server:
        start = str(server.current_position())
    # the heartbeat's table on the leader: the one write a pipeline account needs
    leader.run_sql([f"GRANT CREATE, INSERT, UPDATE ON `_mysql_cdc`.* TO '{leader_user['user']}'@'%'"])
    storage = tmp_path_factory.mktemp("ops-batches")
    common = {"leader_conn_id": "mysql_leader", "follower_conn_id": "mysql_follower",
              "storage_uri": f"file://{storage}", "include": [f"{db}.*"], "schedule": None, "wait_timeout": 3,
              "poke_interval": 1, "retries": 0}
    pipelines = [
        {"name": OPS, **common, "start_position": start, "max_seconds_behind": 600,
         "verify": {"schedule": None, "chunk_rows": 2, "rechecks": 1, "settle_timeout": 3}},
        {"name": BEAT, **common, "include": [f"{db}_beat.*"], "start_position": "current", "heartbeat": True,
         "max_seconds_behind": 600},
    ]
    Path(os.environ["CDC_PIPELINES_FILE"]).write_text(yaml.safe_dump({"pipelines": pipelines}))
    return Ops(db, leader, follower, settings, MySQLSettings(**follower_user))


def metric(lines: list[str], name: str) -> list[str]:
    """The values (with their type) StatsD got for ``airflow.<name>``."""
    prefix = f"airflow.{name}:"
    return [line[len(prefix):] for line in lines if line.startswith(prefix)]


def test_a_run_records_its_batch_lag_and_metrics(dag_runner, ops, statsd):
    committed = int(time.time()) - 42  # the leader's commit time of the run's transactions
    ops.leader.run_sql([
        f"SET TIMESTAMP = {committed}",
        f"CREATE DATABASE {ops.db}",
        f"CREATE TABLE {ops.db}.orders (id INT PRIMARY KEY, amount INT, note VARCHAR(20))",
        f"CREATE TABLE {ops.db}.events (kind VARCHAR(10))",
        *(f"INSERT INTO {ops.db}.orders VALUES ({i}, {i * 10}, 'o{i}')" for i in range(1, 6)),
        f"INSERT INTO {ops.db}.events VALUES ('paid'), ('paid')",
    ])
    end = ops.leader_position()
    statsd.drain()

    result = dag_runner.run(OPS)

    assert result.tasks == ALL_SUCCESS, result.log_file
    (record,) = ops.history()
    assert (record.run_id, record.kind, record.status, record.end_position) == (result.run_id, "stream", "merged",
                                                                               str(end))
    assert (record.rows_in, record.net_rows) == (7, 7)
    assert record.end_time == dt.datetime.fromtimestamp(committed, dt.timezone.utc).replace(tzinfo=None)
    assert record.extract_seconds > 0 and record.merge_seconds > 0 and record.merged_at is not None
    assert ops.checkpoint().position == end
    # check_lag: caught up, so nothing is behind
    assert f"pipeline {OPS}: checkpoint {end}, leader at {end}: 0 bytes and 0.0 seconds behind" in result.log
    lines = statsd.drain()
    assert metric(lines, f"mysql_cdc.{OPS}.rows_extracted") == ["7|c"], lines
    assert metric(lines, f"mysql_cdc.{OPS}.rows_merged") == ["7|c"]
    assert metric(lines, f"mysql_cdc.{OPS}.bytes_behind") == ["0|g"]
    assert metric(lines, f"mysql_cdc.{OPS}.seconds_behind") == ["0.0|g"]
    assert len(metric(lines, f"mysql_cdc.{OPS}.merge_seconds")) == 1


def test_lag_past_max_seconds_behind_fails_the_check(dag_runner, ops, statsd):
    """An hour-old transaction is the last one applied and more is waiting: check_lag fails, which
    is what Airflow's failure alerting acts on."""
    old = int(time.time()) - 3600
    ops.leader.run_sql([f"SET TIMESTAMP = {old}", f"INSERT INTO {ops.db}.orders VALUES (6, 60, 'late')"])
    assert dag_runner.run(OPS).tasks == ALL_SUCCESS
    ops.leader.run_sql([f"INSERT INTO {ops.db}.orders VALUES (7, 70, 'waiting')"])  # not merged yet
    statsd.drain()

    check = dag_runner.run(OPS, only=["check_lag"])

    assert check.tasks == {"check_lag": FAILED}, check.log_file
    found = re.search(r"pipeline cdc_ops is (\d+) s behind its leader, more than max_seconds_behind 600 s \((\d+) "
                      r"binlog bytes to go\)", check.log)
    assert found and 3600 <= int(found[1]) < 3700 and int(found[2]) > 0, check.log_file
    (seconds,) = metric(statsd.drain(), f"mysql_cdc.{OPS}.seconds_behind")
    assert 3600 <= float(seconds.split("|")[0]) < 3700
    assert dag_runner.run(OPS).tasks == ALL_SUCCESS  # the next run catches up and the check passes


def test_a_failed_task_is_in_the_history(dag_runner, ops):
    checkpoint = ops.checkpoint().position
    ahead = f"{checkpoint.file}:{checkpoint.offset + 1000}"
    result = dag_runner.run(OPS, conf={"start": ahead, "end": f"{checkpoint.file}:{checkpoint.offset + 2000}"})
    assert result.tasks["extract_batch"] == FAILED, result.log_file
    record = next(r for r in ops.history() if r.run_id == result.run_id)
    # the cause first (the gap and its fix), not an exception's class name
    assert record.status == "failed" and record.error.startswith("extract_batch: gap: range "), record


def test_heartbeat_keeps_an_idle_leader_fresh(dag_runner, ops):
    first = dag_runner.run(BEAT)  # initializes the checkpoint; its heartbeat is before it
    assert first.tasks["wait_for_changes"] == SUCCESS, first.log_file
    before = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None, microsecond=0)

    second = dag_runner.run(BEAT)  # nothing but the heartbeat happened on the leader

    assert second.tasks == ALL_SUCCESS, second.log_file
    assert "captured no change of this pipeline's tables" in second.log  # no Spark for a heartbeat
    record = next(r for r in ops.history(BEAT) if r.run_id == second.run_id)
    assert record.status == "merged" and record.rows_in == 0 and record.end_time >= before
    assert ops.checkpoint(BEAT).position == ops.leader_position()
    found = re.search(r"pipeline cdc_beat: .*: 0 bytes and ([0-9.]+) seconds behind", second.log)
    assert found and float(found[1]) < 60, second.log_file  # counted from the heartbeat, not 0 by rule
    conn = ops.leader_settings.connect()
    with conn.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM _mysql_cdc.heartbeat WHERE pipeline = %s", (BEAT,))
        assert cur.fetchone() == (1,)
    conn.close()


def test_verification_finds_drift_and_its_resnapshot_repairs_it(dag_runner, ops):
    assert dag_runner.run(OPS).tasks["merge_batch"] in (SUCCESS, SKIPPED)  # caught up first
    clean = dag_runner.run(f"{OPS}_verify")
    assert clean.tasks == {"verify_follower": SUCCESS}, clean.log_file
    assert "follower equals leader: 2 tables, " in clean.log

    ops.follower.run_sql([f"UPDATE {ops.db}.orders SET amount = -1 WHERE id = 3"])  # damage, not replicated
    drift = dag_runner.run(f"{OPS}_verify")

    assert drift.tasks == {"verify_follower": FAILED}, drift.log_file
    assert f"DRIFT in {ops.db}.orders" in drift.log
    result = latest_verification(ops.follower_settings.connect(), OPS)
    assert [(c.table, c.lo, c.hi) for c in result.drifted] == [(f"{ops.db}.orders", 3, 5)]  # keys 3..4
    conf = json.loads(re.search(r"repair with a manual run with conf (\{.*?\]\})", drift.log)[1])
    assert conf == {"resnapshot": [f"{ops.db}.orders"]}

    repair = dag_runner.run(OPS, conf=conf)  # the message, followed literally

    assert repair.tasks == ALL_SUCCESS, repair.log_file
    assert ops.rows(ops.follower, "orders") == ops.rows(ops.leader, "orders")
    assert dag_runner.run(f"{OPS}_verify").tasks == {"verify_follower": SUCCESS}
