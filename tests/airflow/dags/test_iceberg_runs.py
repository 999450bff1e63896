"""A pipeline whose follower is an Iceberg catalog, run as users run it: real DAG runs (the sensor,
the extract, the merge task's spark-submit, check_lag; the verify DAG in test_lake_verify_runs.py), a real MariaDB leader, the
catalog a database of the session's MariaDB follower server reached through its Airflow connection,
the warehouse on file://. After each run the catalog's tables at the consistent cut equal the
leader (read with pyiceberg), and the pipeline's figures come from the state beside the catalog."""

from __future__ import annotations

import os
from pathlib import Path

from iceberg_helpers import assert_iceberg_equals_leader
from mysql_cdc.pipeline_config import load_pipelines
from mysql_cdc.ui.data import read_pipeline

SUCCESS = "success"


def test_snapshot_then_stream_into_iceberg_through_dag_runs(dag_runner, iceberg_dag, leader, asset_events):
    name, iceberg = iceberg_dag
    db = iceberg.database
    first = dag_runner.run(name)
    assert first.tasks["merge_batch"] == SUCCESS, first.log_file
    assert_iceberg_equals_leader(iceberg)

    leader.run_sql([f"USE {db}", "BEGIN", "UPDATE t SET v = 'c' WHERE id = 1", "INSERT INTO t VALUES (3, 'd')",
                    "INSERT INTO pet VALUES ('Buffy', 'dog')", "COMMIT", "ALTER TABLE t ADD COLUMN n INT DEFAULT 5",
                    "UPDATE t SET n = 6 WHERE id = 2"])
    second = dag_runner.run(name)
    assert second.tasks["merge_batch"] == SUCCESS and second.tasks["check_lag"] == SUCCESS, second.log_file
    assert_iceberg_equals_leader(iceberg)

    (config,) = load_pipelines(Path(os.environ["CDC_PIPELINES_FILE"]))
    view = read_pipeline(config).to_json()
    assert view["error"] is None and view["checkpoint_position"] == str(iceberg.checkpoint().position)
    assert view["last_batch"]["kind"] == "stream" and view["last_batch"]["status"] == "merged"
    assert view["table_versions"] == iceberg.cut() and set(view["table_versions"]) == {f"{db}.t", f"{db}.pet"}

    # an asset event per table each merge changed, named as the catalog names the table
    events = asset_events(f"mysql-cdc/{name}")
    streamed = {e["table"]: (uri, e) for uri, e in events[2:]}
    assert {t: uri for t, (uri, _) in streamed.items()} == {
        f"{db}.t": f"iceberg://lake/{db}/t", f"{db}.pet": f"iceberg://lake/{db}/pet"}
    assert {t: e["version"] for t, (_, e) in streamed.items()} == iceberg.cut()


def test_changes_iceberg_cannot_take_exactly_copy_the_table_again_within_the_run(dag_runner, iceberg_dag, leader):
    """A type change that is no Iceberg widening, and a column whose existing rows get a value the
    leader computed: the run copies those tables instead of stopping; a widening is made in place."""
    name, iceberg = iceberg_dag
    db = iceberg.database
    assert dag_runner.run(name).tasks["merge_batch"] == SUCCESS
    leader.run_sql([f"USE {db}", "ALTER TABLE t ADD COLUMN n INT", "UPDATE t SET n = 6 WHERE id = 2",
                    "ALTER TABLE t MODIFY n DECIMAL(5,1)", "UPDATE t SET n = 7.5 WHERE id = 1",
                    "ALTER TABLE pet ADD COLUMN added DATETIME(6) DEFAULT CURRENT_TIMESTAMP(6)",
                    "INSERT INTO pet (name, species) VALUES ('Rex', 'dog')"])

    run = dag_runner.run(name)

    assert run.tasks["merge_batch"] == SUCCESS and run.tasks["check_lag"] == SUCCESS, run.log_file
    assert f"{db}.t: n changed type from int to decimal(5, 1)" in run.log and "copying it again in this run" in run.log
    assert f"{db}.pet: ADD COLUMN added gives the existing rows a value the leader computed" in run.log
    assert_iceberg_equals_leader(iceberg)

    leader.run_sql([f"USE {db}", "ALTER TABLE t MODIFY id BIGINT", "UPDATE t SET n = 8.5 WHERE id = 2"])
    widened = dag_runner.run(name)
    assert widened.tasks["merge_batch"] == SUCCESS and "copying it again" not in widened.log, widened.log_file
    assert_iceberg_equals_leader(iceberg)
    types = {f.name: str(f.field_type) for f in iceberg.catalog.open().load_table((db, "t")).schema().fields}
    assert types == {"id": "long", "v": "string", "n": "decimal(5, 1)"}
