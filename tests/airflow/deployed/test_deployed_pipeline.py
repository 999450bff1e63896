"""A pipeline run the way it is deployed: scheduler (LocalExecutor), triggerer, dag-processor and
api-server as separate processes (scripts/airflow_deployment.py), a pipeline every minute with the
pipelines file's defaults (a snapshot first, copied by 2 worker processes), a writer committing on
the leader, and the deployment's faults: the triggerer killed while a sensor waits in it, a task
process killed during a merge, the scheduler killed during a merge. After each, the follower
equals the leader once the next run has applied the leader's last position. Beside it, a pipeline
into a Delta Lake on S3 and one into an Iceberg catalog (its warehouse on S3), run by hand through
the API: a copy, then changes.

Its own MariaDB leader and follower and its own SQLite metadata database: the scheduled runs of
this module never touch the other tests' servers. It costs about 9 minutes of the suite (most of it
waiting for the minute schedule); `make test` runs it.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import signal
import time
import urllib.error
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pytest
import yaml

from airflow_deployment import AirflowDeployment, pipeline_connections
from iceberg_helpers import assert_iceberg_equals_leader
from lake_helpers import assert_lake_equals_leader
from leader_writer import LeaderWriter
from local_services import MariaDBServer
from merge_helpers import assert_same_database
from mysql_cdc.capture.leader import Leader
from mysql_cdc.server_state.checkpoint import read_checkpoint
from mysql_cdc.server_state.history import read_failed_tries, read_history
from mysql_cdc.mysql_server import MySQLSettings
from mysql_cdc.kinds.delta.state.cut import read_cut
from mysql_cdc.kinds.delta.state.location import LakeLocation
from mysql_cdc.kinds.iceberg.catalog import CatalogRef
from mysql_cdc.kinds.iceberg.state import IcebergStateStore
from mysql_cdc.storage import StorageSpec

PIPELINE, DB = "deployed_cdc", "shop"
LAKE_PIPELINE = "deployed_lake"  # the same leader into a Delta Lake on S3, triggered by hand
ICEBERG_PIPELINE = "deployed_iceberg"  # and into an Iceberg catalog (a database of the follower's server)
ICEBERG_CATALOG_DB = "deployed_catalog"
TERMINAL = {"success", "failed"}


@dataclass
class Deployed:
    airflow: AirflowDeployment
    leader: MariaDBServer
    follower: MariaDBServer
    leader_settings: MySQLSettings
    follower_settings: MySQLSettings
    lake: tuple[str, dict]  # the lake pipeline's location and its S3 options
    iceberg: CatalogRef  # the Iceberg pipeline's catalog

    def leader_position(self):
        with Leader(self.leader_settings) as server:
            return server.current_position()

    def checkpoint(self):
        conn = self.follower_settings.connect()
        try:
            return read_checkpoint(conn, PIPELINE)
        finally:
            conn.close()

    def runs(self, dag_id: str = PIPELINE) -> list[dict]:
        return self.airflow.dag_runs(dag_id)

    def caught_up(self, timeout: float = 300) -> None:
        """Wait until a run has applied the leader's position of now (the leader idle), then
        compare the whole database."""
        target = self.leader_position()
        self.airflow.wait(lambda: (cp := self.checkpoint()) is not None and cp.position >= target, timeout,
                          f"the checkpoint to reach the leader's {target}", every=3)
        assert_same_database(self.leader, self.follower, DB)

    def running_task(self, task_id: str, timeout: float = 180) -> dict:
        """The run whose ``task_id`` is running now, with the task's pid known."""
        def find():
            for run in reversed(self.runs()):
                if run["state"] == "running":
                    ti = self.airflow.task_instances(PIPELINE, run["dag_run_id"]).get(task_id)
                    if ti and ti["state"] == "running" and ti.get("pid"):
                        return {"run": run, "ti": ti}
            return None
        return self.airflow.wait(find, timeout, f"{task_id} running in a scheduled run", every=1)

    def run_state(self, run_id: str, timeout: float = 400, dag_id: str = PIPELINE) -> str:
        def done():
            run = next(r for r in self.runs(dag_id) if r["dag_run_id"] == run_id)
            return run["state"] if run["state"] in TERMINAL else None
        return self.airflow.wait(done, timeout, f"run {run_id} to finish", every=3)

    def run_by_hand(self, dag_id: str, changes: list[str]):
        """``changes`` written on the leader, then a manual run of ``dag_id`` (once the DAG processor
        has parsed it) that succeeds; returns the leader's position the run had to reach."""
        def parsed():
            try:
                return self.airflow.api(f"/dags/{dag_id}")
            except urllib.error.HTTPError as exc:
                if exc.code != 404:
                    raise
                return None
        self.airflow.wait(parsed, 120, f"the DAG {dag_id} parsed", every=2)
        self.leader.run_sql(changes)
        target = self.leader_position()
        run = self.airflow.api(f"/dags/{dag_id}/dagRuns", "POST", {"logical_date": None})
        assert self.run_state(run["dag_run_id"], dag_id=dag_id) == "success", run
        return target

    def history(self):
        conn = self.follower_settings.connect()
        try:
            return read_history(conn, PIPELINE, limit=200), read_failed_tries(conn, PIPELINE)
        finally:
            conn.close()


