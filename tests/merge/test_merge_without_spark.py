"""The merge job without Spark (``merge: {spark: when_needed}``, ``merge_batch.py --without-spark``):
what a MySQL follower's kind says needs no Spark is merged by Python alone, with no JVM anywhere;
a step that needs Spark all the same stops the job before it changes anything, and Spark finishes
the batch from where it stopped. Real MariaDB leader and follower, the job as the merge task runs it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from merge_helpers import assert_same_database, run_job_here
from mysql_cdc.contracts import DONE
from mysql_cdc.crash_points import CRASH_ENV
from mysql_cdc.kinds import kind
from mysql_cdc.merge.job import run_merge
from mysql_cdc.merge.netting import DRIVER_NET_ROWS, DRIVER_NET_ROWS_PROPERTY
from mysql_cdc.pipeline_options import SnapshotOptions

MYSQL = kind("mysql")
CHUNKED = SnapshotOptions(split_rows=2, workers=2)


def _tables(db: str) -> list[str]:
    return [f"CREATE DATABASE {db}", f"USE {db}", "CREATE TABLE kv (id INT PRIMARY KEY, v VARCHAR(20))",
            "CREATE TABLE bag (v INT)", "INSERT INTO kv VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd')",
            "INSERT INTO bag VALUES (1), (1), (2)"]


def test_a_copy_then_rows_and_ddl_are_merged_by_python_alone(make_pipeline, leader, follower, tmp_path):
    """A copy with nothing to fold in, then a batch of rows and DDL (keyed and keyless tables, a new
    table, a column added): the kind needs no Spark for either, and the job, with no JVM to start,
    applies both in one run, exactly as Spark's would."""
    pipeline = make_pipeline(start=False)
    db = pipeline.database
    leader.run_sql(_tables(db))
    copy = pipeline.snapshot(options=CHUNKED)
    rows = pipeline.capture([f"USE {db}", "UPDATE kv SET v = 'b2' WHERE id = 2", "DELETE FROM kv WHERE id = 3",
                             "ALTER TABLE kv ADD COLUMN n INT", "INSERT INTO kv VALUES (5, 'e', 5)",
                             "DELETE FROM bag WHERE v = 2", "CREATE TABLE more (id INT PRIMARY KEY)",
                             "INSERT INTO more VALUES (1), (2)"])
    assert [MYSQL.spark_needed(b, DRIVER_NET_ROWS) for b in (copy, rows)] == [None, None]

    result, outcome = run_job_here(pipeline, [copy, rows], tmp_path / "job")

    assert result.returncode == 0 and outcome.error is None, result.stderr[-3000:]
    assert [s.batch_id for s in outcome.summaries] == [copy.batch_id, rows.batch_id]
    assert_same_database(leader, follower, db)
    assert pipeline.checkpoint().position == rows.end
    assert pipeline.staging_tables() == [] and pipeline.scratch_files() == []


def test_a_batch_the_kind_says_needs_spark_is_named_and_what_asks_for_spark_stops_the_job(
        make_pipeline, leader, follower, spark, tmp_path):
    """With ``driverNetRows`` 0 every table needs Spark: the kind says which and why. Run without
    Spark all the same, the job applies the DDL before the first rows, stops there with
    ``spark_refused`` and nothing half done; Spark's run then applies the rest."""
    pipeline = make_pipeline()
    db = pipeline.database
    batch = pipeline.capture(_tables(db))
    assert MYSQL.spark_needed(batch, 0) == (f"{db}.bag, {db}.kv: more than 0 change rows in a segment "
                                            "(spark.mysql_cdc.driverNetRows)")
    before = pipeline.checkpoint()

    result, outcome = run_job_here(pipeline, [batch], tmp_path / "job", conf=[(DRIVER_NET_ROWS_PROPERTY, "0")])

    assert result.returncode == 1 and outcome.spark_refused, result.stderr[-3000:]
    assert outcome.error.startswith("this batch needs Spark after all"), outcome.error
    assert "stopped where Spark was needed" in result.stderr and "SparkRefused" in result.stderr
    # the DDL segments before the rows are applied (each exactly once), the rows are not
    checkpoint = pipeline.checkpoint()
    assert before.position < checkpoint.position < batch.end
    assert follower.scalar(f"SELECT COUNT(*) FROM {db}.kv") == 0
    assert pipeline.staging_tables() == [] and pipeline.scratch_files() == []

    summary = run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets, 0)
    assert summary.segments_applied > 0 and pipeline.checkpoint().position == batch.end
    assert_same_database(leader, follower, db)


def test_a_copy_with_changes_to_fold_in_needs_spark(make_pipeline, leader):
    """A copy whose table changed while its chunks were read carries a catch-up, which Spark's
    executors fold in (``test_snapshot`` makes real ones): the kind says so, naming the table."""
    pipeline = make_pipeline(start=False)
    db = pipeline.database
    leader.run_sql(_tables(db))
    copy = pipeline.snapshot(options=CHUNKED)
    changes = pipeline.capture([f"UPDATE {db}.kv SET v = 'z' WHERE id = 1"])
    kv = next(s for s in copy.segments if s.table == "kv")
    caught_up = replace(copy, segments=tuple(replace(s, catch_up=changes.segments[0].tables[0]) if s is kv else s
                                             for s in copy.segments))

    assert MYSQL.spark_needed(copy, DRIVER_NET_ROWS) is None
    assert MYSQL.spark_needed(caught_up, DRIVER_NET_ROWS) == f"{db}.kv: its copy has changes to fold in"


@pytest.mark.parametrize("point", ["after_staging", "before_commit"])
def test_a_job_killed_without_spark_is_finished_by_its_retry(make_pipeline, leader, follower, tmp_path, point):
    """Killed outright (``os._exit``) before its commit, the job without Spark leaves the follower
    as it was; run again, it applies the batch once."""
    pipeline = make_pipeline()
    db = pipeline.database
    batch = pipeline.capture(_tables(db))
    before = pipeline.checkpoint()

    crashed, _ = run_job_here(pipeline, [batch], tmp_path / "crashed", extra_env={CRASH_ENV: point})
    assert crashed.returncode == 137 and f"{CRASH_ENV}={point}" in crashed.stderr, crashed.stderr[-2000:]
    assert pipeline.checkpoint().position < batch.end and pipeline.checkpoint().position >= before.position

    retried, outcome = run_job_here(pipeline, [batch], tmp_path / "retried")
    assert retried.returncode == 0 and outcome.error is None, retried.stderr[-3000:]
    assert_same_database(leader, follower, db)
    assert pipeline.table_positions().of(db, "kv") is None or pipeline.table_positions().of(db, "kv").state == DONE
