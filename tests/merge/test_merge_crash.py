"""Exactly-once under crashes: the real job (spark-submit) is killed at each fault-injection point
(os._exit(137), like a SIGKILL), then retried: the follower equals the leader and the checkpoint
is the batch end, with nothing lost, doubled or left behind."""

import os
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest

from merge_helpers import assert_same_database, job_output, spark_submit, table_names, table_rows
from mysql_cdc.crash_points import CRASH_ENV
from mysql_cdc.kinds.mysql.sink.follower import Follower
from mysql_cdc.contracts import DdlSegment, RowSegment
from mysql_cdc.merge.job import run_merge


def workload(db: str) -> list[str]:
    return [
        f"CREATE DATABASE {db}",
        f"USE {db}",
        "CREATE TABLE kv (id INT PRIMARY KEY, v VARCHAR(20))",
        "CREATE TABLE bag (a INT, b VARCHAR(10))",
        "INSERT INTO kv VALUES (1, 'one'), (2, 'two'), (3, 'three')",
        "INSERT INTO bag VALUES (1, 'x'), (1, 'x'), (2, NULL)",
        "UPDATE kv SET id = 4 WHERE id = 1",
        "DELETE FROM bag WHERE a = 1 LIMIT 1",
        "ALTER TABLE kv ADD COLUMN w INT DEFAULT 5",
        "INSERT INTO kv (id, v) VALUES (5, 'five')",
        "UPDATE bag SET b = 'y' WHERE a = 2",
    ]


@pytest.mark.parametrize("point", ["after_ddl", "after_staging", "before_commit"])
def test_crash_then_retry_applies_exactly_once(point, make_pipeline, leader, follower, spark, tmp_path):
    pipeline = make_pipeline()
    db = pipeline.database
    batch = pipeline.capture(workload(db))
    first_ddl = batch.segments[0]
    first_rows = next(s for s in batch.segments if isinstance(s, RowSegment))
    assert isinstance(first_ddl, DdlSegment)

    crashed = spark_submit(pipeline, batch, tmp_path / "job", {CRASH_ENV: point})

    assert crashed.returncode != 0, job_output(crashed)[-3000:]
    assert f"{CRASH_ENV}={point}: crashing on purpose" in job_output(crashed)
    checkpoint = pipeline.checkpoint()
    if point == "after_ddl":
        # the CREATE DATABASE ran; the checkpoint still says it may not have
        assert (checkpoint.position, checkpoint.pending_ddl_pos) == (first_ddl.start, first_ddl.start)
        assert table_names(follower, db) == [] and db in {r[0] for r in _databases(follower)}
    else:
        # every DDL before the first row segment committed; its rows did not
        assert (checkpoint.position, checkpoint.pending_ddl_pos) == (first_rows.start, None)
        assert table_rows(follower, db, "kv") == {} and table_rows(follower, db, "bag") == {}
        # the first row segment only adds rows: the driver prepared its load files (no staging table
        # is needed), on its own disk, not in the batch store; the killed driver left them there
        assert pipeline.scratch_files() == []
        left = killed_drivers_load_dirs()
        assert any(list(d.rglob("*.tsv")) for d in left), "the crash leaves the prepared load files behind"

    summary = run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets)

    assert not summary.noop
    assert_same_database(leader, follower, db)
    checkpoint = pipeline.checkpoint()
    assert (checkpoint.position, checkpoint.gtid, checkpoint.pending_ddl_pos) == (batch.end, batch.end_gtid, None)
    assert pipeline.staging_tables() == [] and pipeline.scratch_files() == []
    if point != "after_ddl":  # the retry's merge removed what the killed one had left
        assert not any(d.exists() for d in left)


def killed_drivers_load_dirs() -> list[Path]:
    """Load-file directories of merge drivers no longer running (their pid is in the name)."""
    found = []
    for directory in Path(tempfile.gettempdir()).glob("mysql-cdc-loads-*-*"):
        pid = int(directory.name.split("-")[3])
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            found.append(directory)
    return found


def _databases(server):
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW DATABASES")
            return cur.fetchall()
    finally:
        conn.close()


def test_pending_ddl_that_never_ran_is_run_on_retry(make_pipeline, leader, follower, spark):
    """A crash between committing the pending-DDL marker and running the DDL: the fingerprint is
    unchanged, so the retry runs the statement (once) instead of skipping it."""
    pipeline = make_pipeline()
    batch = pipeline.capture(workload(pipeline.database))
    first_ddl = batch.segments[0]
    with Follower(pipeline.follower_settings) as target:
        checkpoint = target.checkpoint(pipeline.name)
        target.advance(checkpoint, replace(
            checkpoint, position=first_ddl.start, pending_ddl_pos=first_ddl.start,
            pending_ddl_fingerprint=target.fingerprint(first_ddl.targets),
        ))

    run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets)

    assert_same_database(leader, follower, pipeline.database)
    assert (pipeline.checkpoint().position, pipeline.checkpoint().pending_ddl_pos) == (batch.end, None)
