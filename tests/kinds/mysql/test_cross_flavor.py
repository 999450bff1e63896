"""A MySQL 9.7 leader with a MariaDB 10.11 follower, and a MariaDB leader with a MySQL follower:
the type tests' tables (copied by a snapshot, then streamed: inserts, updates, deletes, in a keyed
and a keyless table) and a random workload with DDL, each leader using its own default collation
(MySQL's utf8mb4_0900_ai_ci, MariaDB's utf8mb4_uca1400_ai_ci), which the other server does not
have (``mysql_cdc.kinds.mysql.sink.dialect`` maps them). The rows stay exact, compared value by value, and
the verification's checksums (computed inside each server) say equal.

The definitions differ by design (collation names, MariaDB's JSON as LONGTEXT), so this compares
rows, not SHOW CREATE TABLE."""

from __future__ import annotations

import pytest

from apply_workload import Workload
from merge_helpers import table_names, table_rows
from mysql_cdc.capture.filters import TableFilter
from mysql_cdc.server_state import MySQLStateStore
from mysql_cdc.monitor.verify import verify_pipeline
from mysql_cdc.kinds.mysql.verify import checksum_sides
from mysql_cdc.pipeline_options import VerifyOptions
from mysql_cdc.merge.job import run_merge
from test_merge_types import COLUMNS, FILL_NULLS, NULLS, ROW_1, ROW_2, UPDATE_ALL

PAIRS = [pytest.param("mysql", "mariadb", id="mysql-to-mariadb"), pytest.param("mariadb", "mysql", id="mariadb-to-mysql")]
DEFAULT_COLLATION = {"mysql": "utf8mb4_0900_ai_ci", "mariadb": "utf8mb4_uca1400_ai_ci"}


def assert_same_rows(pipeline) -> None:
    db = pipeline.database
    tables = table_names(pipeline.leader, db)
    assert table_names(pipeline.follower, db) == tables
    for table in tables:
        leader, follower = table_rows(pipeline.leader, db, table), table_rows(pipeline.follower, db, table)
        assert follower == leader, f"{table}: missing on follower {dict(leader - follower)}, extra {dict(follower - leader)}"


def assert_verified_equal(pipeline) -> None:
    result = verify_pipeline(pipeline.name, pipeline.leader_settings, checksum_sides(pipeline.follower_settings),
                             MySQLStateStore(pipeline.follower_settings), TableFilter((f"{pipeline.database}.*",)), VerifyOptions(chunk_rows=3, rechecks=0),
                             log=lambda _: None)
    assert result.status == "ok", result.to_json()


def test_the_mysql_leaders_collation_is_named_for_the_mariadb_follower(make_pipeline):
    """The failure users met: CREATE DATABASE with utf8mb4_0900_ai_ci on MariaDB (error 1273)."""
    pipeline = make_pipeline(flavor="mysql", follower_flavor="mariadb")
    with pytest.raises(Exception, match="1273"):
        pipeline.follower.run_sql([f"CREATE DATABASE {pipeline.database}x COLLATE utf8mb4_0900_ai_ci"])


@pytest.mark.parametrize("leader_flavor,follower_flavor", PAIRS)
def test_every_type_crosses_through_a_snapshot_and_the_stream(make_pipeline, spark, leader_flavor, follower_flavor):
    pipeline = make_pipeline(flavor=leader_flavor, follower_flavor=follower_flavor, start=False)
    db, collation = pipeline.database, DEFAULT_COLLATION[leader_flavor]
    # MySQL's 0900 collations are NO PAD: 'a' and 'A ' are two keys of a unique index there, and
    # must stay two on a MariaDB follower (its default uca1400_ai_ci would call them one)
    label_key = "UNIQUE KEY (label)" if leader_flavor == "mysql" else "INDEX (label)"
    pipeline.leader.run_sql([
        f"CREATE DATABASE {db} COLLATE {collation}", f"USE {db}",
        f"CREATE TABLE types (id INT NOT NULL PRIMARY KEY, {COLUMNS}, "
        f"label VARCHAR(20) COLLATE {collation}, {label_key})",
        f"CREATE TABLE bag ({COLUMNS})",
        f"INSERT INTO types VALUES (1, {ROW_1}, 'a'), (2, {ROW_2}, 'A '), (3, {NULLS}, NULL)",
        f"INSERT INTO bag VALUES ({ROW_1}), ({ROW_1}), ({ROW_2}), ({NULLS})",
    ], database=None)
    copy = pipeline.snapshot()  # the follower's tables made from the leader's SHOW CREATE TABLE
    run_merge(spark, pipeline.manifest_uri(copy), pipeline.secrets)
    assert_same_rows(pipeline)

    stream = pipeline.capture([
        f"USE {db}",
        f"INSERT INTO types VALUES (4, {ROW_1}, 'é'), (5, {NULLS}, 'b')",
        f"UPDATE types {UPDATE_ALL} WHERE id = 1",
        f"UPDATE types {FILL_NULLS} WHERE id = 3",
        "DELETE FROM types WHERE id = 2",
        f"UPDATE bag {UPDATE_ALL} WHERE ti = -128 LIMIT 1",
        "DELETE FROM bag WHERE ti = 127",
        # DDL replayed from the binlog's own text, naming the leader's collation
        f"CREATE TABLE later (id INT PRIMARY KEY, s VARCHAR(10) COLLATE {collation}) COLLATE {collation}",
        "INSERT INTO later VALUES (1, 'x'), (2, 'Y')",
        f"ALTER TABLE types ADD COLUMN extra VARCHAR(10) COLLATE {collation} DEFAULT 'z'",
    ])
    run_merge(spark, pipeline.manifest_uri(stream), pipeline.secrets)
    assert_same_rows(pipeline)
    assert_verified_equal(pipeline)


@pytest.mark.parametrize("leader_flavor,follower_flavor", PAIRS)
def test_a_random_workload_with_ddl_crosses(make_pipeline, spark, leader_flavor, follower_flavor):
    pipeline = make_pipeline(flavor=leader_flavor, follower_flavor=follower_flavor)
    workload = Workload(20261125, pipeline.database)
    conn = pipeline.leader.connect()
    try:
        with conn.cursor() as cur:  # the workload's database and tables get the leader's own default
            cur.execute(f"SET SESSION collation_server = {DEFAULT_COLLATION[leader_flavor]}")
        for number in range(3):
            def run():
                if number == 0:
                    workload.setup(conn)
                workload.run(conn, transactions=12)

            batch = pipeline.capture(run)
            run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets)
            assert_same_rows(pipeline)
    finally:
        conn.close()
    assert_verified_equal(pipeline)
