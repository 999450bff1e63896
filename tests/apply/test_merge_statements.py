"""Small keyed tables applied as statements (``sinks.mysql.statements``, sent by ``stream``): keys
of every kind the path takes, values that need care in SQL text, the tables that keep the staging
table, and the refusals (a key already there, a key not there, a value the follower would alter)
against real followers."""

from __future__ import annotations

import pytest

from merge_helpers import assert_same_database
from mysql_cdc.apply.errors import FollowerDivergedError
from mysql_cdc.contracts import ColumnSpec, TableChanges
from mysql_cdc.sinks.mysql.connection import connect
from mysql_cdc.sinks.mysql.follower import Follower
from mysql_cdc.sinks.mysql.rows import apply_statements
from mysql_cdc.sinks.mysql.staging import StagingError
from mysql_cdc.sinks.mysql.statements import STATEMENT_ROWS, TableStatements, takes_statements
from mysql_cdc.sinks.mysql.tables import FollowerColumn, StagedTable
from mysql_cdc.spark.merge import run_merge

# text that SQL must carry byte for byte: quotes, backslashes, a TAB, a NUL, a line end, emoji
TRICKY = ["it''s", "back\\\\slash", "tab\\there", "nul\\0byte", "line\\nend", "emoji 😀", "trailing  "]

TABLES = [
    "CREATE TABLE u (id BIGINT UNSIGNED PRIMARY KEY, v VARCHAR(40))",
    "CREATE TABLE s (k VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci PRIMARY KEY, v TEXT, n INT)",
    "CREATE TABLE l (k CHAR(10) CHARACTER SET latin1 PRIMARY KEY, v INT)",
    "CREATE TABLE d (day DATE, at DATETIME(6), ts TIMESTAMP(6) NOT NULL DEFAULT '2000-01-01 00:00:00', "
    "v DOUBLE, PRIMARY KEY (day, at, ts))",
]


def _first_rows() -> list[str]:
    texts = ", ".join(f"('{t}', '{t}', {i})" for i, t in enumerate(TRICKY))
    return [
        "INSERT INTO u VALUES (18446744073709551615, 'max'), (0, 'zero'), (9007199254740993, 'past 2^53')",
        f"INSERT INTO s VALUES {texts}",
        "INSERT INTO l VALUES ('café', 1), ('x', 2)",
        "INSERT INTO d VALUES ('2024-02-29', '2024-02-29 23:59:59.999999', '2030-06-01 12:00:00.5', 0.1), "
        "('1000-01-01', '1000-01-01 00:00:00', '1999-12-31 23:59:59.000001', -0.0)",
    ]


def _changes() -> list[str]:
    return [
        # updates in place, key changes, deletes, and a key deleted then inserted again
        "UPDATE u SET v = 'still max' WHERE id = 18446744073709551615",
        "UPDATE u SET id = 9007199254740992 WHERE id = 9007199254740993",
        "DELETE FROM u WHERE id = 0",
        "INSERT INTO u VALUES (0, 'zero again')",
        f"UPDATE s SET n = n + 10 WHERE k = '{TRICKY[0]}'",
        f"UPDATE s SET k = 'renamed' WHERE k = '{TRICKY[1]}'",
        f"DELETE FROM s WHERE k = '{TRICKY[2]}'",
        f"DELETE FROM s WHERE k = '{TRICKY[5]}'",
        "UPDATE l SET v = 10 WHERE k = 'CAFÉ'",  # the leader's collation finds it: the follower's must
        "DELETE FROM l WHERE k = 'x'",
        "UPDATE d SET v = 1e300 WHERE day = '2024-02-29'",
        "UPDATE d SET ts = '2001-01-01 00:00:00.000001' WHERE day = '1000-01-01'",
    ]


def _no_spark():
    pytest.fail("small tables are merged on the driver: the job must not start Spark")


@pytest.mark.parametrize("flavor", ["mariadb", "mysql"])
def test_keys_of_every_kind_the_statements_take_merge_exactly(make_pipeline, flavor):
    pipeline = make_pipeline(flavor=flavor)
    db = pipeline.database
    leader = pipeline.leader
    first = pipeline.capture([f"CREATE DATABASE {db}", f"USE {db}", *TABLES, *_first_rows()])
    run_merge(_no_spark, pipeline.manifest_uri(first), pipeline.secrets)
    assert_same_database(leader, pipeline.follower, db)

    batch = pipeline.capture([f"USE {db}", *_changes()])
    with Follower(pipeline.follower_settings) as follower:
        tables = [t for s in batch.segments if s.kind == "rows" for t in s.tables]
        assert sorted(t.table for t in tables) == ["d", "l", "s", "u"]
        for table, columns in zip(tables, follower.check_tables(tables)):
            assert takes_statements(table, columns, table.row_count), table.table
    summary = run_merge(_no_spark, pipeline.manifest_uri(batch), pipeline.secrets)
    assert_same_database(leader, pipeline.follower, db)
    counts = {t.table.split(".")[1]: (t.inserted, t.updated, t.deleted) for t in summary.tables}
    # u: 0 re-inserted (D then I: a replace), the moved key's new row; the old key and nothing else gone
    assert counts["u"] == (1, 2, 1)
    assert counts["s"] == (1, 1, 3)  # the renamed key: its old key deleted, the new one inserted
    assert counts["l"] == (0, 1, 1)