REPO = Path(__file__).resolve().parents[3]


def dags_folder(home: Path, orders_uri: str) -> Path:
    """The product's DAG file, and the downstream DAG of docs/operate.md waiting on the lake's
    ``shop.orders`` (its example URI replaced with the lake pipeline's)."""
    folder = home / "dags"
    folder.mkdir()
    (folder / "mysql_cdc_pipelines.py").symlink_to(REPO / "dags" / "mysql_cdc_pipelines.py")
    docs = (REPO / "docs" / "operate.md").read_text()
    example = re.search(r"<!-- downstream-dag:[^>]*-->\n```python\n(.*?)```", docs, re.S).group(1)
    assert "s3://lake/cdc/shop/orders" in example
    (folder / "orders_report.py").write_text(example.replace("s3://lake/cdc/shop/orders", orders_uri))
    return folder


@pytest.fixture(scope="module")
def deployed(services_dir, tmp_path_factory, s3_endpoint):
    leader = MariaDBServer(services_dir, "deployed-leader", server_id=21, binlog=True, die_with_parent=True)
    follower = MariaDBServer(services_dir, "deployed-follower", server_id=22, binlog=False, die_with_parent=True)
    home = tmp_path_factory.mktemp("deployed-airflow")
    airflow = None
    try:
        leader.start(), follower.start()
        leader_user = leader.create_user("cdc", "cdc-leader-pw", ["REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.*"])
        follower_user = follower.create_user("cdc_writer", "cdc-follower-pw", ["ALL PRIVILEGES ON *.*"])
        # the leader's history: rows written before the pipeline exists (the snapshot copies them)
        leader.run_sql([
            f"CREATE DATABASE {DB}", f"USE {DB}",
            "CREATE TABLE orders (id INT AUTO_INCREMENT PRIMARY KEY, customer INT NOT NULL, amount DECIMAL(12,4))",
            "CREATE TABLE events (kind INT, note VARCHAR(20))",  # no key: applied as a multiset
            "CREATE TABLE accounts (id INT PRIMARY KEY, balance BIGINT NOT NULL)",
            "INSERT INTO orders (customer, amount) SELECT seq % 97, seq / 3 FROM seq_1_to_3000",
            "INSERT INTO events SELECT seq % 3, 'old' FROM seq_1_to_300",
        ], database=None)
        follower.run_sql([f"CREATE DATABASE {ICEBERG_CATALOG_DB}"])
        warehouse = f"s3://{s3_endpoint.bucket}/deployed-warehouse"
        pipelines = home / "pipelines.yaml"
        # The pipelines file's defaults (start_position: snapshot, snapshot.workers: 2), a schedule
        # of every minute, a sensor that waits in the triggerer long enough to be caught there,
        # and a short retry delay so the fault tests' retries come within the test's time.
        pipelines.write_text(yaml.safe_dump({"pipelines": [{
            "name": PIPELINE, "schedule": "* * * * *",
            "leader_conn_id": "deployed_leader", "follower_conn_id": "deployed_follower",
            "storage_uri": f"s3://{s3_endpoint.bucket}/deployed", "aws_conn_id": "deployed_s3",
            "spark_conn_id": "deployed_spark", "wait_timeout": 40, "retry_delay": 5,
        }, {
            "name": LAKE_PIPELINE, "schedule": None, "leader_conn_id": "deployed_leader",
            "follower": {"kind": "delta", "location": f"s3://{s3_endpoint.bucket}/deployed-lake", "changelog": True},
            "storage_uri": f"s3://{s3_endpoint.bucket}/deployed", "aws_conn_id": "deployed_s3",
            "spark_conn_id": "deployed_spark", "include": [f"{DB}.*"], "wait_timeout": 10, "retry_delay": 5,
            "verify": {"schedule": None}, "maintenance": {"schedule": None},
        }, {
            "name": ICEBERG_PIPELINE, "schedule": None, "leader_conn_id": "deployed_leader",
            "follower": {"kind": "iceberg", "catalog": "lake", "conn_id": "deployed_follower",
                         "database": ICEBERG_CATALOG_DB, "warehouse": warehouse},
            "storage_uri": f"s3://{s3_endpoint.bucket}/deployed", "aws_conn_id": "deployed_s3",
            "spark_conn_id": "deployed_spark", "include": [f"{DB}.*"], "wait_timeout": 10, "retry_delay": 5,
            "verify": {"schedule": None}, "maintenance": {"schedule": None},
        }]}))
        lake_location = f"s3://{s3_endpoint.bucket}/deployed-lake"
        airflow = AirflowDeployment(home, env={
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder(home, f"{lake_location}/{DB}/orders")),
            "CDC_PIPELINES_FILE": str(pipelines),
            **pipeline_connections("deployed", leader_user, follower_user, s3_endpoint.client_kwargs()),
        })
        airflow.start()
        lake = s3_endpoint.client_kwargs()
        yield Deployed(airflow, leader, follower, MySQLSettings(**leader_user), MySQLSettings(**follower_user),
                       (f"s3://{s3_endpoint.bucket}/deployed-lake", lake),
                       CatalogRef("lake", MySQLSettings(**follower_user), ICEBERG_CATALOG_DB, StorageSpec(warehouse, lake)))
    finally:
        left = []
        if airflow is not None:
            airflow.stop()
            left = airflow.processes()  # a killed scheduler's orphans included
        follower.stop(), leader.stop()
    assert not left, f"processes of the deployment left after stop: {left}"


