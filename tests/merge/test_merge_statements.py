"""Small keyed tables applied as statements (``sinks.mysql.statements``, sent by ``stream``): keys
of every kind the path takes, values that need care in SQL text, the tables that keep the staging
table, and the refusals (a key already there, a key not there, a value the follower would alter)
against real followers."""

from __future__ import annotations

import threading

import pyarrow as pa
import pytest

from merge_helpers import assert_same_database, snapshot
from mysql_cdc.merge.errors import FollowerDivergedError
from mysql_cdc.contracts import ColumnSpec, TableChanges
from mysql_cdc.kinds.mysql.sink.connection import connect
from mysql_cdc.kinds.mysql.sink.follower import Follower
from mysql_cdc.kinds.mysql.sink.rows import apply_statements
from mysql_cdc.kinds.mysql.sink.staging import StagingError
from mysql_cdc.contracts import change_row as cr
from mysql_cdc.kinds.mysql.sink.statements import (
    STATEMENT_ROWS, TableStatements, table_statements, tables_statements, takes_statements,
)
from mysql_cdc.kinds.mysql.sink.tables import FollowerColumn, StagedTable
from mysql_cdc.merge import netting
from mysql_cdc.merge.job import DRIVER_GROUP_ROWS, DRIVER_GROUP_TABLES, driver_groups, run_merge
from mysql_cdc.kinds.mysql.sink import MySQLSink
from mysql_cdc.kinds.mysql.sink.follower import FollowerSchemaError

# text that SQL must carry byte for byte: quotes, backslashes, a TAB, a NUL, a line end, emoji
TRICKY = ["it''s", "back\\\\slash", "tab\\there", "nul\\0byte", "line\\nend", "emoji 😀", "trailing  "]

TABLES = [
    "CREATE TABLE u (id BIGINT UNSIGNED PRIMARY KEY, v VARCHAR(40))",
    "CREATE TABLE s (k VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci PRIMARY KEY, v TEXT, n INT)",
    "CREATE TABLE l (k CHAR(10) CHARACTER SET latin1 PRIMARY KEY, v INT)",
    "CREATE TABLE d (day DATE, at DATETIME(6), ts TIMESTAMP(6) NOT NULL DEFAULT '2000-01-01 00:00:00', "
    "v DOUBLE, PRIMARY KEY (day, at, ts))",
    # binary keys: a BINARY(n) value is its n bytes, pad included; a VARBINARY one has no pad ('' and
    # X'00' are two keys)
    "CREATE TABLE b (id BINARY(16) PRIMARY KEY, v VARCHAR(10))",
    "CREATE TABLE vb (n INT, k VARBINARY(8), v INT, PRIMARY KEY (n, k))",
]


