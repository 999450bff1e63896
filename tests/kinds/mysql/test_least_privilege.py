"""The grants docs/servers.md gives, and nothing more, are enough: a pipeline whose capture user
and follower writer have exactly those grants (per schema where the server allows it) runs a
snapshot, the stream with DML and every kind of DDL, and a repair's copy, on MariaDB and MySQL,
and the follower ends equal to the leader (definitions and rows)."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest

from merge_helpers import Pipeline, assert_same_database
from mysql_cdc.merge.job import run_merge
from mysql_cdc.mysql_server import MySQLSettings
from mysql_cdc.storage import StorageSpec

SERVERS_PAGE = Path(__file__).resolve().parents[3] / "docs" / "servers.md"


def documented_grants(flavor: str, schema: str) -> tuple[list[str], list[str]]:
    """The leader's and the follower's GRANT bodies as the page gives them, for ``schema``."""
    page = SERVERS_PAGE.read_text()
    block = re.search(r"```sql\n(.*?)```", page[page.index("with the least that works"):], re.S)[1]
    grants: dict[str, list[str]] = {"leader": [], "follower": []}
    side, mysql_only = "leader", False
    for line in (line.strip() for line in block.splitlines()):
        if line.startswith(("-- leader", "-- follower")):
            side, mysql_only = line.split()[1].rstrip(":"), False
        elif line.startswith("-- MySQL only"):
            mysql_only = True
        elif line.startswith("GRANT ") and (flavor == "mysql" or not mysql_only):
            grants[side].append(re.match(r"GRANT (.*) TO ", line)[1].replace("`shop`", f"`{schema}`"))
            mysql_only = False
    return grants["leader"], grants["follower"]


@pytest.fixture(params=["mariadb", "mysql"])
def least(request, tmp_path, unique_name):
    prefix = "" if request.param == "mariadb" else "mysql_"
    leader, follower = request.getfixturevalue(prefix + "leader"), request.getfixturevalue(prefix + "follower")
    leader_grants, follower_grants = documented_grants(request.param, unique_name)
    suffix = uuid.uuid4().hex[:6]
    leader_user = leader.create_user(f"cap_{suffix}", "capture-pw", leader_grants)
    follower_user = follower.create_user(f"wri_{suffix}", "writer-pw", follower_grants)
    return Pipeline(name=f"pipe_{unique_name}", database=unique_name, leader=leader, follower=follower,
                    leader_settings=MySQLSettings(**leader_user), follower_settings=MySQLSettings(**follower_user),
                    storage=StorageSpec(f"file://{tmp_path}/store"))


def test_the_page_gives_per_schema_grants():
    leader, follower = documented_grants("mysql", "shop")
    assert all("ALL PRIVILEGES" not in g for g in leader + follower)
    assert any(g.endswith("ON `shop`.*") for g in follower) and any(g.endswith("ON `_mysql_cdc`.*") for g in follower)


def test_a_pipeline_runs_with_exactly_the_documented_grants(least, spark):
    pipeline, db = least, least.database
    pipeline.leader.run_sql([f"CREATE DATABASE {db}", f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(8))",
                             f"CREATE TABLE {db}.bag (a INT, b VARCHAR(8))",
                             f"INSERT INTO {db}.t VALUES (1, 'a'), (2, 'b')", f"INSERT INTO {db}.bag VALUES (1, 'x'), (1, 'x')"])
    pipeline.start()
    run_merge(spark, pipeline.manifest_uri(pipeline.snapshot()), pipeline.secrets)
    stream = pipeline.capture([
        f"USE {db}", "INSERT INTO t VALUES (3, 'c')", "UPDATE t SET id = 30 WHERE id = 3", "DELETE FROM bag LIMIT 1",
        "ALTER TABLE t ADD COLUMN n INT", "ALTER TABLE t RENAME COLUMN v TO label", "CREATE INDEX t_n ON t (n)",
        "CREATE TABLE later (id INT PRIMARY KEY)", "INSERT INTO later VALUES (1)", "RENAME TABLE later TO renamed",
        "TRUNCATE TABLE bag", "INSERT INTO bag VALUES (2, 'y')", "CREATE TABLE gone (id INT)", "DROP TABLE gone",
    ])
    run_merge(spark, pipeline.manifest_uri(stream), pipeline.secrets)
    assert_same_database(pipeline.leader, pipeline.follower, db)
    pipeline.leader.run_sql([f"UPDATE {db}.t SET n = 7"])
    repair = pipeline.snapshot(only=[f"{db}.t"])  # a repair's copy: a shadow table swapped in
    run_merge(spark, pipeline.manifest_uri(repair), pipeline.secrets)
    assert_same_database(pipeline.leader, pipeline.follower, db)


def test_a_missing_grant_fails_naming_the_privilege_and_the_statement(least, spark):
    """The writer without DELETE on the schema: the merge fails at once (no retry can help) with the
    server's refusal and the GRANT that fixes it; nothing is committed."""
    from mysql_cdc.merge.job import one_line
    from mysql_cdc.retry_policy import is_permanent

    pipeline, db = least, least.database
    pipeline.start()
    first = pipeline.capture([f"CREATE DATABASE {db}", f"CREATE TABLE {db}.t (id INT PRIMARY KEY)",
                              f"INSERT INTO {db}.t VALUES (1), (2)"])
    run_merge(spark, pipeline.manifest_uri(first), pipeline.secrets)
    user = pipeline.follower_settings.user
    pipeline.follower.run_sql([f"REVOKE DELETE ON `{db}`.* FROM '{user}'@'%'",
                               f"REVOKE DELETE ON `{db}`.* FROM '{user}'@'localhost'"])
    second = pipeline.capture([f"DELETE FROM {db}.t WHERE id = 1"])
    with pytest.raises(Exception) as caught:
        run_merge(spark, pipeline.manifest_uri(second), pipeline.secrets)
    assert is_permanent(caught.value)
    # MariaDB names the table with its schema; MySQL names the table alone
    schema = "<the schema of table `t`>" if type(pipeline.follower).__name__ == "MySQLServer" else f"`{db}`"
    assert f"grant it: GRANT DELETE ON {schema}.* TO '{user}'@'%'" in one_line(caught.value)
    assert pipeline.checkpoint().position == first.end