def task_logs(home: Path) -> dict[str, str]:
    return {str(p.relative_to(home)): p.read_text(errors="replace") for p in (home / "logs").rglob("*.log")
            if "dag_id=" in str(p)}


def test_scheduled_runs_with_a_writer_keep_the_follower_equal(deployed):
    writer = LeaderWriter(deployed.leader, DB, keys=3000, accounts=50, pause=0.05, keyless="events").start()
    airflow = deployed.airflow
    try:
        # several scheduled runs while the writer commits; the first is the snapshot
        airflow.wait(lambda: len([r for r in deployed.runs() if r["state"] in TERMINAL]) >= 3, 420,
                     "three finished scheduled runs", every=5)
    finally:
        writer.stop()
    assert writer.commits > 100
    deployed.caught_up()

    runs = deployed.runs()
    finished = [r for r in runs if r["state"] in TERMINAL]
    assert all(r["run_type"] == "scheduled" for r in runs)
    assert [r["state"] for r in finished] == ["success"] * len(finished), finished
    # the first run copied the tables with 2 workers, on its first try
    first = airflow.task_instances(PIPELINE, finished[0]["dag_run_id"])
    assert first["extract_batch"]["try_number"] == 1, first["extract_batch"]
    history, failed_tries = deployed.history()
    assert history[-1].kind == "snapshot" and history[-1].status == "merged", history[-1]
    assert not failed_tries
    # no run overlapped another
    spans = sorted((dt.datetime.fromisoformat(r["start_date"]), dt.datetime.fromisoformat(r["end_date"]))
                   for r in finished)
    assert all(later[0] >= earlier[1] for earlier, later in zip(spans, spans[1:])), spans