def _first_rows() -> list[str]:
    texts = ", ".join(f"('{t}', '{t}', {i})" for i, t in enumerate(TRICKY))
    return [
        "INSERT INTO u VALUES (18446744073709551615, 'max'), (0, 'zero'), (9007199254740993, 'past 2^53')",
        f"INSERT INTO s VALUES {texts}",
        "INSERT INTO l VALUES ('café', 1), ('x', 2)",
        "INSERT INTO d VALUES ('2024-02-29', '2024-02-29 23:59:59.999999', '2030-06-01 12:00:00.5', 0.1), "
        "('1000-01-01', '1000-01-01 00:00:00', '1999-12-31 23:59:59.000001', -0.0)",
        "INSERT INTO b VALUES (X'00', 'all pad'), (X'0cc175b9c0f1b6a831c399e269772661', 'full'), (X'ff00', 'trailing')",
        "INSERT INTO vb VALUES (1, X'', 1), (1, X'00', 2), (2, X'0a00', 3)",
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
        "UPDATE b SET id = X'ff01' WHERE v = 'trailing'",
        "DELETE FROM b WHERE v = 'all pad'",
        "UPDATE vb SET k = X'0000' WHERE n = 1 AND k = X'00'",
        "DELETE FROM vb WHERE n = 1 AND k = X''",
        "UPDATE vb SET v = 30 WHERE n = 2",
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
        assert sorted(t.table for t in tables) == ["b", "d", "l", "s", "u", "vb"]
        for table, columns in zip(tables, follower.check_tables(tables)):
            assert takes_statements(table, columns, table.row_count), table.table
    summary = run_merge(_no_spark, pipeline.manifest_uri(batch), pipeline.secrets)
    assert_same_database(leader, pipeline.follower, db)
    counts = {t.table.split(".")[1]: (t.inserted, t.updated, t.deleted) for t in summary.tables}
    # u: 0 re-inserted (D then I: a replace), the moved key's new row; the old key and nothing else gone
    assert counts["u"] == (1, 2, 1)
    assert counts["s"] == (1, 1, 3)  # the renamed key: its old key deleted, the new one inserted
    assert counts["l"] == (0, 1, 1)
    assert counts["b"] == (1, 0, 2)  # the moved key's new row; its old key and the deleted row gone
    assert counts["vb"] == (1, 1, 2)


# many small tables in one batch, more than one driver group: keyed by an integer or by text (as
# statements), by a DECIMAL (a staging table) or by nothing (a keyless staging table)
MANY = DRIVER_GROUP_TABLES + 6
SHAPES = [
    "id INT PRIMARY KEY, v VARCHAR(20), n DECIMAL(8,2)",
    "k VARCHAR(10) PRIMARY KEY, at DATETIME(6), b VARBINARY(8)",
    "id BIGINT PRIMARY KEY, f DOUBLE, t TEXT",
    "d DECIMAL(6,1) PRIMARY KEY, v VARCHAR(20)",
    "id INT, v VARCHAR(20)",
]
SHAPE_ROWS = [
    "({i}, 'v{i}', {i}.25)", "('k{i}', '2024-01-01 00:00:0{d}.5', X'0{d}ff')", "({i}, {i} / 3, REPEAT('t', {i}))",
    "({i}.5, 'v{i}')", "({i}, 'v{i}')",
]


def _many_small_tables(make_pipeline):
    """A pipeline whose one batch changes ``MANY`` small tables of every ``SHAPES`` (more than one
    driver group), the same tables and rows on both servers before it; returns (pipeline, batch)."""
    pipeline = make_pipeline(start=False)
    db, leader = pipeline.database, pipeline.leader
    # the same tables and rows on both servers before the pipeline starts (DDL replay is tested elsewhere)
    creates = [f"CREATE TABLE t{n:02d} ({SHAPES[n % len(SHAPES)]})" for n in range(MANY)]
    inserts = [f"INSERT INTO t{n:02d} VALUES " + ", ".join(SHAPE_ROWS[n % len(SHAPES)].format(i=i, d=i % 10)
                                                           for i in range(1, 6)) for n in range(MANY)]
    for server in (leader, pipeline.follower):
        server.run_sql([f"CREATE DATABASE {db}", f"USE {db}", *creates, *inserts])
    pipeline.start()

    # per shape: a key moved (or, keyless, a row changed), a row deleted
    moves = ["UPDATE {t} SET id = id + 100 WHERE id = 2", "UPDATE {t} SET k = CONCAT(k, 'x') WHERE k = 'k2'",
             "UPDATE {t} SET id = id + 100 WHERE id = 2", "UPDATE {t} SET d = d + 100 WHERE d = 2.5",
             "UPDATE {t} SET v = 'moved' WHERE id = 2"]
    deletes = ["id = 1", "k = 'k1'", "id = 1", "d = 1.5", "id = 1"]
    changes = []
    for n in range(MANY):  # in transactions of a few tables each, as an application writes them
        t, shape = f"t{n:02d}", n % len(SHAPES)
        if n % 4 == 0:
            changes.append("BEGIN")
        changes += [moves[shape].format(t=t), f"DELETE FROM {t} WHERE {deletes[shape]}",
                    f"INSERT INTO {t} VALUES " + SHAPE_ROWS[shape].format(i=9, d=9)]
        if n % 4 == 3 or n == MANY - 1:
            changes.append("COMMIT")
    # and rows changed in place, in a second transaction of the same tables
    changes += [f"UPDATE t{n:02d} SET v = CONCAT(v, ' changed') WHERE v IS NOT NULL" for n in range(0, MANY, len(SHAPES))]
    batch = pipeline.capture([f"USE {db}", *changes])
    tables = [t for s in batch.segments if s.kind == "rows" for t in s.tables]
    assert len(tables) == MANY
    return pipeline, batch


def test_a_batch_of_many_small_tables_merges_exactly_in_groups(make_pipeline):
    pipeline, batch = _many_small_tables(make_pipeline)
    summary = run_merge(_no_spark, pipeline.manifest_uri(batch), pipeline.secrets)
    assert_same_database(pipeline.leader, pipeline.follower, pipeline.database)
    assert sum(t.deleted for t in summary.tables) >= MANY and sum(t.inserted for t in summary.tables) >= MANY


def test_groups_of_small_tables_are_netted_ahead_while_the_follower_checks_their_tables(make_pipeline, monkeypatch):
    pipeline, batch = _many_small_tables(make_pipeline)
    netted: list[tuple[str, list[str]]] = []  # (thread, the group's tables), in the order netting began
    netting_began = threading.Event()
    read_and_net = netting.read_and_net

    def recording(store, prefix, items):
        netted.append((threading.current_thread().name, [item[1].qualified_name for item in items]))
        netting_began.set()
        return read_and_net(store, prefix, items)

    check_tables = MySQLSink.check_tables

    def check_after_netting_began(self, tables):
        # the check waits for the first group's netting: the job must not wait for the check to net
        assert netting_began.wait(timeout=30), "no group was netted while the follower checked the tables"
        return check_tables(self, tables)

    monkeypatch.setattr(netting, "read_and_net", recording)
    monkeypatch.setattr(MySQLSink, "check_tables", check_after_netting_began)
    run_merge(_no_spark, pipeline.manifest_uri(batch), pipeline.secrets)
    assert_same_database(pipeline.leader, pipeline.follower, pipeline.database)
    # each small table netted once, with its group, in the groups' thread, the groups in order
    tables = [t for s in batch.segments if s.kind == "rows" for t in s.tables]
    assert all(thread.startswith("mysql-cdc net-groups-ahead") for thread, _ in netted), netted
    assert [name for _, group in netted for name in group] == [t.qualified_name for t in tables]
    assert len(netted) == len(driver_groups(tables, list(range(len(tables))))) > 1


def test_a_table_the_follower_lacks_stops_the_segment_after_groups_were_netted_ahead(make_pipeline):
    pipeline, batch = _many_small_tables(make_pipeline)
    db, follower = pipeline.database, pipeline.follower
    follower.run_sql([f"DROP TABLE {db}.t{MANY - 1:02d}"])
    before = snapshot(follower, db)
    with pytest.raises(FollowerSchemaError, match=rf"`{db}`.`t{MANY - 1:02d}` does not exist"):
        run_merge(_no_spark, pipeline.manifest_uri(batch), pipeline.secrets)
    # nothing was written: the checkpoint and the other tables are as before the batch
    assert pipeline.checkpoint().position == batch.start
    assert snapshot(follower, db) == before


def test_driver_groups_hold_a_bounded_number_of_tables_and_rows():
    sizes = [10] * (DRIVER_GROUP_TABLES + 1) + [DRIVER_GROUP_ROWS + 1, 5, DRIVER_GROUP_ROWS - 5, 5]
    tables = [TableChanges("db", f"t{i}", (), ("k",), ("f.parquet",), n) for i, n in enumerate(sizes)]
    groups = driver_groups(tables, list(range(len(tables))))
    big = DRIVER_GROUP_TABLES + 1
    assert groups == [list(range(DRIVER_GROUP_TABLES)), [DRIVER_GROUP_TABLES], [big], [big + 1, big + 2], [big + 3]]
    assert driver_groups(tables, []) == []


def _net(rows: list[tuple], names: list[str], types: list[pa.DataType]) -> pa.Table:
    """Net rows (``merge.netting``'s form) of the columns ``names``: (values..., op)."""
    arrays = [pa.array([r[i] for r in rows], t) for i, t in enumerate(types)]
    ops = pa.array([r[-1] for r in rows], pa.string())
    return pa.Table.from_arrays([*arrays, ops, pa.array([1] * len(rows), pa.int64())], names=[*names, cr.NET_OP, cr.NET_COUNT])


def test_statements_made_for_tables_together_are_each_tables_own():
    """Literals are made per type for all tables at once; each table must get its own rows back."""
    from decimal import Decimal

    spec = [("id", "int", "int32"), ("v", "varchar", "string"), ("n", "decimal", "decimal128(8, 2)"),
            ("b", "varbinary", "binary")]
    types = [pa.int32(), pa.string(), pa.decimal128(8, 2), pa.binary()]

    def table(name: str, rows: list[tuple], keys: tuple[str, ...] = ("id",)) -> tuple:
        changes = TableChanges("db", name, tuple(ColumnSpec(*c) for c in spec), keys, ("f.parquet",), len(rows))
        follower = tuple(FollowerColumn(c[0], c[1], c[1], None, None, False) for c in spec)
        return changes, follower, _net(rows, [c[0] for c in spec], types)

    tables = [
        table("a", [(1, "one", Decimal("1.50"), b"\x00\x01", "I"), (2, None, None, None, "U"), (3, "x", None, b"", "D")]),
        table("b", [(7, "seven'\\", Decimal("-7.00"), b"\xff", "U")]),
        # a composite key between single ones: its keys are joined apart from theirs
        table("e", [(8, "k", Decimal("0.00"), b"", "D"), (9, "l", None, None, "U")], keys=("id", "v")),
        table("c", []),
        table("d", [(4, "four", Decimal("4.00"), None, "D"), (5, "😀", Decimal("0.01"), b"\n", "I")]),
    ]
    together = tables_statements(tables)
    assert together == [table_statements(*t) for t in tables]
    assert together[0] == TableStatements(
        "DELETE FROM `db`.`a` WHERE `id` IN (2, 3)", 2,
        "INSERT INTO `db`.`a` (`id`, `v`, `n`, `b`) VALUES (1, _utf8mb4 X'6f6e65', '1.50', X'0001'), "
        "(2, NULL, NULL, NULL)", 2)
    assert together[1].delete == "DELETE FROM `db`.`b` WHERE `id` IN (7)"
    assert together[2] == TableStatements(
        "DELETE FROM `db`.`e` WHERE (`id`, `v`) IN ((8, _utf8mb4 X'6b'), (9, _utf8mb4 X'6c'))", 2,
        "INSERT INTO `db`.`e` (`id`, `v`, `n`, `b`) VALUES (9, _utf8mb4 X'6c', NULL, NULL)", 1)
    assert together[3] == TableStatements(None, 0, None, 0)
    assert together[4].insert.endswith("(5, _utf8mb4 X'f09f9880', '0.01', X'0a')")


def test_statements_of_picked_net_rows_are_those_of_their_net_tables():
    """Net rows the grouped netting picks from the change rows (``netting.PickedNet``) are made
    into statements straight from the change rows; they must be exactly the statements of the net
    tables those picks make (the form every other sink takes), in a group mixing both forms."""
    from decimal import Decimal

    fields = [pa.field("id", pa.int32(), False), pa.field("v", pa.string()), pa.field("n", pa.decimal128(8, 2))]
    schema = pa.schema([*fields, pa.field(cr.OP, pa.string()), pa.field(cr.BINLOG_SEQ, pa.int64()),
                        pa.field(cr.BINLOG_POS, pa.int64()), pa.field(cr.ROW_INDEX, pa.int32()),
                        pa.field(cr.BEFORE, pa.struct(fields))])

    def changes(rows: list[tuple]) -> pa.Table:
        """rows: (op, id, v, n, the before image's id or None); one event each, in binlog order."""
        return pa.Table.from_pylist([
            {"id": i, "v": v, "n": n, cr.OP: op, cr.BINLOG_SEQ: 1, cr.BINLOG_POS: 100 + 10 * at, cr.ROW_INDEX: 0,
             cr.BEFORE: None if old is None else {"id": old, "v": "before", "n": None}}
            for at, (op, i, v, n, old) in enumerate(rows)], schema=schema)

    spec = TableChanges("db", "t", tuple(ColumnSpec(f.name, t, str(f.type)) for f, t in
                                         zip(fields, ("int", "varchar", "decimal"))), ("id",), ("f.parquet",), 1)
    follower = tuple(FollowerColumn(c.name, c.mysql_type, c.mysql_type, None, None, False) for c in spec.columns)
    cases = [
        # inserted, then updated in place; inserted and deleted (gone); existed, deleted; updated
        changes([("I", 3, "three", Decimal("3.00"), None), ("U", 3, "3'\\", None, 3), ("I", 5, "five", None, None),
                 ("D", 5, "five", None, None), ("D", 1, "one", Decimal("1.00"), None), ("U", 2, None, Decimal("-2.50"), 2)]),
        changes([("U", 7, "moved", None, 6), ("I", 8, "😀", Decimal("0.01"), None)]),  # a key moved: a net table
        changes([]),  # no rows: a net table (empty)
        changes([("D", 9, None, None, None)]),  # deletes only: no INSERT
        changes([("I", 4, "four", None, None), ("I", 2, "two", None, None)]),  # rows out of key order
    ]
    nets = netting.net_each(cases, [spec] * len(cases))
    assert [type(n).__name__ for n in nets] == ["PickedNet", "Table", "Table", "PickedNet", "PickedNet"]
    picked = tables_statements([(spec, follower, net) for net in nets])
    assert picked == tables_statements([(spec, follower, netting.net_table(net)) for net in nets])
    assert picked[0] == TableStatements(
        "DELETE FROM `db`.`t` WHERE `id` IN (1, 2)", 2,
        "INSERT INTO `db`.`t` (`id`, `v`, `n`) VALUES (2, NULL, '-2.50'), (3, _utf8mb4 X'33275c', NULL)", 2)
    assert picked[2] == TableStatements(None, 0, None, 0)
    assert picked[3] == TableStatements("DELETE FROM `db`.`t` WHERE `id` IN (9)", 1, None, 0)
    assert picked[4].insert == ("INSERT INTO `db`.`t` (`id`, `v`, `n`) VALUES "
                                "(2, _utf8mb4 X'74776f', NULL), (4, _utf8mb4 X'666f7572', NULL)")


def test_net_rows_whose_columns_are_not_in_the_manifests_order_are_refused():
    """The statements find a column by its position (the leader's columns first, in the
    manifest's order); rows holding them in another order must stop the merge, not put one
    column's values in another's place (both are integers here: nothing else would notice)."""
    spec = TableChanges("db", "t", (ColumnSpec("a", "int", "int64"), ColumnSpec("b", "int", "int64")), ("a",),
                        ("f.parquet",), 1)
    follower = tuple(FollowerColumn(c.name, "int", "int", None, None, False) for c in spec.columns)
    assert tables_statements([(spec, follower, _net([(1, 2, "I")], ["a", "b"], [pa.int64()] * 2))])[0].insert == \
        "INSERT INTO `db`.`t` (`a`, `b`) VALUES (1, 2)"
    with pytest.raises(ValueError, match=r"`db`.`t`: its rows hold columns \['b', 'a'"):
        tables_statements([(spec, follower, _net([(2, 1, "I")], ["b", "a"], [pa.int64()] * 2))])


def _table(name: str, key_types: list[str], keys: tuple[str, ...] = ("k",)) -> tuple[TableChanges, tuple]:
    columns = tuple(ColumnSpec(f"k{i}" if len(key_types) > 1 else "k", t, "int64") for i, t in enumerate(key_types))
    follower = tuple(FollowerColumn(c.name, c.mysql_type, c.mysql_type, None, None, False) for c in columns)
    return TableChanges("db", name, columns, keys, ("f.parquet",), 1), follower


@pytest.mark.parametrize("key_types, keys, takes", [
    (["bigint"], ("k",), True),
    (["int", "varchar"], ("k0", "k1"), True),
    (["datetime"], ("k",), True),
    (["binary"], ("k",), True),  # the value's every byte, pad included
    (["int", "varbinary"], ("k0", "k1"), True),
    (["decimal"], ("k",), False),  # its text may be E-notation: bare, a DOUBLE literal
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

    from mysql_cdc.mysql_server import MySQLSettings

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