def _table(name: str, key_types: list[str], keys: tuple[str, ...] = ("k",)) -> tuple[TableChanges, tuple]:
    columns = tuple(ColumnSpec(f"k{i}" if len(key_types) > 1 else "k", t, "int64") for i, t in enumerate(key_types))
    follower = tuple(FollowerColumn(c.name, c.mysql_type, c.mysql_type, None, None, False) for c in columns)
    return TableChanges("db", name, columns, keys, ("f.parquet",), 1), follower


@pytest.mark.parametrize("key_types, keys, takes", [
    (["bigint"], ("k",), True),
    (["int", "varchar"], ("k0", "k1"), True),
    (["datetime"], ("k",), True),
    (["binary"], ("k",), False),  # BINARY(n) pads with zero bytes, a literal does not
    (["decimal"], ("k",), False),  # a quoted decimal compares as a double
    (["double"], ("k",), False),
    (["enum"], ("k",), False),
    (["int"], (), False),  # keyless: rows are named by all their values, through the staging table
])
def test_which_keys_take_statements(key_types, keys, takes):
    table, columns = _table("t", key_types, keys)
    assert takes_statements(table, columns, 10) is takes
    if takes:  # and only small tables: LOAD DATA is the faster way for many rows
        assert not takes_statements(table, columns, STATEMENT_ROWS + 1)


@pytest.fixture
def kv(follower, follower_user, unique_name):
    """A table `kv` (id INT key, s VARCHAR(3)) in a database of its own on the MariaDB follower,
    with row id 1; yields (session with multiple statements, StagedTable maker, database)."""
    from pymysql.constants import CLIENT

    from mysql_cdc.settings import MySQLSettings

    settings = MySQLSettings(**follower_user)
    conn = connect(settings, client_flag=CLIENT.MULTI_STATEMENTS)
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{unique_name}`")
        cur.execute(f"CREATE TABLE `{unique_name}`.kv (id INT PRIMARY KEY, s VARCHAR(3))")
        cur.execute(f"INSERT INTO `{unique_name}`.kv VALUES (1, 'one')")
    table = TableChanges(unique_name, "kv", (ColumnSpec("id", "int", "int32"), ColumnSpec("s", "varchar", "string")),
                         ("id",), ("f.parquet",), 1)

    def staged(delete: str | None, deletes: int, insert: str | None, inserts: int) -> StagedTable:
        return StagedTable(table, (), ({"inserts": inserts, "upserts": 0, "deletes": deletes},),
                           TableStatements(delete, deletes, insert, inserts))

    yield conn, staged, unique_name
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE `{unique_name}`")
    conn.close()


def _rows(conn, db: str) -> list[tuple]:
    with conn.cursor() as cur:
        cur.execute(f"SELECT id, s FROM `{db}`.kv ORDER BY id")
        return list(cur.fetchall())


def test_statements_are_checked_one_by_one_and_a_refusal_leaves_the_follower_as_it_was(kv):
    conn, staged, db = kv
    good = staged(None, 0, f"INSERT INTO `{db}`.kv (id, s) VALUES (2, 'two')", 1)
    cases = [
        # a key the batch inserts is there already: the follower was written outside the pipeline
        (staged(None, 0, f"INSERT INTO `{db}`.kv (id, s) VALUES (1, 'uno')", 1), FollowerDivergedError,
         "hit an existing key"),
        # a key the leader changed is not there
        (staged(f"DELETE FROM `{db}`.kv WHERE id IN (1, 7)", 2, None, 0), FollowerDivergedError,
         "found 1 rows where the leader's changes imply 2"),
    ]
    for bad, error, words in cases:
        conn.begin()
        with conn.cursor() as cur, pytest.raises(error, match=words) as raised:
            apply_statements(cur, [good, bad], limit=1 << 20)  # one round trip: the bad one is second
        conn.rollback()
        assert "resnapshot" in str(raised.value)
        assert _rows(conn, db) == [(1, "one")]


def test_a_value_the_follower_would_alter_is_refused(kv):
    """A follower that is not strict stores 'four' in a VARCHAR(3) as 'fou', with a warning; the
    merge refuses it (the session's sql_mode here stands for such a follower)."""
    conn, staged, db = kv
    with conn.cursor() as cur:
        cur.execute("SET SESSION sql_mode = ''")
    conn.begin()
    with conn.cursor() as cur, pytest.raises(StagingError, match="1 warning"):
        apply_statements(cur, [staged(None, 0, f"INSERT INTO `{db}`.kv (id, s) VALUES (4, 'four')", 1)],
                         limit=1 << 20)
    conn.rollback()
    assert _rows(conn, db) == [(1, "one")]