def test_the_sensor_waits_in_the_triggerer_and_survives_its_crash(deployed):
    airflow = deployed.airflow
    deployed.caught_up()

    def deferred():
        for run in reversed(deployed.runs()):
            if run["state"] == "running":
                ti = airflow.task_instances(PIPELINE, run["dag_run_id"])["wait_for_changes"]
                if ti["state"] == "deferred":
                    return run
        return None

    run = airflow.wait(deferred, 150, "a sensor deferred to the triggerer", every=1)
    airflow.kill("triggerer")
    airflow.start_component("triggerer")
    deployed.leader.run_sql([f"INSERT INTO {DB}.accounts VALUES (9001, 5)"])
    assert deployed.run_state(run["dag_run_id"]) == "success"
    tis = airflow.task_instances(PIPELINE, run["dag_run_id"])
    assert {t: ti["state"] for t, ti in tis.items()} == {
        "wait_for_changes": "success", "extract_batch": "success", "merge_batch": "success", "check_lag": "success", "retire_batches": "success"}
    # the wait ran in a triggerer (the one started in the killed one's place): the trigger's own
    # log, which the triggerer writes beside the task's, has it firing on the leader's change
    sensor_logs = airflow.home / "logs" / f"dag_id={PIPELINE}" / f"run_id={run['dag_run_id']}" / "task_id=wait_for_changes"
    fired = [p.read_text() for p in sensor_logs.glob("attempt=*.log.trigger.*.log")]
    assert any("Trigger fired event" in text and "'status': 'success'" in text for text in fired), fired
    assert "Pausing task as DEFERRED" in (sensor_logs / "attempt=1.log").read_text()
    deployed.caught_up()


def _parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])  # the field after the command name's ")"


def spark_submit_under(airflow: AirflowDeployment, task_pid: int) -> int:
    """The pid of the merge job (``merge_batch.py`` in its command line) running under the task
    process ``task_pid``, once it has started."""
    def find():
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                if b"merge_batch.py" not in (entry / "cmdline").read_bytes():
                    continue
            except OSError:
                continue
            pid = int(entry.name)
            while pid and pid != task_pid:
                pid = _parent(pid) or 0
            if pid == task_pid:
                return int(entry.name)
        return None
    return airflow.wait(find, 120, f"the merge's spark-submit under task process {task_pid}", every=0.2)


def test_a_task_process_killed_during_the_merge_is_retried(deployed):
    airflow = deployed.airflow
    deployed.leader.run_sql([f"INSERT INTO {DB}.events VALUES (7, 'killed-task')",
                             f"UPDATE {DB}.orders SET amount = -1 WHERE id < 50"])
    found = deployed.running_task("merge_batch")
    # killed while its spark-submit runs: a batch this small merges in seconds (netted on the
    # driver, no Spark session), so a fixed wait could land after the task has finished
    spark_submit_under(airflow, found["ti"]["pid"])
    os.kill(found["ti"]["pid"], signal.SIGKILL)
    assert deployed.run_state(found["run"]["dag_run_id"]) == "success"
    tries = airflow.tries(PIPELINE, found["run"]["dag_run_id"], "merge_batch")
    assert [t["state"] for t in tries][-1] == "success" and len(tries) >= 2, tries
    deployed.caught_up()

    def killed_tries():
        return [f for f in deployed.history()[1] if f.run_id == found["run"]["dag_run_id"]]

    # a killed task process cannot run its own retry callback: the scheduler finds the try's
    # heartbeat gone and has the DAG processor run it, which may be after the retry succeeded
    killed = airflow.wait(killed_tries, 120, "the killed try's record in the batch history")
    assert killed[0].task_id == "merge_batch" and killed[0].try_number == 1, killed
    assert killed[0].error.startswith("merge_batch: "), killed[0].error


def test_the_scheduler_killed_during_a_merge_and_started_again(deployed):
    airflow = deployed.airflow
    deployed.leader.run_sql([f"INSERT INTO {DB}.events VALUES (8, 'killed-scheduler')",
                             f"DELETE FROM {DB}.orders WHERE id BETWEEN 100 AND 140"])
    found = deployed.running_task("merge_batch")
    time.sleep(5)
    airflow.kill("scheduler")
    time.sleep(5)
    airflow.start_component("scheduler")
    assert deployed.run_state(found["run"]["dag_run_id"]) == "success"
    deployed.caught_up()


