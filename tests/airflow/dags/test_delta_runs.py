"""A pipeline whose follower is a Delta Lake, run as users run it: real DAG runs (the sensor, the
extract, the merge task's spark-submit with the Delta jars, check_lag), a real MariaDB leader, the
lake on file://. The first run copies the existing tables, the next streams; after each run the
lake at its consistent cut equals the leader, and the pipeline's figures come from the lake's state
(read with delta-rs) like any other pipeline's."""

from __future__ import annotations

import os
from decimal import Decimal
from pathlib import Path

from lake_helpers import assert_lake_equals_leader, changelog
from spark_under_test import SPARK
from mysql_cdc.pipeline_config import load_pipelines
from mysql_cdc.ui.data import read_pipeline

SUCCESS = "success"


def test_snapshot_then_stream_into_delta_through_dag_runs(dag_runner, lake_dag, leader, asset_events):
    name, lake = lake_dag
    db = lake.database
    first = dag_runner.run(name)
    assert first.tasks["merge_batch"] == SUCCESS, first.log_file
    assert_lake_equals_leader(lake)
    # submitted to the Spark under test (another line than the venv's under `make test-spark`),
    # whose version the merge task read before it chose that line's Delta jars
    assert f"Spark {SPARK.version} (" in Path(first.log_file).read_text()

    leader.run_sql([f"USE {db}", "BEGIN", "UPDATE t SET v = 'c' WHERE id = 1", "INSERT INTO t VALUES (3, 'd')",
                    "INSERT INTO pet VALUES ('Buffy', 'dog')", "COMMIT"])
    second = dag_runner.run(name)
    assert second.tasks["merge_batch"] == SUCCESS and second.tasks["check_lag"] == SUCCESS, second.log_file
    assert_lake_equals_leader(lake)

    (config,) = load_pipelines(Path(os.environ["CDC_PIPELINES_FILE"]))
    view = read_pipeline(config).to_json()
    assert view["error"] is None and view["checkpoint_position"] == str(lake.checkpoint().position)
    assert [b["kind"] for b in [view["last_batch"]]] == ["stream"] and view["last_batch"]["status"] == "merged"
    assert view["table_versions"] == lake.cut().versions and set(view["table_versions"]) == {f"{db}.t", f"{db}.pet"}

    # an asset event per table each merge changed, the Delta table's location its URI
    events = asset_events(f"mysql-cdc/{name}")
    uri = {table: f"{lake.lake.uri}/{db}/{table}" for table in ("t", "pet")}
    assert sorted((u, e["table"], e["copied"]) for u, e in events[:2]) == sorted(
        [(uri["t"], f"{db}.t", True), (uri["pet"], f"{db}.pet", True)])
    streamed = {e["table"]: e for _, e in events[2:]}
    assert set(streamed) == {f"{db}.t", f"{db}.pet"} and len(events) == 4
    assert {k: streamed[f"{db}.t"][k] for k in ("inserted", "updated", "deleted", "copied", "ddl")} == {
        "inserted": 1, "updated": 1, "deleted": 0, "copied": False, "ddl": []}
    assert streamed[f"{db}.pet"]["inserted"] == 1  # a keyless table: the copy added
    assert all(e["position"] == str(lake.checkpoint().position) and e["pipeline"] == name for e in streamed.values())
    assert {t: e["version"] for t, e in streamed.items()} == lake.cut().versions


def test_changes_delta_cannot_take_exactly_copy_the_table_again_within_the_run(dag_runner, lake_dag, leader):
    """A type change that is no exact widening, and a column whose existing rows get a value the
    leader computed: the run copies those tables (and catches every table up to the copy) instead
    of stopping; an exact widening is merged as usual."""
    name, lake = lake_dag
    db = lake.database
    assert dag_runner.run(name).tasks["merge_batch"] == SUCCESS
    leader.run_sql([f"USE {db}", "ALTER TABLE t ADD COLUMN n INT DEFAULT 5", "UPDATE t SET n = 6 WHERE id = 2"])
    assert dag_runner.run(name).tasks["merge_batch"] == SUCCESS  # merged: an INT column, in the changelog too
    leader.run_sql([f"USE {db}", "ALTER TABLE t MODIFY n DECIMAL(5,1)", "UPDATE t SET n = 7.5 WHERE id = 1",
                    "ALTER TABLE pet ADD COLUMN added DATETIME(6) DEFAULT CURRENT_TIMESTAMP(6)",
                    "INSERT INTO pet (name, species) VALUES ('Rex', 'dog')"])

    run = dag_runner.run(name)

    assert run.tasks["merge_batch"] == SUCCESS and run.tasks["check_lag"] == SUCCESS, run.log_file
    assert f"{db}.t: n changed type from INT to DECIMAL(5,1)" in run.log and "copying it again in this run" in run.log
    assert f"{db}.pet: ADD COLUMN added gives the existing rows a value the leader computed" in run.log
    assert_lake_equals_leader(lake)  # the old rows' `added`: the leader's own timestamps, exactly

    leader.run_sql([f"USE {db}", "ALTER TABLE t MODIFY id BIGINT", "UPDATE t SET n = 8.5 WHERE id = 2"])
    widened = dag_runner.run(name)
    assert widened.tasks["merge_batch"] == SUCCESS and "copying it again" not in widened.log, widened.log_file
    assert_lake_equals_leader(lake)
    # t's changelog: the INT values of n kept as n__int, the DECIMAL ones in n; id widened to BIGINT
    logged = changelog(lake, "t")
    assert [(r["_op"], r["id"], r.get("n__int"), r["n"]) for r in logged] == [
        ("U", 2, 6, None), ("U", 2, None, Decimal("8.5"))]
    assert logged[0]["_before"]["n__int"] == 5 and logged[1]["_before"]["n"] == Decimal("6.0")
