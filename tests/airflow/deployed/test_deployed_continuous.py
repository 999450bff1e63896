"""A continuous pipeline (``schedule: "@continuous"``) run the way it is deployed: scheduler
(LocalExecutor), triggerer, dag-processor and api-server as separate processes. What must hold,
as for a cron schedule: runs one at a time, back to back; the sensor waiting deferred in the
triggerer while the leader is idle (no run after run when nothing changes); a change on the leader
picked up by the run already waiting; the verification DAG on its own schedule; the follower equal
to the leader after a writer stops.

Its own MariaDB leader and follower and its own Airflow (a deployment of its own, so the minute
schedule of ``test_deployed_pipeline`` does not share its scheduler). About 3 minutes of the suite.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass

import pytest
import yaml

from airflow_deployment import AirflowDeployment, pipeline_connections
from leader_writer import LeaderWriter
from local_services import MariaDBServer
from merge_helpers import assert_same_database
from mysql_cdc.capture.leader import Leader
from mysql_cdc.server_state.checkpoint import read_checkpoint
from mysql_cdc.mysql_server import MySQLSettings
from test_deployed_pipeline import TERMINAL

PIPELINE, DB = "continuous_cdc", "live"
IDLE_SECONDS = 25  # how long the idle leader is watched


@dataclass
class Continuous:
    airflow: AirflowDeployment
    leader: MariaDBServer
    follower: MariaDBServer
    leader_settings: MySQLSettings
    follower_settings: MySQLSettings

    def runs(self, dag_id: str = PIPELINE) -> list[dict]:
        return self.airflow.dag_runs(dag_id)

    def caught_up(self, timeout: float = 240) -> None:
        with Leader(self.leader_settings) as server:
            target = server.current_position()

        def applied():
            connection = self.follower_settings.connect()
            try:
                checkpoint = read_checkpoint(connection, PIPELINE)
            finally:
                connection.close()
            return checkpoint is not None and checkpoint.position >= target

        self.airflow.wait(applied, timeout, f"the checkpoint to reach the leader's {target}", every=1)
        assert_same_database(self.leader, self.follower, DB)

    def waiting_run(self, timeout: float = 120) -> dict:
        """The running run whose sensor is deferred to the triggerer."""
        def find():
            for run in self.runs():
                if run["state"] == "running":
                    ti = self.airflow.task_instances(PIPELINE, run["dag_run_id"]).get("wait_for_changes")
                    if ti and ti["state"] == "deferred":
                        return run
            return None
        return self.airflow.wait(find, timeout, "a continuous run's sensor deferred", every=1)


@pytest.fixture(scope="module")
def continuous(services_dir, tmp_path_factory, s3_endpoint):
    leader = MariaDBServer(services_dir, "continuous-leader", server_id=31, binlog=True, die_with_parent=True)
    follower = MariaDBServer(services_dir, "continuous-follower", server_id=32, binlog=False, die_with_parent=True)
    home = tmp_path_factory.mktemp("continuous-airflow")
    airflow = None
    try:
        leader.start(), follower.start()
        leader_user = leader.create_user("cdc", "cdc-leader-pw", ["REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.*"])
        follower_user = follower.create_user("cdc_writer", "cdc-follower-pw", ["ALL PRIVILEGES ON *.*"])
        leader.run_sql([
            f"CREATE DATABASE {DB}", f"USE {DB}",
            "CREATE TABLE orders (id INT AUTO_INCREMENT PRIMARY KEY, customer INT NOT NULL, amount DECIMAL(12,4))",
            "CREATE TABLE accounts (id INT PRIMARY KEY, balance BIGINT NOT NULL)",
            "INSERT INTO orders (customer, amount) SELECT seq % 97, seq / 3 FROM seq_1_to_500",
        ], database=None)
        pipelines = home / "pipelines.yaml"
        # the defaults of a continuous pipeline: no wait_timeout given (an hour), verify @daily
        pipelines.write_text(yaml.safe_dump({"pipelines": [{
            "name": PIPELINE, "schedule": "@continuous",
            "leader_conn_id": "continuous_leader", "follower_conn_id": "continuous_follower",
            "storage_uri": f"s3://{s3_endpoint.bucket}/continuous", "aws_conn_id": "continuous_s3",
            "spark_conn_id": "continuous_spark", "retry_delay": 5,
        }]}))
        airflow = AirflowDeployment(home, env={
            "CDC_PIPELINES_FILE": str(pipelines),
            **pipeline_connections("continuous", leader_user, follower_user, s3_endpoint.client_kwargs()),
        })
        airflow.start()
        yield Continuous(airflow, leader, follower, MySQLSettings(**leader_user), MySQLSettings(**follower_user))
    finally:
        left = []
        if airflow is not None:
            airflow.stop()
            left = airflow.processes()
        follower.stop(), leader.stop()
    assert not left, f"processes of the deployment left after stop: {left}"


def test_an_idle_leader_leaves_one_run_waiting_in_the_triggerer(continuous):
    airflow = continuous.airflow
    airflow.wait(lambda: any(r["state"] == "success" for r in continuous.runs()), 300,
                 "the first run (the copy) to succeed", every=3)
    continuous.caught_up()
    waiting = continuous.waiting_run()
    runs_before = len(continuous.runs())
    time.sleep(IDLE_SECONDS)
    # the same run still waits, deferred, and no other run was started meanwhile
    ti = airflow.task_instances(PIPELINE, waiting["dag_run_id"])["wait_for_changes"]
    assert ti["state"] == "deferred", ti
    assert len(continuous.runs()) == runs_before
    assert sum(1 for r in continuous.runs() if r["state"] == "running") == 1

    # a change is picked up by the run already waiting (no schedule to wait for)
    continuous.leader.run_sql([f"INSERT INTO {DB}.accounts VALUES (1, 100)"])
    continuous.caught_up()
    done = airflow.wait(lambda: next((r for r in continuous.runs() if r["dag_run_id"] == waiting["dag_run_id"]
                                      and r["state"] in TERMINAL), None), 120, "the waiting run to finish", every=1)
    assert done["state"] == "success"
    assert {t: i["state"] for t, i in airflow.task_instances(PIPELINE, done["dag_run_id"]).items()} == {
        "wait_for_changes": "success", "extract_batch": "success", "merge_batch": "success", "check_lag": "success",
        "retire_batches": "success"}


def test_runs_back_to_back_under_a_writer_never_overlap_and_the_follower_ends_equal(continuous):
    writer = LeaderWriter(continuous.leader, DB, keys=500, accounts=50, pause=0.02).start()
    started = len([r for r in continuous.runs() if r["state"] in TERMINAL])
    try:
        continuous.airflow.wait(
            lambda: len([r for r in continuous.runs() if r["state"] in TERMINAL]) >= started + 3, 300,
            "three more finished runs under the writer", every=2)
    finally:
        writer.stop()
    assert writer.commits > 100
    continuous.caught_up()
    finished = [r for r in continuous.runs() if r["state"] in TERMINAL]
    assert [r["state"] for r in finished] == ["success"] * len(finished), finished
    spans = sorted((dt.datetime.fromisoformat(r["start_date"]), dt.datetime.fromisoformat(r["end_date"]))
                   for r in finished)
    assert all(later[0] >= earlier[1] for earlier, later in zip(spans, spans[1:])), spans
    # back to back: each run starts within seconds of the last one's end (no cron tick to wait for)
    gaps = [(later[0] - earlier[1]).total_seconds() for earlier, later in zip(spans, spans[1:])]
    assert max(gaps[-3:]) < 30, gaps


def test_the_verification_dag_keeps_its_own_schedule(continuous):
    details = continuous.airflow.api(f"/dags/{PIPELINE}_verify/details")
    assert details["timetable_summary"] == "0 0 * * *", details  # @daily, as Airflow spells it
    assert continuous.airflow.api(f"/dags/{PIPELINE}/details")["timetable_summary"] == "@continuous"
