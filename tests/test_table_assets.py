"""The asset events a merge task emits (``mysql_cdc.table_assets``): one per follower table it
changed, over inline summaries and batches."""

from __future__ import annotations

from mysql_cdc.contracts import BinlogPosition, ChangeBatch, DdlSegment, DdlTarget, PositionRange, batch_id_for
from mysql_cdc.merge.report import MergeSummary, TableReport
from mysql_cdc.table_assets import changed_tables, pipeline_alias, table_events

P1, P2, P3 = (BinlogPosition("binlog.000001", o) for o in (4, 900, 1800))


def batch(start: BinlogPosition, end: BinlogPosition, *ddl: tuple[str, str, str | None]) -> ChangeBatch:
    segments = tuple(DdlSegment(index=i, start=start, end=end, schema=db, statement=f"-- {action}", action=action,
                                targets=(DdlTarget(db, table),))
                     for i, (action, db, table) in enumerate(ddl))
    return ChangeBatch(pipeline="shop_cdc", batch_id=batch_id_for(PositionRange(start, end)), start=start, end=end,
                       segments=segments)


def summary(b: ChangeBatch, *tables: TableReport, noop: bool = False) -> MergeSummary:
    return MergeSummary("shop_cdc", b.batch_id, noop, str(b.end), tables=list(tables))


def uri(database: str, table: str) -> str:
    return f"s3://lake/cdc/{database}/{table}"


def test_each_changed_table_once_with_what_happened_to_it_over_the_batches():
    first = batch(P1, P2, ("alter_table", "shop", "orders"), ("create_database", "audit", None))
    second = batch(P2, P3, ("rename_table", "shop", "carts"))
    summaries = [
        summary(first, TableReport("shop.orders", 5, inserted=2, updated=1),
                TableReport("shop.customers", 1000, kind="snapshot")),
        summary(second, TableReport("shop.orders", 3, deleted=1),
                TableReport("shop.notes", 2)),  # an insert and its delete: the table is as it was
    ]
    events = table_events("shop_cdc", summaries, [first, second], uri, {"shop.orders": 7, "shop.customers": 2})
    common = {"pipeline": "shop_cdc", "position": str(P3), "batches": [first.batch_id, second.batch_id]}
    assert events == [
        ("s3://lake/cdc/shop/orders", {**common, "table": "shop.orders", "inserted": 2, "updated": 1, "deleted": 1,
                                       "copied": False, "ddl": ["alter_table"], "version": 7}),
        ("s3://lake/cdc/shop/customers", {**common, "table": "shop.customers", "inserted": 0, "updated": 0,
                                          "deleted": 0, "copied": True, "ddl": [], "version": 2}),
        ("s3://lake/cdc/shop/carts", {**common, "table": "shop.carts", "inserted": 0, "updated": 0, "deleted": 0,
                                      "copied": False, "ddl": ["rename_table"]}),  # no version: gone or unknown
    ]


def test_a_follower_without_versions_and_a_merge_that_changed_nothing():
    b = batch(P1, P2)
    events = table_events("shop_cdc", [summary(b, TableReport("shop.orders", 1, updated=1))], [b], uri, None)
    assert [(u, "version" in extra) for u, extra in events] == [("s3://lake/cdc/shop/orders", False)]
    assert table_events("shop_cdc", [summary(b, TableReport("shop.orders", 1, updated=1), noop=True)], [b], uri,
                        None) == []  # a replay of an applied batch changes nothing
    assert changed_tables([summary(b, TableReport("shop.orders", 4))], [b]) == {}


def test_the_alias_names_the_pipeline():
    assert pipeline_alias("shop_cdc") == "mysql-cdc/shop_cdc"
