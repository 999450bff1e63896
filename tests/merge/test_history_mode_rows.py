"""The rows of the history modes (``merge.soft_deletes``, ``merge.history``) from change rows written
out by hand: which event deletes each key last, how net rows and a table's rows are marked, and
which versions a segment opens and closes."""

from datetime import datetime, timezone

import pyarrow as pa
import pytest

from mysql_cdc.contracts import change_row as cr
from mysql_cdc.merge import soft_deletes as sd
from mysql_cdc.merge.errors import FollowerSchemaError
from mysql_cdc.merge.netting import net_keyed

FIELDS = [pa.field("id", pa.int32(), False), pa.field("v", pa.string())]
SCHEMA = pa.schema([*FIELDS, pa.field(cr.OP, pa.string()), pa.field(cr.BINLOG_SEQ, pa.int64()),
                    pa.field(cr.BINLOG_POS, pa.int64()), pa.field(cr.ROW_INDEX, pa.int32()),
                    pa.field(cr.COMMIT_TS, pa.timestamp("s", tz="UTC")), pa.field(cr.TXN, pa.string()),
                    pa.field(cr.BEFORE, pa.struct(FIELDS))])


def ts(second: int) -> datetime:
    return datetime(2026, 11, 29, 12, 0, second, tzinfo=timezone.utc)


def changes(rows) -> pa.Table:
    """rows: (op, pos, (id, v), before (id, v) or None, second, txn)."""
    data = {name: [] for name in SCHEMA.names}
    for index, (op, pos, image, before, second, txn) in enumerate(rows):
        data["id"].append(image[0])
        data["v"].append(image[1])
        data[cr.OP].append(op)
        data[cr.BINLOG_SEQ].append(1)
        data[cr.BINLOG_POS].append(pos)
        data[cr.ROW_INDEX].append(index)
        data[cr.COMMIT_TS].append(ts(second))
        data[cr.TXN].append(txn)
        data[cr.BEFORE].append(dict(zip(("id", "v"), before)) if before else None)
    return pa.table(data, schema=SCHEMA)


BATCH = changes([
    ("D", 100, (1, "one"), None, 1, "b.1:90"),  # 1 deleted
    ("I", 200, (1, "again"), None, 2, "b.1:190"),  # ... inserted again: live
    ("D", 300, (2, "two"), None, 3, "b.1:290"),  # 2 deleted
    ("U", 400, (30, "three"), (3, "three"), 4, "b.1:390"),  # 3 moved to 30: 3 deleted by this update
    ("U", 500, (4, "four!"), (4, "four"), 5, "b.1:490"),  # an update in place deletes nothing
    ("D", 600, (4, "four!"), None, 6, "b.1:590"),  # ... then 4 deleted
    ("I", 700, (5, "five"), None, 7, "b.1:690"),  # 5 created and deleted in the batch: never reached the lake
    ("D", 800, (5, "five"), None, 8, "b.1:790"),
])


def test_the_last_event_deleting_each_key_is_its_mark():
    marks = sd.deletion_marks(BATCH, ["id"])
    got = {r["id"]: (r[sd.DELETED_AT], r[sd.DELETED_TXN]) for r in marks.to_pylist()}
    assert got == {1: (ts(1), "b.1:90"), 2: (ts(3), "b.1:290"), 3: (ts(4), "b.1:390"),
                   4: (ts(6), "b.1:590"), 5: (ts(8), "b.1:790")}


def test_net_rows_carry_their_delete_s_marks_and_live_rows_none():
    net = net_keyed(BATCH, ["id"])
    marked = sd.with_marks(net, sd.deletion_marks(BATCH, ["id"]), ["id"])
    assert marked.column_names == [*net.column_names, *sd.COLUMNS]
    got = {r["id"]: (r[cr.NET_OP], r[sd.DELETED], r[sd.DELETED_AT], r[sd.DELETED_TXN]) for r in marked.to_pylist()}
    # 1 inserted again after its delete: live; 30 new; 5 created and deleted here: not in the net rows
    assert got == {1: ("U", False, None, None), 2: ("D", True, ts(3), "b.1:290"), 3: ("D", True, ts(4), "b.1:390"),
                   4: ("D", True, ts(6), "b.1:590"), 30: ("I", False, None, None)}


