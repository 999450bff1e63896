"""Replays, gaps and bad input: what was applied is never applied twice, what is missing is an
error naming the positions, and an impossible merge leaves the follower untouched."""

import pytest

from merge_helpers import (
    assert_same_database, error_line, job_output, leader_position, snapshot, spark_submit,
)
from mysql_cdc.merge.errors import FollowerDivergedError, FollowerSchemaError
from mysql_cdc.contracts import MissingCheckpointError, RangeGapError
from mysql_cdc.storage import StorageError
from mysql_cdc.contracts import RowSegment
from mysql_cdc.merge.job import run_merge


def setup_statements(db: str) -> list[str]:
    return [
        f"CREATE DATABASE {db}",
        f"USE {db}",
        "CREATE TABLE kv (id INT PRIMARY KEY, v VARCHAR(20))",
        "CREATE TABLE bag (a INT, b VARCHAR(10))",
        "INSERT INTO kv VALUES (1, 'one'), (2, 'two')",
        "INSERT INTO bag VALUES (1, 'x'), (1, 'x')",
    ]


def more_rows(db: str, round_: int = 0) -> list[str]:
    return [
        f"USE {db}",
        f"INSERT INTO kv VALUES ({3 + round_}, 'new')",
        f"UPDATE kv SET v = 'uno{round_}' WHERE id = 1",
        "INSERT INTO bag VALUES (1, 'x')",
        "DELETE FROM bag WHERE b = 'x' LIMIT 1",
        "INSERT INTO bag VALUES (NULL, NULL)",
    ]


def follower_state(pipeline):
    """Follower tables and the full checkpoint row (updated_at included: a no-op writes nothing)."""
    return snapshot(pipeline.follower, pipeline.database), pipeline.checkpoint()


def seeded(make_pipeline, spark):
    """A pipeline whose setup batch (kv, bag) is merged: the follower equals the leader."""
    pipeline = make_pipeline()
    first = pipeline.capture(setup_statements(pipeline.database))
    run_merge(spark, pipeline.manifest_uri(first), pipeline.secrets)
    return pipeline


def refused_unchanged(spark, pipeline, batch, error: type, match: str) -> Exception:
    """Merging ``batch`` raises ``error`` and leaves the follower as it was; returns the error."""
    before = follower_state(pipeline)
    with pytest.raises(error, match=match) as raised:
        run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets)
    assert follower_state(pipeline) == before
    return raised.value


def test_same_batch_applied_twice_changes_nothing(make_pipeline, leader, follower, spark, tmp_path):
    pipeline = make_pipeline()
    batch = pipeline.capture(setup_statements(pipeline.database) + more_rows(pipeline.database))
    run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets)
    assert_same_database(leader, follower, pipeline.database)
    before = follower_state(pipeline)

    again = run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets)
    assert again.noop and again.segments_applied == 0
    assert follower_state(pipeline) == before

    # the job's CLI: a no-op replay exits 0 (and never needs to start Spark)
    result = spark_submit(pipeline, batch, tmp_path / "job")
    assert result.returncode == 0, job_output(result)[-3000:]
    assert "nothing to do" in job_output(result)
    assert follower_state(pipeline) == before


def test_gap_is_an_error_naming_both_positions(make_pipeline, spark, tmp_path):
    pipeline = make_pipeline()
    first = pipeline.capture(setup_statements(pipeline.database))
    second = pipeline.capture(more_rows(pipeline.database))
    before = follower_state(pipeline)

    with pytest.raises(RangeGapError) as error:
        run_merge(spark, pipeline.manifest_uri(second), pipeline.secrets)
    assert str(first.start) in str(error.value) and str(second.start) in str(error.value)
    assert follower_state(pipeline) == before

    result = spark_submit(pipeline, second, tmp_path / "job")
    assert result.returncode == 1
    line = error_line(result)
    assert "gap" in line and str(first.start) in line and str(second.start) in line
    assert follower_state(pipeline) == before


def test_overlapping_batch_applies_only_what_follows_the_checkpoint(make_pipeline, leader, follower, spark):
    pipeline = make_pipeline()
    db = pipeline.database
    first = pipeline.capture(setup_statements(db))
    run_merge(spark, pipeline.manifest_uri(first), pipeline.secrets)
    second = pipeline.capture(more_rows(db))
    run_merge(spark, pipeline.manifest_uri(second), pipeline.secrets)
    leader.run_sql(more_rows(db, 1))
    # re-extracted from an older start: the checkpoint falls inside its row segment, whose rows
    # before the checkpoint must not be applied twice (the keyless table would show doubles)
    overlapping = pipeline.extract(first.end, leader_position(pipeline.leader_settings))
    assert any(isinstance(s, RowSegment) and s.start < second.end < s.end for s in overlapping.segments)

    run_merge(spark, pipeline.manifest_uri(overlapping), pipeline.secrets)

    assert_same_database(leader, follower, db)
    assert pipeline.checkpoint().position == overlapping.end


