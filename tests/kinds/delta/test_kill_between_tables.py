"""The merge job killed between any two tables' commits of a segment, then retried: the retry
applies what is missing and skips what is there, and the lake equals the leader.

The segment is what an OLTP schema sends: a keyed table with rows (a MERGE), a table created in
the same batch (its first rows appended by delta-rs), a keyless table whose changes insert a row
of NULLs beside a delete (the keyless MERGE of ``tests/fixtures/delta-retry-after-kill``), an
emptied keyed table, and one more keyed table. The kill (``os._exit`` at ``between_tables@n``,
after the n-th table) leaves the cut at the batch before it, whole; the retry (the same batch
again) commits each table once."""

from __future__ import annotations

import pytest

from lake_helpers import assert_lake_equals_leader, lake_submit
from merge_helpers import job_output
from mysql_cdc.merge.job import run_merge

SEGMENT_TABLES = 5


def test_the_segment_has_the_tables_the_kills_step_through(lake_pipeline, spark):
    """The kills below stop after each of the segment's first tables: it has SEGMENT_TABLES."""
    pipeline = lake_pipeline()
    first, second = capture_history(pipeline)
    run_merge(spark, pipeline.manifest_uri(first), pipeline.secrets)
    (rows,) = [s for s in second.segments if s.kind == "rows"][-1:]
    assert len(rows.tables) == SEGMENT_TABLES
    run_merge(spark, pipeline.manifest_uri(second), pipeline.secrets)
    assert_lake_equals_leader(pipeline)


def capture_history(pipeline):
    db = pipeline.database
    first = pipeline.capture([
        f"CREATE DATABASE {db}", f"USE {db}",
        "CREATE TABLE a_keyed (id INT PRIMARY KEY, v VARCHAR(8))",
        "CREATE TABLE c_keyless (code INT, v VARCHAR(8), UNIQUE KEY (code))",
        "CREATE TABLE d_emptied (id INT PRIMARY KEY, n INT)",
        "CREATE TABLE e_keyed (k1 INT, k2 VARCHAR(4), n INT, PRIMARY KEY (k1, k2))",
        "INSERT INTO a_keyed VALUES (1, 'a'), (2, 'b'), (3, 'c')",
        "INSERT INTO c_keyless VALUES (1, 'x'), (2, NULL), (NULL, 'x'), (NULL, 'x'), (NULL, 'y')",
        "INSERT INTO d_emptied VALUES (1, 1), (2, 2)",
        "INSERT INTO e_keyed VALUES (1, 'a', 1), (1, 'b', 2)",
    ])
    second = pipeline.capture([
        f"USE {db}",
        "CREATE TABLE b_new (k INT PRIMARY KEY, note TEXT)",
        "BEGIN",
        "UPDATE a_keyed SET v = 'z' WHERE id = 1", "DELETE FROM a_keyed WHERE id = 2", "UPDATE a_keyed SET id = 9 WHERE id = 3",
        "INSERT INTO b_new VALUES (1, 'first'), (2, 'rows')",
        "INSERT INTO c_keyless VALUES (NULL, NULL)", "DELETE FROM c_keyless WHERE code = 2",
        "UPDATE c_keyless SET v = 'w' WHERE code IS NULL AND v = 'y'",
        "DELETE FROM d_emptied",
        "UPDATE e_keyed SET n = n + 10", "INSERT INTO e_keyed VALUES (2, 'a', 3)",
        "COMMIT",
    ])
    return first, second


@pytest.mark.parametrize("after", range(1, SEGMENT_TABLES))
def test_a_kill_after_any_table_of_a_segment_then_the_retry_finishes(lake_pipeline, spark, tmp_path, after):
    pipeline = lake_pipeline()
    first, second = capture_history(pipeline)
    run_merge(spark, pipeline.manifest_uri(first), pipeline.secrets)
    before = pipeline.cut()

    crashed = lake_submit(pipeline, second, tmp_path / "crash", {"MYSQL_CDC_CRASH_AT": f"between_tables@{after}"})
    assert crashed.returncode != 0 and f"MYSQL_CDC_CRASH_AT=between_tables@{after}" in job_output(crashed)
    # the batch's CREATE TABLE is its own commit, before the row segment: the cut stands there, with
    # every table as it was before the segment (the kill left some tables' own versions past it)
    (rows,) = [s for s in second.segments if s.kind == "rows"]
    cut = pipeline.cut()
    assert cut.position == rows.start
    assert {n: v for n, v in cut.versions.items() if n in before.versions} == before.versions

    run_merge(spark, pipeline.manifest_uri(second), pipeline.secrets)
    assert_lake_equals_leader(pipeline)
    assert pipeline.checkpoint().position == second.end
    # each table took the segment in one commit, though two attempts ran
    for name, table in pipeline.cut().tables.items():
        writes = [h for h in table.history() if h["operation"] in ("MERGE", "WRITE", "DELETE")
                  and h["version"] > before.versions.get(name, -1)]
        assert len(writes) <= 1, (name, writes)
    assert run_merge(spark, pipeline.manifest_uri(second), pipeline.secrets).noop
