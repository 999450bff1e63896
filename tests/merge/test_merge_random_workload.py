"""A seeded random workload (keyed, composite-keyed, keyless and unique-but-no-primary-key tables;
multi-statement transactions, rollbacks, key changes, schema changes between transactions),
captured and merged batch after batch: after each batch the follower equals the leader."""

import pytest

from merge_helpers import assert_same_database, snapshot
from mysql_cdc.merge.netting import DRIVER_NET_ROWS
from mysql_cdc.merge.job import run_merge
from apply_workload import Workload

SEED = 20261122


# its tables are small: by default netted on the driver (apply.netting); 0 nets every one in Spark
@pytest.mark.parametrize("driver_rows", [DRIVER_NET_ROWS, 0], ids=["driver", "spark"])
def test_random_workload_batch_after_batch(make_pipeline, leader, follower, spark, driver_rows):
    pipeline = make_pipeline()
    workload = Workload(SEED, pipeline.database)
    conn = leader.connect()
    totals: dict[str, int] = {}
    saw_duplicate_rows = False
    try:
        for number in range(4):
            def run():
                if number == 0:
                    workload.setup(conn)
                for key, value in workload.run(conn, transactions=12).items():
                    totals[key] = totals.get(key, 0) + value

            batch = pipeline.capture(run)
            summary = run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets, driver_rows)
            assert not summary.noop
            assert_same_database(leader, follower, pipeline.database)
            assert pipeline.checkpoint().position == batch.end
            saw_duplicate_rows |= any(
                max(rows.values(), default=0) > 1 for _, rows in snapshot(follower, pipeline.database).values()
            )
    finally:
        conn.close()
    # the workload did exercise what it claims to
    assert totals["rollbacks"] and totals["failed_statements"], totals
    assert workload.ddl_done == {"add", "drop_column", "modify", "rename", "create", "drop_table", "truncate"}
    assert saw_duplicate_rows
    assert pipeline.staging_tables() == [] and pipeline.scratch_files() == []
