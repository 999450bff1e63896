"""A lake on an S3 that fails as S3 does (500 and 503 answers, connections reset before an answer
or in the middle of one) while the merge reads and commits Delta tables, through delta-rs (small
keyed tables, empty tables, the state tables) and through Spark's S3A (a keyless table's MERGE,
CREATE TABLE): a fault-injecting proxy in front of the suite's moto (``services.s3_fault_proxy``).

Each client retries what a retry fixes (set explicitly: ``LakeLocation.storage_options`` and
``hadoop_conf``); what outlasts the retries fails the merge, and its retry finishes it exactly
once (a keyless table would show a row applied twice)."""

from __future__ import annotations

import pytest

from lake_helpers import assert_lake_equals_leader
from mysql_cdc.merge.job import run_merge
from services.s3_fault_proxy import FaultRule

DELTA_LOG = r"/_delta_log/"
DATA_FILES = r"/part-[^/]*\.parquet"
COMMITS = r"/_delta_log/\d+\.json"


def first_statements(db: str) -> list[str]:
    return [f"CREATE DATABASE {db}", f"USE {db}", "CREATE TABLE keyed (id INT PRIMARY KEY, v VARCHAR(16))",
            "CREATE TABLE bag (a INT, b VARCHAR(8))", "INSERT INTO keyed VALUES (1, 'a'), (2, 'b'), (3, 'c')",
            "INSERT INTO bag VALUES (1, 'x'), (1, 'x'), (2, 'y')"]


def changes(db: str, n: int) -> list[str]:
    return [f"USE {db}", f"UPDATE keyed SET v = 'v{n}' WHERE id = 1", f"DELETE FROM keyed WHERE id = {n + 1}",
            f"INSERT INTO keyed VALUES ({n + 10}, 'new')", "DELETE FROM bag WHERE a = 1 LIMIT 1",
            f"INSERT INTO bag VALUES ({n}, 'z')"]


def test_commits_through_a_failing_s3_are_retried_and_the_lake_is_exact(lake_pipeline, faulty_bucket, spark):
    bucket, proxy = faulty_bucket
    pipeline = lake_pipeline(bucket=bucket)
    db = pipeline.database
    transient = (FaultRule("503", "PUT", DELTA_LOG, times=2), FaultRule("reset", "PUT", DELTA_LOG),
                 FaultRule("500", "GET", DATA_FILES), FaultRule("cut", "GET", DELTA_LOG),
                 # a commit that lands and whose answer is lost: its retry must find it, not commit again
                 FaultRule("cut", "PUT", COMMITS))
    proxy.add(*transient)
    first = pipeline.capture(first_statements(db))
    run_merge(spark, pipeline.manifest_uri(first), pipeline.secrets)
    assert {(m, f) for m, _, f in proxy.injected} >= {("PUT", "503"), ("PUT", "reset"), ("GET", "500"), ("GET", "cut"),
                                                       ("PUT", "cut")}
    assert_lake_equals_leader(pipeline)
    for n in (1, 2):
        proxy.clear()
        proxy.add(*(FaultRule(r.fault, r.method, r.path, times=1) for r in transient))
        batch = pipeline.capture(changes(db, n))
        run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets)
        assert proxy.injected, "no fault was injected: the test tested nothing"
        assert_lake_equals_leader(pipeline)
        assert pipeline.checkpoint().position == batch.end


@pytest.mark.parametrize("where", [DELTA_LOG, DATA_FILES])
def test_a_commit_failure_that_outlasts_the_retries_then_the_retry_applies_it_once(lake_pipeline, faulty_bucket,
                                                                                  spark, where):
    bucket, proxy = faulty_bucket
    pipeline = lake_pipeline(bucket=bucket)
    db = pipeline.database
    run_merge(spark, pipeline.manifest_uri(pipeline.capture(first_statements(db))), pipeline.secrets)
    batch = pipeline.capture(changes(db, 1))
    before = pipeline.checkpoint()
    proxy.add(FaultRule("503", "PUT", where, times=None))
    with pytest.raises(Exception):
        run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets)
    assert pipeline.checkpoint().position == before.position
    proxy.clear()
    run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets)
    assert_lake_equals_leader(pipeline)
    assert pipeline.checkpoint().position == batch.end
