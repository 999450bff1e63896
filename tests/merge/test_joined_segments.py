"""Which row segments the merge joins into one commit (``merge.joined``), on inline segments: only
across DDL on other tables that the sink replays ahead, and only where each table's changes can be
one table's."""

from mysql_cdc.contracts import BinlogPosition, ColumnSpec, DdlSegment, DdlTarget, RowSegment, SnapshotSegment, TableChanges
from mysql_cdc.merge.joined import JoinedRows, join_rows, join_segments

P = BinlogPosition.parse
ID = ColumnSpec("id", "int", "int32", False)
NOTE = ColumnSpec("note", "varchar", "string")


def changes(name: str, files: tuple[str, ...], rows: int, columns=(ID, NOTE), spans=((0, 10),)) -> TableChanges:
    database, table = name.split(".")
    return TableChanges(database, table, columns, ("id",), files, rows, spans[:len(files)])


def rows(index: int, start: int, end: int, *tables: TableChanges) -> RowSegment:
    return RowSegment(index, P(f"binlog.000001:{start}"), P(f"binlog.000001:{end}"), tables,
                      gtid_set=f"set-at-{end}")


def ddl(index: int, start: int, end: int, action: str, *targets: tuple[str, str | None]) -> DdlSegment:
    return DdlSegment(index, P(f"binlog.000001:{start}"), P(f"binlog.000001:{end}"), "shop", f"-- {action}", action,
                      tuple(DdlTarget(db, table) for db, table in targets))


ANY = lambda segment: True  # noqa: E731 - a sink that replays every statement ahead


def test_rows_across_ddl_on_other_tables_are_one_commit_after_that_ddl():
    first = rows(0, 100, 200, changes("shop.orders", ("seg-00000/small-tables-00000.pack",), 3))
    alter = ddl(1, 200, 300, "alter_table", ("shop", "customers"))
    create = ddl(2, 300, 400, "create_table", ("shop", "refunds"))
    second = rows(3, 400, 500, changes("shop.orders", ("seg-00003/small-tables-00000.pack",), 2),
                  changes("shop.customers", ("seg-00003/small-tables-00000.pack",), 1))

    (joined,) = join_segments([first, alter, create, second], ANY)

    assert isinstance(joined, JoinedRows) and joined.parts == 4 and joined.ddl_ahead == (alter, create)
    assert (joined.rows.index, joined.rows.start, joined.rows.end, joined.rows.gtid_set) == (
        0, first.start, second.end, "set-at-500")
    orders, customers = joined.rows.tables
    assert orders.files == ("seg-00000/small-tables-00000.pack", "seg-00003/small-tables-00000.pack")
    assert orders.spans == ((0, 10), (0, 10)) and orders.row_count == 5
    assert customers == second.tables[1]


def test_a_ddl_on_a_table_of_the_rows_before_it_is_applied_in_its_place():
    first = rows(0, 100, 200, changes("shop.orders", ("a",), 3))
    alter = ddl(1, 200, 300, "alter_table", ("shop", "ORDERS"))  # (names compared without case)
    second = rows(2, 300, 400, changes("shop.orders", ("b",), 2))
    assert join_segments([first, alter, second], ANY) == [first, alter, second]


def test_a_rename_touches_both_names_and_a_database_statement_all_its_tables():
    first = rows(0, 100, 200, changes("shop.orders", ("a",), 3))
    later = rows(2, 300, 400, changes("shop.items", ("b",), 2))
    rename = ddl(1, 200, 300, "rename_table", ("shop", "old_orders"), ("shop", "orders"))
    drop_db = ddl(1, 200, 300, "drop_database", ("shop", None))
    other_db = ddl(1, 200, 300, "create_database", ("billing", None))
    assert join_segments([first, rename, later], ANY) == [first, rename, later]
    assert join_segments([first, drop_db, later], ANY) == [first, drop_db, later]
    (joined,) = join_segments([first, other_db, later], ANY)
    assert joined.ddl_ahead == (other_db,)


def test_a_sink_that_replays_nothing_ahead_gets_the_segments_as_they_are():
    segments = [rows(0, 100, 200, changes("shop.orders", ("a",), 3)), ddl(1, 200, 300, "alter_table", ("shop", "t")),
                rows(2, 300, 400, changes("shop.orders", ("b",), 2))]
    assert join_segments(segments, lambda segment: False) == segments
    assert join_segments(segments, lambda segment: segment.action != "alter_table") == segments


def test_ddl_after_the_last_rows_waits_in_its_place_and_a_snapshot_ends_the_joining():
    first = rows(0, 100, 200, changes("shop.orders", ("a",), 3))
    trailing = ddl(1, 200, 300, "truncate_table", ("shop", "carts"))
    copy = SnapshotSegment.__new__(SnapshotSegment)  # (only its place in the list matters here)
    assert join_segments([first, trailing], ANY) == [first, trailing]
    assert join_segments([first, trailing, copy, first], ANY) == [first, trailing, copy, first]


def test_ddl_before_any_rows_is_applied_in_its_place():
    create = ddl(0, 50, 100, "create_table", ("shop", "refunds"))
    first = rows(1, 100, 200, changes("shop.orders", ("a",), 3))
    assert join_segments([create, first], ANY) == [create, first]


def test_a_table_whose_changes_cannot_be_one_tables_ends_the_joining_before_it():
    """Other columns (a DDL on it came through a copy, say), or its files in a pack in one segment
    and an object of its own in the other: the rows before it commit first, the DDL between them
    waits in its place."""
    first = rows(0, 100, 200, changes("shop.orders", ("a",), 3))
    alter = ddl(1, 200, 300, "alter_table", ("shop", "customers"))
    widened = rows(2, 300, 400, changes("shop.orders", ("b",), 2, columns=(ID,)))
    own_object = rows(2, 300, 400, changes("shop.orders", ("seg-00002/shop.orders/part-00000.parquet",), 90_000,
                                           spans=()))
    assert join_rows([first, widened]) is None and join_rows([first, own_object]) is None
    assert join_segments([first, alter, widened], ANY) == [first, alter, widened]
    assert join_segments([first, alter, own_object], ANY) == [first, alter, own_object]


def test_three_row_segments_join_with_the_ddl_between_each():
    a = rows(0, 100, 200, changes("shop.a", ("p0",), 1))
    d1 = ddl(1, 200, 300, "create_table", ("shop", "c"))
    b = rows(2, 300, 400, changes("shop.b", ("p2",), 1), changes("shop.c", ("p2",), 1))
    d2 = ddl(3, 400, 500, "alter_table", ("shop", "d"))
    c = rows(4, 500, 600, changes("shop.a", ("p4",), 1), changes("shop.d", ("p4",), 1))
    d3 = ddl(5, 600, 700, "alter_table", ("shop", "b"))  # b has rows in the joined segments: waits
    (joined, waiting) = join_segments([a, d1, b, d2, c, d3], ANY)
    assert joined.ddl_ahead == (d1, d2) and joined.parts == 5 and joined.rows.end == c.end
    assert [t.qualified_name for t in joined.rows.tables] == ["shop.a", "shop.b", "shop.c", "shop.d"]
    assert waiting == d3
