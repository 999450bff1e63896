"""The seed demo (flvDb.pet, a table without a key) end to end: real leader -> batch on the real
S3 endpoint -> spark-submit merge -> follower equals leader."""

from demo_workload import a_change, seed_statements
from merge_helpers import assert_same_database, job_output, spark_submit


def test_seed_demo_through_s3_and_spark_submit(make_pipeline, s3_bucket, leader, follower, tmp_path):
    pipeline = make_pipeline(s3_bucket)
    db = pipeline.database
    batch = pipeline.capture(seed_statements(db))
    assert pipeline.manifest_uri(batch).startswith("s3://")

    result = spark_submit(pipeline, batch, tmp_path / "job")

    assert result.returncode == 0, job_output(result)[-4000:]
    assert_same_database(leader, follower, db)
    checkpoint = pipeline.checkpoint()
    assert (checkpoint.position, checkpoint.gtid, checkpoint.batch_id) == (batch.end, batch.end_gtid, batch.batch_id)
    assert checkpoint.pending_ddl_pos is None
    log = job_output(result)
    assert f"merged {db}.pet: " in log and " changes in -> " in log  # the per-table report
    assert pipeline.staging_tables() == [] and pipeline.scratch_files() == []

    # the change `make airflow` tells the user to make, carried the same way
    change = pipeline.capture([a_change(db)])
    assert change.row_count == 1
    result = spark_submit(pipeline, change, tmp_path / "change")
    assert result.returncode == 0, job_output(result)[-4000:]
    assert f"merged {db}.pet: 1 changes in -> 1 inserted, 0 updated, 0 deleted" in job_output(result)
    assert_same_database(leader, follower, db)
