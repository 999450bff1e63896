"""The documented reader of an Iceberg follower's consistent cut (``kinds.iceberg.cut``): every
table at the snapshot the state records with the checkpoint, the leader's rows at one transaction
boundary, and still so after later commits moved the tables' current snapshots."""

from __future__ import annotations

from iceberg_helpers import assert_iceberg_equals_leader
from mysql_cdc.kinds.iceberg.cut import read_cut
from mysql_cdc.merge.job import run_merge


def test_the_cut_reads_every_table_at_the_checkpoint_while_the_tables_move_on(iceberg_pipeline, spark):
    pipeline = iceberg_pipeline()
    db = pipeline.database
    batch = pipeline.capture([f"CREATE DATABASE {db}", f"USE {db}", "CREATE TABLE a (id INT PRIMARY KEY, v INT)",
                              "CREATE TABLE b (id INT PRIMARY KEY, v INT)",
                              "BEGIN", "INSERT INTO a VALUES (1, 10)", "INSERT INTO b VALUES (1, -10)", "COMMIT"])
    run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets)
    assert_iceberg_equals_leader(pipeline)

    cut = read_cut(pipeline.catalog, pipeline.name)
    assert cut.position == pipeline.checkpoint().position == batch.end
    assert cut.snapshots == pipeline.cut() and set(cut.snapshots) == {f"{db}.a", f"{db}.b"}
    # a later commit of one table (a merge between its tables' commits and the state's move)
    # moves that table's current snapshot, not the cut
    table = cut.table(f"{db}.a")
    table.delete("id = 1")
    assert cut.table(f"{db}.a").scan().to_arrow().num_rows == 0
    assert cut.read(f"{db}.a").to_pylist() == [{"id": 1, "v": 10}]
    assert cut.read(f"{db}.b").to_pylist() == [{"id": 1, "v": -10}]
    assert cut.spark_sql() == [
        f"CREATE OR REPLACE TEMP VIEW `{db}__a` AS SELECT * FROM `lake`.`{db}`.`a` VERSION AS OF {cut.snapshots[f'{db}.a']}",
        f"CREATE OR REPLACE TEMP VIEW `{db}__b` AS SELECT * FROM `lake`.`{db}`.`b` VERSION AS OF {cut.snapshots[f'{db}.b']}",
    ]
