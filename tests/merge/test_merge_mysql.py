"""The merge with MySQL (sid's 9.x: GTIDs on, caching_sha2_password only, SHOW BINARY LOG STATUS)
as leader and follower: the seeded random workload, batch after batch; after each merge the
follower equals the leader. (The type workload runs on both flavors in test_merge_types.)"""

from apply_workload import Workload
from merge_helpers import assert_same_database
from mysql_cdc.merge.job import run_merge

SEED = 20261124


def test_random_workload_on_mysql(make_pipeline, mysql_leader, mysql_follower, spark):
    pipeline = make_pipeline(flavor="mysql")
    workload = Workload(SEED, pipeline.database)
    conn = mysql_leader.connect()
    try:
        for number in range(3):
            def run():
                if number == 0:
                    workload.setup(conn)
                workload.run(conn, transactions=12)

            batch = pipeline.capture(run)
            assert batch.end_gtid, "a MySQL leader with GTIDs on gives each batch its last GTID"
            summary = run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets)
            assert not summary.noop
            assert_same_database(mysql_leader, mysql_follower, pipeline.database)
            assert pipeline.checkpoint().position == batch.end
    finally:
        conn.close()