def test_a_truncate_or_a_copy_marks_live_rows_and_keeps_earlier_marks():
    rows = pa.table({"id": [1, 2], "v": ["a", "b"], sd.DELETED: [False, True],
                     sd.DELETED_AT: pa.array([None, ts(1)], sd.FIELDS[1].type),
                     sd.DELETED_TXN: pa.array([None, "b.1:90"], sd.FIELDS[2].type)})
    marked = sd.marked_removed(rows, None, "b.2:4")
    assert [(r["id"], r[sd.DELETED], r[sd.DELETED_AT], r[sd.DELETED_TXN]) for r in marked.to_pylist()] == [
        (1, True, None, "b.2:4"), (2, True, ts(1), "b.1:90")]
    assert sd.live(rows).to_pylist() == [{"id": 1, "v": "a"}]


def test_the_option_and_the_tables_it_cannot_take_are_named():
    assert sd.parse_globs(True) == ("*.*",) and sd.parse_globs(False) == ()
    assert sd.parse_globs(["shop.*"]) == ("shop.*",)
    assert sd.keeps_deleted(("shop.*",), "shop", "orders") and not sd.keeps_deleted(("shop.*",), "crm", "orders")
    with pytest.raises(ValueError, match=r"soft_deletes: must be true, false or a list of db.table globs"):
        sd.parse_globs("shop.orders")
    from mysql_cdc.merge.history import check_table

    with pytest.raises(FollowerSchemaError, match=r"shop.log has no primary key, and soft_deletes names it"):
        check_table("shop.log", (), ["a"], soft_deletes=True, history=False)
    with pytest.raises(FollowerSchemaError, match=r"shop.log has no primary key, and history names it"):
        check_table("shop.log", (), ["a"], soft_deletes=False, history=True)
    with pytest.raises(FollowerSchemaError, match=r"shop.t has the column\(s\) _deleted, which soft_deletes adds"):
        check_table("shop.t", ("id",), ["id", "_deleted"], soft_deletes=True, history=False)
    with pytest.raises(FollowerSchemaError, match=r"shop.t is named by both soft_deletes and history"):
        check_table("shop.t", ("id",), ["id"], soft_deletes=True, history=True)
    check_table("shop.t", ("id",), ["id", "_current"], soft_deletes=True, history=False)
    check_table("shop.log", (), ["a"], soft_deletes=False, history=False)


def test_a_history_table_s_versions_open_and_close_at_each_change():
    from decimal import Decimal

    from mysql_cdc.merge import history as h

    def seq(pos: int, index: int) -> Decimal:
        return Decimal(h.seq_number(1, pos, index))

    versions = h.segment_versions(BATCH, ["id", "v"], ["id"])
    # the current version of each key the batch touches ends at its first change (30 is new: none matches)
    assert {r["id"]: (r[h.VALID_TO], r[h.VALID_TO_SEQ]) for r in versions.closing.to_pylist()} == {
        1: (ts(1), seq(100, 0)), 2: (ts(3), seq(300, 2)), 3: (ts(4), seq(400, 3)), 30: (ts(4), seq(400, 3)),
        4: (ts(5), seq(500, 4)), 5: (ts(7), seq(700, 6))}
    added = sorted(((r["id"], r["v"], r[h.VALID_FROM], r[h.VALID_FROM_SEQ], r[h.VALID_TO], r[h.VALID_TO_SEQ],
                     r[h.CURRENT]) for r in versions.added.to_pylist()), key=lambda r: (r[0], r[3]))
    assert added == [
        (1, "again", ts(2), seq(200, 1), None, None, True),
        (4, "four!", ts(5), seq(500, 4), ts(6), seq(600, 5), False),  # updated, then deleted
        (5, "five", ts(7), seq(700, 6), ts(8), seq(800, 7), False),  # lived between two runs: kept, closed
        (30, "three", ts(4), seq(400, 3), None, None, True),  # the moved key's new version
    ]
    assert h.current(pa.table({"id": [1, 1], h.CURRENT: [False, True]})).to_pylist() == [{"id": 1}]
