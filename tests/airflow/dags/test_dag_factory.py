"""The DAG factory: a pipeline DAG and a verification DAG per pipeline, their shapes, and import
errors that name the bad field."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import yaml

REPO_ROOT = Path(__file__).resolve().parents[3]
DAG_FILE = REPO_ROOT / "dags" / "mysql_cdc_pipelines.py"

ENTRY = {"name": "shop_cdc", "leader_conn_id": "shop_leader", "follower_conn_id": "shop_follower",
         "storage_uri": "s3://lake/cdc", "aws_conn_id": "lake_aws", "spark_conn_id": "spark_yarn",
         "include": ["shop.*"], "exclude": ["shop.tmp_*"], "start_position": "earliest",
         "wait_timeout": 20, "poke_interval": 4, "retries": 5, "retry_delay": 10,
         "spark_conf": {"spark.executor.memory": "2g"}}


def pipelines_file(tmp_path: Path, *entries: dict) -> Path:
    path = tmp_path / "pipelines.yaml"
    path.write_text(yaml.safe_dump({"pipelines": list(entries)}))
    return path


def dag_bag(monkeypatch, pipelines: Path | None):
    from airflow.dag_processing.dagbag import DagBag

    if pipelines is None:
        monkeypatch.delenv("CDC_PIPELINES_FILE", raising=False)
    else:
        monkeypatch.setenv("CDC_PIPELINES_FILE", str(pipelines))
    return DagBag(dag_folder=str(DAG_FILE))


def test_two_dags_per_pipeline(monkeypatch, tmp_path):
    bag = dag_bag(monkeypatch, pipelines_file(tmp_path, ENTRY, {**ENTRY, "name": "crm_cdc", "include": ["crm.*"]}))
    assert not bag.import_errors
    assert sorted(bag.dag_ids) == ["crm_cdc", "crm_cdc_verify", "shop_cdc", "shop_cdc_verify"]


def test_dag_shape(monkeypatch, tmp_path):
    dag = dag_bag(monkeypatch, pipelines_file(tmp_path, ENTRY)).get_dag("shop_cdc")
    wait, extract, merge, check = (dag.get_task(t) for t in ("wait_for_changes", "extract_batch", "merge_batch",
                                                             "check_lag"))
    assert wait.downstream_task_ids == {"extract_batch"} and extract.downstream_task_ids == {"merge_batch"}
    assert merge.downstream_task_ids == {"check_lag", "retire_batches"}
    # lag is checked and batches retired after every run, also one whose extract and merge skipped
    # (nothing new)
    assert check.trigger_rule == "none_failed"
    retire = dag.get_task("retire_batches")
    assert (retire.trigger_rule, retire.retain) == ("none_failed", "7d")  # the default retention
    assert (check.max_seconds_behind, check.heartbeat, wait.heartbeat) == (None, False, False)
    assert extract.on_failure_callback and merge.on_failure_callback  # failures go into the history
    assert dag.max_active_runs == 1 and dag.catchup is False
    assert dag.timetable.expression == "*/5 * * * *"
    assert set(dag.params) == {"start", "end", "resnapshot"}

    assert (wait.pipeline, wait.leader_conn_id, wait.follower) == (
        "shop_cdc", "shop_leader", {"kind": "mysql", "conn_id": "shop_follower"})
    assert (wait.timeout, wait.poke_interval) == (20, 4)
    assert (extract.include, extract.exclude, extract.start_position) == (("shop.*",), ("shop.tmp_*",), "earliest")
    assert (extract.aws_conn_id, merge.aws_conn_id, merge.spark_conn_id) == ("lake_aws", "lake_aws", "spark_yarn")
    assert [a.uri for a in extract.outlets] == ["s3://lake/cdc/shop_cdc/batches"]
    for task in (extract, merge):
        assert task.retries == 5
        assert task.retry_delay == timedelta(seconds=10)
        assert task.retry_exponential_backoff == 2.0
    # one quick retry of the wait, whatever the pipeline's retries: it rides out Airflow's
    # stale-event race after a deferral (see build_dag)
    assert (wait.retries, wait.retry_delay.total_seconds()) == (1, 5)
    assert merge.name == "mysql-cdc-merge-shop_cdc"
    # the tables' asset events go through the pipeline's alias (mysql_cdc.table_assets)
    assert [(type(o).__name__, o.name) for o in merge.outlets] == [("AssetAlias", "mysql-cdc/shop_cdc")]
    assert merge.conf == {"spark.executor.memory": "2g"}
    assert merge.manifest_uri.operator is extract  # the extract's XCom, resolved at run time


def test_bad_pipelines_file_is_an_import_error_naming_the_field(monkeypatch, tmp_path):
    bag = dag_bag(monkeypatch, pipelines_file(tmp_path, ENTRY, {**ENTRY, "name": "crm_cdc", "start_position": "soon"}))
    assert bag.dag_ids == []
    (message,) = bag.import_errors.values()
    assert "PipelineConfigError" in message
    assert "pipelines[1] (crm_cdc): field 'start_position'" in message


def test_unknown_field_is_an_import_error(monkeypatch, tmp_path):
    bag = dag_bag(monkeypatch, pipelines_file(tmp_path, {**ENTRY, "shedule": "@daily"}))
    (message,) = bag.import_errors.values()
    assert "unknown field(s) ['shedule']" in message


def test_the_default_pipelines_file_gives_the_demo_dag(monkeypatch):
    bag = dag_bag(monkeypatch, None)
    assert not bag.import_errors
    dag = bag.get_dag("mysql_cdc")
    assert dag.get_task("extract_batch").leader_conn_id == "mysql_leader"
    assert dag.get_task("merge_batch").spark_conn_id == "spark_default"


def test_monitoring_options_reach_the_tasks(monkeypatch, tmp_path):
    entry = {**ENTRY, "heartbeat": True, "max_seconds_behind": 600,
             "verify": {"schedule": "0 3 * * *", "chunk_rows": 5000, "rechecks": 1}}
    bag = dag_bag(monkeypatch, pipelines_file(tmp_path, entry))
    dag, verify_dag = bag.get_dag("shop_cdc"), bag.get_dag("shop_cdc_verify")
    assert dag.get_task("wait_for_changes").heartbeat is True
    check = dag.get_task("check_lag")
    assert (check.max_seconds_behind, check.heartbeat) == (600, True)
    assert "fails past max_seconds_behind (600 s)" in dag.doc_md
    verify = verify_dag.get_task("verify_follower")
    assert verify_dag.timetable.expression == "0 3 * * *"
    assert (verify.options.chunk_rows, verify.options.rechecks, verify.include) == (5000, 1, ("shop.*",))


def test_batch_retention_is_a_task_of_the_run_or_none_and_a_bad_duration_is_named(monkeypatch, tmp_path):
    bag = dag_bag(monkeypatch, pipelines_file(tmp_path, {**ENTRY, "batches": {"retain": "36h"}},
                                              {**ENTRY, "name": "crm_cdc", "batches": {"retain": None}}))
    assert bag.get_dag("shop_cdc").get_task("retire_batches").retain == "36h"
    assert "retire_batches" not in bag.get_dag("crm_cdc").task_ids  # null: every batch is kept
    for retain, said in (("36", "must be a duration such as '7d'"), ("10m", "must be at least 1h")):
        bag = dag_bag(monkeypatch, pipelines_file(tmp_path, {**ENTRY, "batches": {"retain": retain}}))
        (message,) = bag.import_errors.values()
        assert f"field 'batches': retain: {said}" in message


def test_bad_verify_schedule_is_named(monkeypatch, tmp_path):
    bag = dag_bag(monkeypatch, pipelines_file(tmp_path, {**ENTRY, "verify": {"schedule": "nightly"}}))
    (message,) = bag.import_errors.values()
    assert "field 'verify': schedule: 'nightly' is not a cron expression" in message


def test_a_lake_pipeline_gets_a_maintenance_dag_and_carries_its_follower_to_every_task(monkeypatch, tmp_path):
    lake = {**{k: v for k, v in ENTRY.items() if k != "follower_conn_id"},
            "follower": {"kind": "delta", "location": "s3://lake/mysql"},
            "maintenance": {"schedule": "0 4 * * *", "retain_hours": 48}}
    bag = dag_bag(monkeypatch, pipelines_file(tmp_path, lake))
    assert not bag.import_errors
    assert sorted(bag.dag_ids) == ["shop_cdc", "shop_cdc_maintain", "shop_cdc_verify"]
    follower = {"kind": "delta", "location": "s3://lake/mysql", "aws_conn_id": "lake_aws", "changelog": [],
                "features": "standard", "partition_by": {}, "soft_deletes": [], "history": [], "catalog": None}
    assert bag.get_dag("shop_cdc_verify").get_task("verify_follower").follower == follower
    dag = bag.get_dag("shop_cdc")
    for task_id in ("wait_for_changes", "extract_batch", "merge_batch", "check_lag"):
        assert dag.get_task(task_id).follower == follower, task_id
    maintain = bag.get_dag("shop_cdc_maintain")
    task = maintain.get_task("maintain_lake")
    assert maintain.timetable.expression == "0 4 * * *"
    assert (task.follower, task.options.retain_hours, task.spark_conn_id) == (follower, 48, "spark_yarn")
