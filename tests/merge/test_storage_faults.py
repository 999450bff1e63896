"""The batch store failing as S3 does (500 and 503 answers, a connection reset before an answer or
in the middle of an object) during the extract's uploads and the merge's reads: through a
fault-injecting proxy in front of the suite's moto (``services.s3_fault_proxy``), on loopback.

A failure a retry can fix is retried inside the step, with backoff, and logged; a failure that
outlasts the retries fails the step, and the next try finishes it. Either way the follower ends
equal to the leader, nothing lost or doubled."""

from __future__ import annotations

import logging

import pytest

from merge_helpers import assert_same_database
from mysql_cdc.merge.job import run_merge
from mysql_cdc.merge.netting import DRIVER_NET_ROWS
from mysql_cdc.storage import STORAGE_ATTEMPTS
from services.s3_fault_proxy import FaultRule

BATCH_FILES = r"/batches/[^/]+/seg-"  # a batch's Parquet files and packs, not its manifest
MANIFEST = r"/manifest\.json"


def workload(db: str) -> list[str]:
    return [f"CREATE DATABASE {db}", f"USE {db}", "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(16))",
            "CREATE TABLE bag (a INT, b VARCHAR(8))", "INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c')",
            "INSERT INTO bag VALUES (1, 'x'), (1, 'x')", "UPDATE t SET v = 'B' WHERE id = 2", "DELETE FROM t WHERE id = 3"]


@pytest.mark.parametrize("driver_rows", [DRIVER_NET_ROWS, 0], ids=["read-on-driver", "read-by-executors"])
def test_failures_a_retry_fixes_are_retried_and_logged(make_pipeline, faulty_bucket, spark, caplog, driver_rows):
    bucket, proxy = faulty_bucket
    pipeline = make_pipeline(bucket)
    caplog.set_level(logging.WARNING, logger="mysql_cdc.storage")
    proxy.add(FaultRule("503", "PUT", BATCH_FILES, times=2), FaultRule("reset", "PUT", BATCH_FILES),
              FaultRule("500", "PUT", MANIFEST))
    batch = pipeline.capture(workload(pipeline.database))
    assert [f for _, _, f in proxy.injected] == ["503", "503", "reset", "500"]
    retried = [r.getMessage() for r in caplog.records if "retrying in" in r.getMessage()]
    assert len(retried) == 4 and retried[0].startswith(f"object storage: PUT {pipeline.storage.uri}/")
    assert "failed (503 SlowDown)" in retried[0] and "failed (500 InternalError)" in retried[-1]

    proxy.clear()
    proxy.add(FaultRule("cut", "GET", BATCH_FILES), FaultRule("503", "GET", BATCH_FILES),
              FaultRule("reset", None, MANIFEST))
    run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets, driver_rows)
    assert sorted(f for _, _, f in proxy.injected) == ["503", "cut", "reset"]
    assert_same_database(pipeline.leader, pipeline.follower, pipeline.database)
    assert pipeline.checkpoint().position == batch.end


def test_a_failure_that_outlasts_the_retries_fails_the_merge_and_the_next_try_finishes(make_pipeline, faulty_bucket,
                                                                                         spark):
    bucket, proxy = faulty_bucket
    pipeline = make_pipeline(bucket)
    db = pipeline.database
    run_merge(spark, pipeline.manifest_uri(pipeline.capture(workload(db))), pipeline.secrets)
    batch = pipeline.capture([f"USE {db}", "INSERT INTO t VALUES (4, 'd')", "INSERT INTO bag VALUES (1, 'x')",
                              "UPDATE t SET v = 'A' WHERE id = 1"])  # one row segment: one commit
    before = pipeline.checkpoint()
    proxy.add(FaultRule("503", "GET", BATCH_FILES, times=None))
    with pytest.raises(Exception, match="SlowDown"):
        run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets)
    assert len(proxy.injected) >= STORAGE_ATTEMPTS  # every try of one read, then the merge gave up
    assert pipeline.checkpoint() == before

    proxy.clear()
    run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets)
    assert_same_database(pipeline.leader, pipeline.follower, pipeline.database)
    assert pipeline.checkpoint().position == batch.end


def test_a_bucket_that_refuses_writes_fails_the_extract_at_once(make_pipeline, faulty_bucket):
    """403 AccessDenied is no failure a retry fixes: one try, and the error says what S3 said."""
    bucket, proxy = faulty_bucket
    pipeline = make_pipeline(bucket)
    proxy.add(FaultRule("403", "PUT", "", times=None))
    with pytest.raises(Exception, match="AccessDenied"):
        pipeline.capture(workload(pipeline.database))
    assert len(proxy.injected) == 1
