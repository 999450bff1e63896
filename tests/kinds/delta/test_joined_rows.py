"""Row segments separated only by DDL on other tables, merged into a Delta lake as one commit per
table (``merge.joined``): the DDL replayed ahead of the rows before it, the state row moved once
past all of them; a DDL on a table those rows touch stays in its place. A kill at any step of it
(after a DDL replayed ahead, between the tables' commits, before the state row), then a retry: the
lake equals the leader and each table took each of its commits once."""

from __future__ import annotations

import pytest

from lake_helpers import assert_lake_equals_leader, lake_submit
from merge_helpers import job_output
from mysql_cdc.kinds.delta import follower_spec
from mysql_cdc.merge.job import run_merge
from mysql_cdc.merge.joined import JoinedRows, join_segments


def capture_history(pipeline):
    db = pipeline.database
    first = pipeline.capture([
        f"CREATE DATABASE {db}", f"USE {db}",
        "CREATE TABLE orders (id INT PRIMARY KEY, status VARCHAR(8))",
        "CREATE TABLE customers (id INT PRIMARY KEY, name VARCHAR(8))",
        "CREATE TABLE carts (id INT PRIMARY KEY, items INT)",
        "CREATE TABLE bag (v VARCHAR(8))",
        "INSERT INTO orders VALUES (1, 'new'), (2, 'new'), (3, 'new')",
        "INSERT INTO customers VALUES (1, 'ann'), (2, 'bob')",
        "INSERT INTO carts VALUES (1, 1), (2, 2)",
        "INSERT INTO bag VALUES ('x'), ('x')",
    ])
    second = pipeline.capture([
        f"USE {db}",
        "UPDATE orders SET status = 'paid' WHERE id = 1", "INSERT INTO bag VALUES ('y')",
        "ALTER TABLE customers ADD COLUMN tier INT NOT NULL DEFAULT 1",  # ahead of the rows above
        "UPDATE orders SET status = 'sent' WHERE id = 1", "INSERT INTO customers VALUES (3, 'cy', 2)",
        "CREATE TABLE refunds (id INT PRIMARY KEY, amount DECIMAL(8,2))",  # ahead
        "INSERT INTO refunds VALUES (1, 9.50)", "DELETE FROM orders WHERE id = 2", "DELETE FROM bag LIMIT 1",
        "TRUNCATE TABLE carts",  # ahead
        "INSERT INTO carts VALUES (7, 3)", "UPDATE orders SET id = 9 WHERE id = 3",
        "ALTER TABLE orders ADD COLUMN note VARCHAR(8)",  # orders has rows before it: in its place
        "UPDATE orders SET note = 'late' WHERE id = 9",
    ])
    return first, second


def the_plan(pipeline, batch):
    with follower_spec(pipeline.lake, pipeline.options).sink(batch.server_flavor) as sink:
        return join_segments(batch.segments, sink.replays_ahead)


def writes_since(pipeline, before):
    """Per table of the cut, its data commits (MERGE, WRITE, DELETE, UPDATE) after the cut ``before``, oldest first."""
    return {name: [h["operation"] for h in reversed(table.history())
                   if h["operation"] in ("MERGE", "WRITE", "DELETE", "UPDATE") and h["version"] > before.versions.get(name, -1)]
            for name, table in pipeline.cut().tables.items()}


def test_rows_across_ddl_on_other_tables_are_one_commit_per_table(lake_pipeline, spark):
    pipeline = lake_pipeline()
    first, second = capture_history(pipeline)
    run_merge(spark, pipeline.manifest_uri(first), pipeline.secrets)
    before = pipeline.cut()

    plan = the_plan(pipeline, second)
    assert [s.kind for s in second.segments] == ["rows", "ddl", "rows", "ddl", "rows", "ddl", "rows", "ddl", "rows"]
    joined, alter_orders, last_rows = plan
    assert isinstance(joined, JoinedRows) and joined.parts == 7
    assert [d.action for d in joined.ddl_ahead] == ["alter_table", "create_table", "truncate_table"]
    assert alter_orders.statement.startswith("ALTER TABLE orders") and last_rows.kind == "rows"

    summary = run_merge(spark, pipeline.manifest_uri(second), pipeline.secrets)
    assert summary.segments_applied == 9
    assert_lake_equals_leader(pipeline)
    assert pipeline.checkpoint().position == second.end
    writes = writes_since(pipeline, before)
    db = pipeline.database
    # orders: the joined segments' rows in one MERGE, then the rows after its own ALTER (four row
    # segments' changes of orders before it: four MERGEs without the joining)
    assert writes[f"{db}.orders"] == ["MERGE", "MERGE"], writes
    assert writes[f"{db}.bag"] == ["MERGE"] and writes[f"{db}.refunds"] == ["WRITE"], writes
    # the added column's value for the existing rows, then the joined rows
    assert writes[f"{db}.customers"] == ["UPDATE", "MERGE"], writes
    # the TRUNCATE, then the joined rows appended to the emptied table
    assert writes[f"{db}.carts"] == ["DELETE", "WRITE"], writes


@pytest.mark.parametrize("kill_at", ["after_ddl@1", "after_ddl@3", "between_tables@2", "before_checkpoint@1"])
def test_a_kill_inside_the_joined_commit_then_the_retry_finishes(lake_pipeline, spark, tmp_path, kill_at):
    pipeline = lake_pipeline()
    first, second = capture_history(pipeline)
    run_merge(spark, pipeline.manifest_uri(first), pipeline.secrets)
    before = pipeline.cut()

    crashed = lake_submit(pipeline, second, tmp_path / "crash", {"MYSQL_CDC_CRASH_AT": kill_at})
    assert crashed.returncode != 0 and f"MYSQL_CDC_CRASH_AT={kill_at}" in job_output(crashed)
    # the state row did not move: the cut is the one before the batch, every table as it was
    cut = pipeline.cut()
    assert cut.position == first.end and cut.versions == before.versions

    run_merge(spark, pipeline.manifest_uri(second), pipeline.secrets)
    assert_lake_equals_leader(pipeline)
    assert pipeline.checkpoint().position == second.end
    # the retry replayed the DDL again and re-ran the joined commit: nothing was written twice
    db = pipeline.database
    assert writes_since(pipeline, before) == {
        f"{db}.orders": ["MERGE", "MERGE"], f"{db}.bag": ["MERGE"], f"{db}.refunds": ["WRITE"],
        f"{db}.customers": ["UPDATE", "MERGE"], f"{db}.carts": ["DELETE", "WRITE"]}
    assert run_merge(spark, pipeline.manifest_uri(second), pipeline.secrets).noop