def test_batch_ending_with_uncaptured_transactions_moves_the_checkpoint_to_its_end(
        make_pipeline, leader, spark, unique_name):
    pipeline = make_pipeline()
    other = f"{unique_name}_other"  # not captured: the pipeline's filter is <database>.*
    batch = pipeline.capture(setup_statements(pipeline.database) + [
        "ALTER TABLE kv ADD COLUMN w INT",  # a DDL segment last: it ends where its statement ends
        f"CREATE DATABASE {other}", f"CREATE TABLE {other}.t (a INT)", f"INSERT INTO {other}.t VALUES (1)",
    ])
    assert batch.segments[-1].end < batch.end
    run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets)
    checkpoint = pipeline.checkpoint()
    assert (checkpoint.position, checkpoint.gtid, checkpoint.batch_id) == (batch.end, batch.end_gtid, batch.batch_id)


def test_missing_checkpoint_is_a_clear_error(make_pipeline, follower, spark):
    pipeline = make_pipeline()
    batch = pipeline.capture(setup_statements(pipeline.database))
    follower.run_sql([f"DELETE FROM _mysql_cdc.checkpoint WHERE pipeline = '{pipeline.name}'"])
    with pytest.raises(MissingCheckpointError, match=f"no checkpoint for pipeline '{pipeline.name}'"):
        run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets)


def test_missing_manifest_is_a_clear_error(make_pipeline, spark):
    pipeline = make_pipeline()
    batch = pipeline.capture(setup_statements(pipeline.database))
    pipeline.store.delete_prefix(f"{batch.prefix}/manifest.json")
    with pytest.raises(StorageError, match="manifest.json does not exist"):
        run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets)


def test_missing_follower_table_names_it_and_the_fix(make_pipeline, leader, spark, unique_name):
    pipeline = make_pipeline()
    db = pipeline.database
    leader.run_sql([f"CREATE DATABASE {db}", f"CREATE TABLE {db}.orders (id INT PRIMARY KEY)"])
    pipeline.start()  # the pipeline begins after the CREATE: the follower was never seeded
    batch = pipeline.capture([f"INSERT INTO {db}.orders VALUES (1)"])
    with pytest.raises(FollowerSchemaError, match=rf"`{db}`.`orders` does not exist: copy it from the leader with a resnapshot run"):
        run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets)
    assert pipeline.checkpoint().position == batch.start


def test_follower_columns_that_differ_are_a_clear_error(make_pipeline, follower, spark):
    pipeline = seeded(make_pipeline, spark)
    db = pipeline.database
    follower.run_sql([f"ALTER TABLE {db}.kv ADD COLUMN local_note TEXT, MODIFY v TEXT"])
    second = pipeline.capture(more_rows(db))
    error = refused_unchanged(spark, pipeline, second, FollowerSchemaError, f"columns of `{db}`.`kv` in batch differ")
    assert "only on the follower: ['local_note']" in str(error)
    assert "v (varchar in the batch, text on the follower)" in str(error)


def test_keyed_row_missing_on_the_follower_is_detected_and_rolled_back(make_pipeline, follower, spark):
    pipeline = seeded(make_pipeline, spark)
    db = pipeline.database
    follower.run_sql([f"DELETE FROM {db}.kv WHERE id = 2"])  # written outside the pipeline
    second = pipeline.capture([f"INSERT INTO {db}.bag VALUES (7, 'z')", f"UPDATE {db}.kv SET v = 'dos' WHERE id = 2"])
    # bag's insert, applied first in the transaction, is rolled back too
    refused_unchanged(spark, pipeline, second, FollowerDivergedError, "re-copy it with a resnapshot run")


def test_keyed_row_already_on_the_follower_is_detected_and_rolled_back(make_pipeline, follower, spark):
    """LOAD DATA LOCAL skips a row whose key exists (a warning, not an error): the merge turns
    that into a divergence error and rolls the whole segment back."""
    pipeline = seeded(make_pipeline, spark)
    db = pipeline.database
    follower.run_sql([f"INSERT INTO {db}.kv VALUES (9, 'local')"])  # written outside the pipeline
    second = pipeline.capture([f"INSERT INTO {db}.bag VALUES (7, 'z')", f"INSERT INTO {db}.kv VALUES (9, 'nine')"])
    refused_unchanged(spark, pipeline, second, FollowerDivergedError,
                      "hit an existing key .*Duplicate entry '9'.*resnapshot")


def test_keyless_copies_missing_on_the_follower_are_detected(make_pipeline, follower, spark):
    pipeline = seeded(make_pipeline, spark)
    db = pipeline.database
    follower.run_sql([f"DELETE FROM {db}.bag LIMIT 1"])  # one of the two (1, 'x') rows
    second = pipeline.capture([f"DELETE FROM {db}.bag WHERE a = 1"])
    refused_unchanged(spark, pipeline, second, FollowerDivergedError,
                      "found 1 rows where the leader's changes imply 2")
