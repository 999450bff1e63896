"""Real DAG runs of the factory's DAGs: deferrable sensor, extract, spark-submit of the merge job,
against the session's real MariaDB leader and follower and a real S3 endpoint (moto).

The tests share one pipeline's history, which keeps the number of spark-submits (~17 s each) to
four; none depends on which ran before it: the seed run is a module fixture (``seeded``) that
whichever test needs it first triggers, and every test reads the checkpoint and leader position it
starts from instead of assuming them.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from demo_workload import more_statements, seed_statements
from mysql_cdc.capture.leader import Leader
from mysql_cdc.contracts import BinlogPosition
from mysql_cdc.mysql_server import MySQLSettings

E2E = "cdc_e2e"  # s3:// storage, starts at a FILE:POS taken before its workload
IDLE = "cdc_idle"  # file:// storage, start_position current, never gets a change

SUCCESS, SKIPPED, FAILED, UPSTREAM_FAILED = "success", "skipped", "failed", "upstream_failed"


@dataclass
class Scenario:
    db: str
    idle_db: str
    start: BinlogPosition
    leader_settings: MySQLSettings
    leader: object
    follower: object
    idle_storage: Path
    after_seed: BinlogPosition | None = None
    seed_run: object | None = None  # SeedRun, once the `seeded` fixture ran

    def position(self) -> BinlogPosition:
        with Leader(self.leader_settings) as leader:
            return leader.current_position()

    def run_on_leader(self, statements: list[str]) -> BinlogPosition:
        self.leader.run_sql(statements)
        return self.position()

    def checkpoint(self, pipeline: str) -> tuple | None:
        conn = self.follower.connect()
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT binlog_file, binlog_pos FROM _mysql_cdc.checkpoint WHERE pipeline = %s", (pipeline,))
                row = cur.fetchone()
        finally:
            conn.close()
        return None if row is None else BinlogPosition(row[0], int(row[1]))


def table_image(server, db: str, table: str) -> tuple[list[str], list[tuple]]:
    """Column names in order and every row (a multiset, sorted): what "equal" means."""
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT * FROM `{db}`.`{table}`")
            columns = [d[0] for d in cur.description]
            rows = sorted(cur.fetchall(), key=repr)
    finally:
        conn.close()
    return columns, rows


def assert_follower_equals_leader(scenario: Scenario, tables: list[str]) -> None:
    for table in tables:
        leader_image = table_image(scenario.leader, scenario.db, table)
        assert leader_image[1], f"{table} is empty on the leader: the comparison would prove nothing"
        assert table_image(scenario.follower, scenario.db, table) == leader_image, f"{scenario.db}.{table} differs"


@pytest.fixture(scope="module")
def scenario(leader, leader_user, follower, tmp_path_factory, airflow_connections, s3_endpoint) -> Scenario:
    tag = uuid.uuid4().hex[:8]
    settings = MySQLSettings(**leader_user)
    with Leader(settings) as server:
        start = server.current_position()
    idle_storage = tmp_path_factory.mktemp("idle-batches")
    common = {"schedule": None, "wait_timeout": 3, "poke_interval": 1}
    pipelines = [
        {"name": E2E, "leader_conn_id": "mysql_leader", "follower_conn_id": "mysql_follower",
         "storage_uri": f"s3://{s3_endpoint.bucket}/batches", "aws_conn_id": "aws_default",
         "spark_conn_id": "spark_default", "include": [f"e2e_{tag}.*"], "start_position": str(start),
         "retries": 1, "retry_delay": 1, **common},
        {"name": IDLE, "leader_conn_id": "mysql_leader", "follower_conn_id": "mysql_follower",
         "storage_uri": f"file://{idle_storage}", "include": [f"idle_{tag}.*"], "start_position": "current",
         "retries": 0, **common},
    ]
    Path(os.environ["CDC_PIPELINES_FILE"]).write_text(yaml.safe_dump({"pipelines": pipelines}))
    return Scenario(f"e2e_{tag}", f"idle_{tag}", start, settings, leader, follower, idle_storage)


def new_calls(spy, before: int) -> list[dict]:
    return spy.calls()[before:]


def test_first_run_initializes_then_nothing_new_skips_without_spark(dag_runner, scenario, spark_submit_spy):
    calls = len(spark_submit_spy.calls())
    first = dag_runner.run(IDLE)
    assert first.tasks == {"wait_for_changes": SUCCESS, "extract_batch": SKIPPED, "merge_batch": SKIPPED, "check_lag": SUCCESS, "retire_batches": SUCCESS}, first.log_file
    assert scenario.checkpoint(IDLE) == scenario.position()  # start_position current, written first

    second = dag_runner.run(IDLE)
    assert second.tasks == {"wait_for_changes": SKIPPED, "extract_batch": SKIPPED, "merge_batch": SKIPPED, "check_lag": SUCCESS, "retire_batches": SUCCESS}, second.log_file
    assert "nothing new for pipeline cdc_idle within 3s" in second.log
    assert second.seconds < 12, f"a run with nothing new took {second.seconds:.1f}s"
    assert new_calls(spark_submit_spy, calls) == []


@dataclass
class SeedRun:
    result: object  # conftest.RunResult
    calls: list[dict]  # the spark-submits it made


@pytest.fixture
def seeded(scenario, dag_runner, spark_submit_spy) -> SeedRun:
    """The seed workload on the leader and the first DAG run of the E2E pipeline that carries it:
    run once, by whichever test asks first (dag_runner is per test, so this cannot be a module
    fixture; the scenario keeps the result)."""
    if scenario.seed_run is None:
        scenario.after_seed = scenario.run_on_leader(seed_statements(scenario.db))
        calls = len(spark_submit_spy.calls())
        result = dag_runner.run(E2E)
        scenario.seed_run = SeedRun(result, new_calls(spark_submit_spy, calls))
    return scenario.seed_run


def test_seed_workload_replicates_through_a_dag_run(seeded, scenario, s3_endpoint, asset_events, follower_user):
    result = seeded.result
    assert result.tasks == {"wait_for_changes": SUCCESS, "extract_batch": SUCCESS, "merge_batch": SUCCESS, "check_lag": SUCCESS, "retire_batches": SUCCESS}, result.log_file
    assert_follower_equals_leader(scenario, ["pet"])
    assert scenario.checkpoint(E2E) == scenario.after_seed
    (call,) = seeded.calls
    assert call["rc"] == 0 and call["secrets_mode"] == "600", call
    assert call["argv"][-2:] == ["--manifest-uri", f"s3://{s3_endpoint.bucket}/batches/{E2E}/batches/"
                                 f"{scenario.start.token()}-{scenario.after_seed.token()}/manifest.json"]
    assert not Path(call["secrets_file"]).exists(), "the secrets file outlived the merge task"
    assert_asset_event(E2E, scenario.start, scenario.after_seed)
    # the follower table the merge changed, as the mysql provider names a table's asset
    (table_event,) = [(uri, extra) for uri, extra in asset_events(f"mysql-cdc/{E2E}")
                      if extra["position"] == str(scenario.after_seed)]
    assert table_event[0] == f"mysql://{follower_user['host']}:{follower_user['port']}/{scenario.db}/pet"
    assert {k: table_event[1][k] for k in ("table", "inserted", "deleted", "copied", "ddl")} == {
        "table": f"{scenario.db}.pet", "inserted": 3, "deleted": 1, "copied": False, "ddl": ["create_table", "alter_table"]}
    # the merge task's log: Spark's INFO lines quiet, the run's summary at the end in words
    log = result.log
    assert " INFO SparkContext" not in log and "INFO Executor" not in log and "INFO py4j" not in log, result.log_file
    summary = log[log.rindex("segment(s) applied"):]
    # (pet has no key: an update removes the old row and adds the new one; netted within each
    # segment, the DDL in the middle splitting the batch in two)
    assert f"{scenario.db}.pet: 6 changes in -> 3 inserted, 0 updated, 1 deleted" in summary, result.log_file


def assert_asset_event(pipeline: str, start: BinlogPosition, end: BinlogPosition) -> None:
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        extras = session.scalars(
            select(AssetEvent.extra).join(AssetModel, AssetEvent.asset_id == AssetModel.id)
            .where(AssetModel.name == f"{pipeline}_batches")
        ).all()
    assert any(e.get("start") == str(start) and e.get("end") == str(end) for e in extras), extras


def test_merge_killed_before_commit_then_retried(dag_runner, scenario, seeded, spark_submit_spy):
    end = scenario.run_on_leader(more_statements(scenario.db))
    calls = len(spark_submit_spy.calls())
    spark_submit_spy.crash_next()

    result = dag_runner.run(E2E)

    assert result.tasks["merge_batch"] == SUCCESS, result.log_file
    assert result.tries["merge_batch"] == 2, result.log_file
    crashed, retried = new_calls(spark_submit_spy, calls)
    assert crashed["crash"] == "before_commit" and crashed["rc"] != 0, crashed
    assert retried["crash"] == "" and retried["rc"] == 0, retried
    assert_follower_equals_leader(scenario, ["pet", "vet_visit"])
    assert scenario.checkpoint(E2E) == end


def test_replay_of_an_applied_range_changes_nothing(dag_runner, scenario, seeded, spark_submit_spy):
    before = table_image(scenario.follower, scenario.db, "pet")
    checkpoint = scenario.checkpoint(E2E)
    calls = len(spark_submit_spy.calls())

    result = dag_runner.run(E2E, conf={"start": str(scenario.start), "end": str(scenario.after_seed)})

    # extract rebuilt the batch; the merge saw the checkpoint already past its end
    assert result.tasks == {"wait_for_changes": SUCCESS, "extract_batch": SUCCESS, "merge_batch": SKIPPED, "check_lag": SUCCESS, "retire_batches": SUCCESS}, result.log_file
    assert "is already applied" in result.log
    assert table_image(scenario.follower, scenario.db, "pet") == before
    assert scenario.checkpoint(E2E) == checkpoint
    assert new_calls(spark_submit_spy, calls) == []


def test_replay_with_a_gap_fails_with_a_clear_message(dag_runner, scenario, seeded):
    checkpoint = scenario.checkpoint(E2E)
    gap_start = scenario.run_on_leader([f"INSERT INTO {scenario.db}.pet VALUES ('Gap','X','cat','f','2001-01-01',NULL)"])
    gap_end = scenario.run_on_leader([f"INSERT INTO {scenario.db}.pet VALUES ('Gap2','X','cat','f','2002-02-02',NULL)"])

    result = dag_runner.run(E2E, conf={"start": str(gap_start), "end": str(gap_end)})

    assert result.tasks == {"wait_for_changes": SUCCESS, "extract_batch": FAILED, "merge_batch": UPSTREAM_FAILED, "check_lag": UPSTREAM_FAILED, "retire_batches": UPSTREAM_FAILED}
    assert result.tries["extract_batch"] == 1, "a gap cannot heal: it must not be retried"
    assert f"applying it would skip the changes in [{checkpoint}, {gap_start})" in result.log, result.log_file
    assert scenario.checkpoint(E2E) == checkpoint
    names = {row[0] for row in table_image(scenario.follower, scenario.db, "pet")[1]}
    assert not names & {"Gap", "Gap2"}


def test_replay_overlapping_the_checkpoint_applies_only_the_new_part(dag_runner, scenario, seeded,
                                                                       spark_submit_spy):
    # a change after the checkpoint, so the range [start, end) overlaps it on both sides
    end = scenario.run_on_leader([f"INSERT INTO {scenario.db}.pet VALUES ('Late','Y','dog','m','2003-03-03',NULL)"])
    calls = len(spark_submit_spy.calls())

    result = dag_runner.run(E2E, conf={"start": str(scenario.start), "end": str(end)})

    assert result.tasks == {"wait_for_changes": SUCCESS, "extract_batch": SUCCESS, "merge_batch": SUCCESS, "check_lag": SUCCESS, "retire_batches": SUCCESS}, result.log_file
    assert [c["rc"] for c in new_calls(spark_submit_spy, calls)] == [0]
    assert_follower_equals_leader(scenario, ["pet"])  # the seed part is not applied twice
    assert scenario.checkpoint(E2E) == end


def test_replay_params_are_validated_when_triggered_and_when_run(dag_runner, scenario):
    from airflow.sdk.exceptions import ParamValidationError

    with pytest.raises(ParamValidationError, match="param start"):
        dag_runner.run(E2E, conf={"start": "binlog-3:abc", "end": str(scenario.position())})

    # valid by the schema (each param alone may be empty), refused at run time
    result = dag_runner.run(E2E, conf={"start": str(scenario.start)})
    assert result.tasks["wait_for_changes"] == FAILED, result.log_file
    assert "param 'end': is missing" in result.log


def test_cli_trigger_validates_conf_and_queues_a_replay(scenario, seeded, airflow_connections, venv_bin):
    def trigger(conf: dict) -> subprocess.CompletedProcess:
        return subprocess.run([str(venv_bin / "airflow"), "dags", "trigger", E2E, "--conf", json.dumps(conf)],
                              capture_output=True, text=True, timeout=180)

    bad = trigger({"start": str(scenario.start), "end": "not-a-position"})
    assert bad.returncode != 0
    assert "Invalid input for param end" in bad.stdout + bad.stderr

    good = trigger({"start": str(scenario.start), "end": str(scenario.after_seed)})
    assert good.returncode == 0, good.stdout + good.stderr
    assert "queued" in good.stdout


def test_no_secret_in_task_logs_or_spark_submit_command_lines(seeded, task_logs, spark_submit_spy, leader_user,
                                                             follower_user, s3_endpoint):
    logs = "\n".join(task_logs)
    # the captured logs hold all three tasks' lines and the merge job's own output
    for line in ("leader at", "extracted cdc_e2e", "Spark-Submit cmd", "merge summary {"):
        assert line in logs, f"the captured task logs lack {line!r}: the check below would prove nothing"
    argv = json.dumps([c["argv"] for c in spark_submit_spy.calls()])
    assert spark_submit_spy.calls()
    for secret in (leader_user["password"], follower_user["password"], s3_endpoint.secret_key):
        assert secret not in logs
        assert secret not in argv
    assert s3_endpoint.access_key not in argv
