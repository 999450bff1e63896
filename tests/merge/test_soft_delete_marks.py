"""Soft deletes' marks (``merge.soft_deletes``) on change rows written out by hand: which event
deletes each key last, and how the net rows and a table's rows are marked."""

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
    with pytest.raises(FollowerSchemaError, match=r"shop.log has no primary key, and soft_deletes names it"):
        sd.check_table("shop.log", (), ["a"])
    with pytest.raises(FollowerSchemaError, match=r"shop.t has the column\(s\) _deleted, which soft_deletes adds"):
        sd.check_table("shop.t", ("id",), ["id", "_deleted"])
