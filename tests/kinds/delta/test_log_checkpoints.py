"""The lake's tables and the pipeline's state tables checkpoint their Delta logs every
``CHECKPOINT_INTERVAL`` commits (opening a table reads every commit since its last checkpoint:
delta-rs's own default is 100), and the maintenance job gives the interval to a table made without
it. Read with delta-rs, from the tables' logs."""

from __future__ import annotations

from pathlib import Path

from deltalake import DeltaTable

from lake_helpers import assert_lake_equals_leader
from mysql_cdc.kinds.delta import KIND
from mysql_cdc.kinds.delta.state.location import LakeLocation
from mysql_cdc.kinds.delta.state.tables import CHECKPOINT, CHECKPOINT_INTERVAL
from mysql_cdc.merge.job import run_merge


def checkpoints(uri: str) -> list[int]:
    """The versions of the table's log checkpoints."""
    log = Path(uri.removeprefix("file://")) / "_delta_log"
    return sorted(int(f.name.split(".")[0]) for f in log.glob("*.checkpoint.parquet"))


def test_tables_and_state_checkpoint_their_logs_every_interval_and_maintenance_sets_it(lake_pipeline, spark):
    pipeline = lake_pipeline()
    db = pipeline.database
    location = LakeLocation(pipeline.lake)
    first = pipeline.capture([f"CREATE DATABASE {db}", f"USE {db}", "CREATE TABLE kv (id INT PRIMARY KEY, n INT)",
                              "INSERT INTO kv VALUES (1, 0)"])
    run_merge(spark, pipeline.manifest_uri(first), pipeline.secrets)
    interval = int(CHECKPOINT_INTERVAL)
    for n in range(interval + 1):  # a commit of kv and of the state row each (delta-rs's, in the driver)
        batch = pipeline.capture([f"UPDATE {db}.kv SET n = {n + 1}"])
        run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets)
    assert_lake_equals_leader(pipeline)
    table, state = location.table_uri(db, "kv"), location.state_uri(pipeline.name, CHECKPOINT)
    for uri in (table, state):
        opened = DeltaTable(uri)
        assert opened.metadata().configuration["delta.checkpointInterval"] == CHECKPOINT_INTERVAL, uri
        assert opened.version() > interval and checkpoints(uri), (uri, opened.version(), checkpoints(uri))
        assert opened.version() - checkpoints(uri)[-1] <= interval

    DeltaTable(table).alter.set_table_properties({"delta.checkpointInterval": "100"})  # a table made before
    KIND.maintain(spark, pipeline.secrets.sink.settings, pipeline.name, 1)
    assert DeltaTable(table).metadata().configuration["delta.checkpointInterval"] == CHECKPOINT_INTERVAL
    assert_lake_equals_leader(pipeline)