def test_a_read_only_follower_fails_the_merge_at_once_naming_the_server(least, spark):
    """The follower set read-only between two merges (a failover in progress, an operator's
    ``read_only``): the merge fails at once with one error that names the server, the cause and the
    fix, not a statement's refusal retried for minutes; nothing is committed, and once the server
    is writable again the same batch applies."""
    from mysql_cdc.merge.errors import FollowerUnwritableError
    from mysql_cdc.merge.job import one_line
    from mysql_cdc.retry_policy import is_permanent

    pipeline, db = least, least.database
    pipeline.start()
    first = pipeline.capture([f"CREATE DATABASE {db}", f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT)",
                              f"INSERT INTO {db}.t VALUES (1, 1), (2, 2)"])
    run_merge(spark, pipeline.manifest_uri(first), pipeline.secrets)
    second = pipeline.capture([f"INSERT INTO {db}.t VALUES (3, 3)", f"UPDATE {db}.t SET v = 10 WHERE id = 1"])
    pipeline.follower.run_sql(["SET GLOBAL read_only = ON"])
    try:
        with pytest.raises(FollowerUnwritableError) as caught:
            run_merge(spark, pipeline.manifest_uri(second), pipeline.secrets)
    finally:
        pipeline.follower.run_sql(["SET GLOBAL read_only = OFF"])
    assert is_permanent(caught.value)
    settings = pipeline.follower_settings
    assert one_line(caught.value).startswith(
        f"the follower at {settings.host}:{settings.port} as '{settings.user}' refuses writes: it is read-only")
    assert "(MySQL error 1290)" in one_line(caught.value) and "SET GLOBAL read_only = OFF" in one_line(caught.value)
    assert pipeline.checkpoint().position == first.end

    run_merge(spark, pipeline.manifest_uri(second), pipeline.secrets)
    assert_same_database(pipeline.leader, pipeline.follower, db)