def test_a_lake_pipeline_snapshots_then_streams_under_the_scheduler(deployed):
    """The lake pipeline's manual runs as the deployment runs them (the triggerer's sensor reading
    the lake's state with delta-rs, the snapshot's worker processes, the merge's spark-submit with
    the Delta jars from the task runner): a copy, then the changes, the lake equal to the leader at
    its consistent cut after each."""
    airflow = deployed.airflow
    location, s3 = deployed.lake
    lake = SimpleNamespace(leader=deployed.leader, database=DB, cut=lambda: read_cut(location, LAKE_PIPELINE, s3))
    for changes in ([], [f"INSERT INTO {DB}.events VALUES (11, 'lake')", f"UPDATE {DB}.orders SET amount = 0 WHERE id < 9",
                         f"DELETE FROM {DB}.accounts WHERE id = 1"]):
        target = deployed.run_by_hand(LAKE_PIPELINE, changes)
        assert lake.cut().position >= target
        assert_lake_equals_leader(lake)
    logged = {(r["_op"], r["kind"], r["note"]) for r in changelog_rows(location, s3, "events")}
    assert logged == {("I", 11, "lake")}  # the copy is no change; the insert after it is

    # the downstream DAG of docs/operate.md, scheduled on shop.orders: a run after each merge
    # that changed it (the copy, then the update), each with the merge's event
    report = airflow.wait(lambda: runs if len(runs := deployed.runs("orders_report")) >= 2 else None, 180,
                          "two asset-triggered runs of orders_report", every=3)
    assert [r["run_type"] for r in report] == ["asset_triggered"] * 2, report
    for run in report:
        assert deployed.run_state(run["dag_run_id"], dag_id="orders_report") == "success", run
    events = [airflow.api(f"/dags/orders_report/dagRuns/{r['dag_run_id']}/upstreamAssetEvents")["asset_events"]
              for r in report]
    extras = [e["extra"] for run_events in events for e in run_events]
    assert [(x["table"], x["copied"]) for x in extras] == [(f"{DB}.orders", True), (f"{DB}.orders", False)], extras
    assert extras[-1]["updated"] >= 1 and extras[-1]["inserted"] == extras[-1]["deleted"] == 0
    assert extras[-1]["version"] == lake.cut().versions[f"{DB}.orders"]
    assert extras[-1]["position"] == str(lake.cut().position)


def test_an_iceberg_pipeline_snapshots_then_streams_under_the_scheduler(deployed):
    """The Iceberg pipeline's manual runs as the deployment runs them (the triggerer's sensor reading
    the catalog's state, the snapshot's worker processes, the merge's spark-submit writing through
    pyiceberg to a warehouse on S3): a copy, then the changes, the catalog equal to the leader at
    its consistent cut after each, read with pyiceberg."""
    state = IcebergStateStore(deployed.iceberg)
    catalog = SimpleNamespace(leader=deployed.leader, database=DB, catalog=deployed.iceberg,
                              cut=lambda: state.table_versions(ICEBERG_PIPELINE))
    for changes in ([], [f"INSERT INTO {DB}.events VALUES (12, 'iceberg')", f"UPDATE {DB}.orders SET amount = 1 WHERE id < 5",
                         f"DELETE FROM {DB}.accounts WHERE id = 2"]):
        target = deployed.run_by_hand(ICEBERG_PIPELINE, changes)
        assert state.checkpoint(ICEBERG_PIPELINE).position >= target
        assert_iceberg_equals_leader(catalog)


def changelog_rows(location: str, s3: dict, table: str) -> list[dict]:
    from deltalake import DeltaTable, QueryBuilder

    lake = LakeLocation(StorageSpec(location, s3))
    delta = DeltaTable(lake.changelog_uri(LAKE_PIPELINE, DB, table), storage_options=lake.storage_options())
    return pa.table(QueryBuilder().register("t", delta).execute("SELECT * FROM t").read_all()).to_pylist()


def test_no_warning_of_ours_in_a_task_log(deployed):
    logs = task_logs(deployed.airflow.home)
    assert logs, "no task log written"
    # Python's warnings (DeprecationWarning, UserWarning, ...): none from our code or pins
    warned = {name: re.findall(r".{0,120}\b[A-Za-z]*Warning\b.{0,120}", text) for name, text in logs.items()}
    assert not {name: lines for name, lines in warned.items() if lines}
