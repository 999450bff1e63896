"""The follower's columns as the merge's schema check reads them (``Follower.tables_columns``: one
query for all of a segment's tables, each table's columns as one JSON value), against real MariaDB
and MySQL followers: names and types that JSON must carry exactly, the columns' order, a generated
column, tables that are not there, and a table whose columns outgrow a small ``group_concat_max_len``."""

from __future__ import annotations

import pytest

from mysql_cdc.mysql_server import MySQLSettings
from mysql_cdc.kinds.mysql.sink.follower import Follower

WIDE_COLUMNS = 120  # their JSON is several KB: past a group_concat_max_len of 1,024 bytes

TABLES = [
    # every column name and type text that JSON escapes: quotes, a backslash, a comma, non-ASCII
    "CREATE TABLE odd (`id` INT UNSIGNED PRIMARY KEY, `we\"ird, col` VARCHAR(10) CHARACTER SET latin1 "
    "COLLATE latin1_bin, `back\\slash` ENUM('a','it''s','b,c','ü','x\\\\y'), `größe` DECIMAL(9,3), "
    "`plus_one` BIGINT GENERATED ALWAYS AS (`id` + 1) VIRTUAL, `note` TEXT CHARACTER SET utf8mb4 "
    "COLLATE utf8mb4_bin)",
    "CREATE TABLE wide (id INT PRIMARY KEY, " + ", ".join(f"c{i:03d} INT" for i in range(WIDE_COLUMNS)) + ")",
]


@pytest.fixture(params=["mariadb", "mysql"])
def follower_db(request, unique_name):
    """A database named ``unique_name`` with ``TABLES`` on the MariaDB or the MySQL follower, whose
    global ``group_concat_max_len`` is 1,024 bytes (MySQL's default) while the test runs."""
    prefix = "" if request.param == "mariadb" else "mysql_"
    settings = MySQLSettings(**request.getfixturevalue(f"{prefix}follower_user"))
    conn = settings.connect()
    with conn.cursor() as cur:
        cur.execute("SELECT @@GLOBAL.group_concat_max_len")
        (before,) = cur.fetchone()
        cur.execute(f"CREATE DATABASE `{unique_name}`")
        for ddl in TABLES:
            cur.execute(f"USE `{unique_name}`")
            cur.execute(ddl)
        cur.execute("SET GLOBAL group_concat_max_len = 1024")
    try:
        yield settings, unique_name, request.param
    finally:
        with conn.cursor() as cur:
            cur.execute(f"SET GLOBAL group_concat_max_len = {int(before)}")
            cur.execute(f"DROP DATABASE `{unique_name}`")
        conn.close()


def test_the_columns_of_many_tables_come_exact_and_in_order_from_one_query(follower_db):
    settings, db, flavor = follower_db
    with Follower(settings) as follower:
        found = follower.tables_columns([(db, "odd"), (db, "wide"), (db, "absent"), (f"{db}_none", "odd")])
        assert sorted(found) == [(db, "odd"), (db, "wide")]  # a table that is not there has no entry
        odd = found[(db, "odd")]
        assert [c.name for c in odd] == ["id", 'we"ird, col', "back\\slash", "größe", "plus_one", "note"]
        assert [c.data_type for c in odd] == ["int", "varchar", "enum", "decimal", "bigint", "text"]
        assert [c.generated for c in odd] == [False, False, False, False, True, False]
        assert odd[1].column_type == "varchar(10)" and (odd[1].charset, odd[1].collation) == ("latin1", "latin1_bin")
        assert odd[2].column_type == "enum('a','it''s','b,c','ü','x\\\\y')"
        assert odd[3].column_type == "decimal(9,3)" and odd[3].charset is None and odd[3].collation is None
        assert (odd[5].charset, odd[5].collation) == ("utf8mb4", "utf8mb4_bin")
        assert odd[0].column_type == ("int unsigned" if flavor == "mysql" else "int(10) unsigned")
        # all of the wide table, in its order, though its JSON is longer than group_concat_max_len
        assert [c.name for c in found[(db, "wide")]] == ["id", *(f"c{i:03d}" for i in range(WIDE_COLUMNS))]
        # the same as asking for each table alone (a row per column, in ORDINAL_POSITION order)
        assert found == {(db, t): follower.table_columns(db, t) for t in ("odd", "wide")}
