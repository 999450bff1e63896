"""The driver's netting of small tables (``merge.netting``, Arrow) against the Spark transforms,
which define the semantics: the same change rows through both give the same net rows. Change
rows come from a seeded simulation of a leader table (key changes, deletes after inserts, rows
deleted that existed before the batch, NULLs, duplicate keyless rows), and a few cases are
checked against rows written out by hand."""

import random
from decimal import Decimal

import pyarrow as pa
import pytest

from mysql_cdc.merge import netting
from mysql_cdc.contracts import BinlogPosition, ColumnSpec, TableChanges
from mysql_cdc.contracts import change_row as cr
from mysql_cdc.merge.spark_read import spark_schema
from mysql_cdc.merge.transforms import after_checkpoint, expand_copies, net_keyed_changes, net_keyless_changes

FIELDS = [pa.field("id", pa.int32(), False), pa.field("k2", pa.string(), False), pa.field("v", pa.string()),
          pa.field("amount", pa.decimal128(10, 2))]
COLUMNS = [f.name for f in FIELDS]
SCHEMA = pa.schema([*FIELDS, pa.field(cr.OP, pa.string()), pa.field(cr.BINLOG_SEQ, pa.int64()),
                    pa.field(cr.BINLOG_POS, pa.int64()), pa.field(cr.ROW_INDEX, pa.int32()),
                    pa.field(cr.BEFORE, pa.struct(FIELDS))])


def change_table(rows) -> pa.Table:
    """rows: (op, (seq, pos, index), image, before image or None); images are (id, k2, v, amount)."""
    data = {name: [] for name in SCHEMA.names}
    for op, (seq, pos, index), image, before in rows:
        for name, value in zip(COLUMNS, image):
            data[name].append(value)
        data[cr.OP].append(op)
        data[cr.BINLOG_SEQ].append(seq)
        data[cr.BINLOG_POS].append(pos)
        data[cr.ROW_INDEX].append(index)
        data[cr.BEFORE].append(dict(zip(COLUMNS, before)) if before else None)
    return pa.table(data, schema=SCHEMA)


def spark_rows(spark, table: pa.Table, keyed: bool) -> list[tuple]:
    df = spark.createDataFrame(table.to_pylist(), spark_schema(table.schema))
    net = net_keyed_changes(df, ["id", "k2"]) if keyed else expand_copies(net_keyless_changes(df, COLUMNS))
    return sorted((tuple(r) for r in net.collect()), key=repr)


def arrow_rows(net: pa.Table) -> list[tuple]:
    return sorted((tuple(r.values()) for r in net.to_pylist()), key=repr)


def keyed_history(rnd: random.Random, changes: int) -> list:
    """Change rows of a simulated keyed table that held some rows before the batch."""
    table = {(i, "a"): (f"old {i}", Decimal("1.00")) for i in range(8)}
    rows, seq, pos = [], 1, 100
    for _ in range(changes):
        pos += rnd.choice((0, 40))  # several rows of one event share a position
        if pos > 2000:
            seq, pos = seq + 1, 4
        index = sum(1 for r in rows if r[1][:2] == (seq, pos))
        value = rnd.choice((None, f"v{rnd.randrange(5)}")), rnd.choice((None, Decimal(rnd.randrange(999)) / 100))
        key = (rnd.randrange(12), rnd.choice("ab"))
        if key not in table:
            table[key] = value
            rows.append(("I", (seq, pos, index), (*key, *value), None))
            continue
        action = rnd.choice(("update", "move", "delete"))
        old = (*key, *table[key])
        if action == "delete":
            del table[key]
            rows.append(("D", (seq, pos, index), old, None))
        elif action == "update":
            table[key] = value
            rows.append(("U", (seq, pos, index), (*key, *value), old))
        else:
            new_key = (rnd.randrange(12), rnd.choice("ab"))
            if new_key in table:
                continue
            del table[key]
            table[new_key] = value
            rows.append(("U", (seq, pos, index), (*new_key, *value), old))
    return rows


def keyless_history(rnd: random.Random, changes: int) -> list:
    """Change rows of a simulated table without a key: duplicates, NULLs, copies moved."""
    values = [(1, "a", None, None), (1, "a", "x", Decimal("0.50")), (2, "b", None, Decimal("3.00"))]
    table = [values[0], values[0], values[1]]  # held before the batch
    rows = []
    for n in range(changes):
        position = (1, 100 + n, 0)
        action = rnd.choice(("insert", "delete", "update")) if table else "insert"
        if action == "insert":
            row = rnd.choice(values)
            table.append(row)
            rows.append(("I", position, row, None))
        elif action == "delete":
            row = table.pop(rnd.randrange(len(table)))
            rows.append(("D", position, row, None))
        else:
            old = table.pop(rnd.randrange(len(table)))
            new = rnd.choice(values)
            table.append(new)
            rows.append(("U", position, new, old))
    return rows


@pytest.mark.parametrize("seed", range(6))
def test_keyed_netting_equals_the_spark_transform(spark, seed):
    changes = change_table(keyed_history(random.Random(seed), 60))
    net = netting.net_keyed(changes, ["id", "k2"])
    assert arrow_rows(net) == spark_rows(spark, changes, keyed=True)
    # rows leave in key order (the follower then appends to its index)
    keys = [(r["id"], r["k2"]) for r in net.to_pylist()]
    assert keys == sorted(keys)
    # the order is the binlog's (file, offset, row), not the rows' order in the files
    shuffled = changes.take(random.Random(seed).sample(range(changes.num_rows), changes.num_rows))
    assert netting.net_keyed(shuffled, ["id", "k2"]).to_pylist() == net.to_pylist()


@pytest.mark.parametrize("seed", range(6))
def test_keyless_netting_equals_the_spark_transform(spark, seed):
    changes = change_table(keyless_history(random.Random(seed), 40))
    assert arrow_rows(netting.net_keyless(changes, COLUMNS)) == spark_rows(spark, changes, keyed=False)


def test_keyed_netting_of_rows_written_out():
    changes = change_table([
        ("I", (1, 100, 0), (7, "a", "new", None), None),
        ("U", (1, 200, 0), (7, "a", "newer", None), (7, "a", "new", None)),  # still a new key: an insert
        ("D", (1, 200, 1), (3, "a", "old", None), None),
        ("U", (1, 300, 0), (4, "b", "moved", None), (4, "a", "here", None)),  # key change: delete 4a, upsert 4b
        ("I", (2, 4, 0), (9, "a", "gone", None), None),
        ("D", (2, 50, 0), (9, "a", "gone", None), None),  # created and deleted in the batch: nothing
    ])
    assert netting.net_keyed(changes, ["id", "k2"]).to_pylist() == [
        {"id": 3, "k2": "a", "v": "old", "amount": None, cr.NET_OP: "D", cr.NET_COUNT: 1},
        {"id": 4, "k2": "a", "v": "here", "amount": None, cr.NET_OP: "D", cr.NET_COUNT: 1},
        {"id": 4, "k2": "b", "v": "moved", "amount": None, cr.NET_OP: "I", cr.NET_COUNT: 1},
        {"id": 7, "k2": "a", "v": "newer", "amount": None, cr.NET_OP: "I", cr.NET_COUNT: 1},
    ]


def key_only_before(changes: pa.Table, keys: list[str]) -> pa.Table:
    """The change rows as the merge reads a keyed table's: ``_before`` holding the key only
    (``reader.change_schema``)."""
    before = changes.column(cr.BEFORE).combine_chunks()
    key_only = pa.StructArray.from_arrays([before.field(k) for k in keys], fields=[before.type.field(k) for k in keys],
                                          mask=before.is_null())
    return changes.set_column(changes.schema.get_field_index(cr.BEFORE), cr.BEFORE, key_only)


def test_a_moved_keys_delete_from_a_key_only_before_image():
    changes = key_only_before(change_table([
        ("U", (1, 300, 0), (4, "b", "moved", Decimal("2.50")), (4, "a", "here", Decimal("1.00"))),
    ]), ["id", "k2"])
    assert changes.schema.field(cr.BEFORE).type.num_fields == 2
    # the delete needs the old key only; the rest of the old row was not read
    assert netting.net_keyed(changes, ["id", "k2"]).to_pylist() == [
        {"id": 4, "k2": "a", "v": None, "amount": None, cr.NET_OP: "D", cr.NET_COUNT: 1},
        {"id": 4, "k2": "b", "v": "moved", "amount": Decimal("2.50"), cr.NET_OP: "I", cr.NET_COUNT: 1},
    ]


@pytest.mark.parametrize("seed", range(4))
def test_keyed_netting_of_a_key_only_before_image_equals_the_spark_transform(spark, seed):
    whole = change_table(keyed_history(random.Random(seed), 60))
    changes = key_only_before(whole, ["id", "k2"])
    net = netting.net_keyed(changes, ["id", "k2"])
    assert arrow_rows(net) == spark_rows(spark, changes, keyed=True)

    # the net rows of the whole before-image, but for what a delete does not use: its other columns
    def deleted_keys_only(rows: pa.Table) -> list[dict]:
        return [{**r, "v": None, "amount": None} if r[cr.NET_OP] == "D" else r for r in rows.to_pylist()]

    assert deleted_keys_only(net) == deleted_keys_only(netting.net_keyed(whole, ["id", "k2"]))


def test_keyless_netting_of_rows_written_out():
    row, other = (1, "a", None, None), (2, "b", "x", Decimal("1.50"))
    changes = change_table([
        ("I", (1, 100, 0), row, None),
        ("I", (1, 100, 1), row, None),
        ("U", (1, 200, 0), other, row),  # one copy moves: row +1 net, other +1
        ("D", (1, 300, 0), (3, "c", None, None), None),  # held before the batch
    ])
    assert sorted(arrow_rows(netting.net_keyless(changes, COLUMNS)), key=repr) == sorted([
        (1, "a", None, None, "I", 1),
        (2, "b", "x", Decimal("1.50"), "I", 1),
        (3, "c", None, None, "D", 1),
    ], key=repr)


@pytest.mark.parametrize("position, kept_rows", [
    (BinlogPosition("b.000001", 100), "all"), (BinlogPosition("b.000001", 150), "some"),
    (BinlogPosition("b.000001", 1000), "some"), (BinlogPosition("b.000002", 4), "none"),
])
def test_rows_after_equals_the_spark_transform(spark, position, kept_rows):
    changes = change_table(keyed_history(random.Random(1), 80))
    df = spark.createDataFrame(changes.to_pylist(), spark_schema(SCHEMA))
    expected = sorted((tuple(r.asDict(recursive=True).values()) for r in after_checkpoint(df, position).collect()),
                      key=repr)
    kept = netting.rows_after(changes, position)
    assert sorted((tuple(r.values()) for r in kept.to_pylist()), key=repr) == expected
    assert kept_rows == ("all" if kept.num_rows == changes.num_rows else "some" if kept.num_rows else "none")


def test_the_threshold_comes_from_its_spark_property():
    assert netting.driver_net_rows(None) == netting.DRIVER_NET_ROWS
    assert netting.driver_net_rows("0") == 0
    for bad in ("-1", "many", ""):
        with pytest.raises(ValueError, match=r"spark\.mysql_cdc\.driverNetRows=.*>= 0 .*spark_conf"):
            netting.driver_net_rows(bad)


def test_no_change_rows_net_to_no_rows():
    """A replay overlapping the checkpoint can leave a table no rows after it."""
    changes = netting.rows_after(change_table([("I", (1, 100, 0), (1, "a", None, None), None)]),
                                 BinlogPosition("b.000002", 4))
    assert changes.num_rows == 0
    for net in (netting.net_keyed(changes, ["id", "k2"]), netting.net_keyless(changes, COLUMNS)):
        assert net.num_rows == 0 and net.column_names == [*COLUMNS, cr.NET_OP, cr.NET_COUNT]


def int_key_history(rnd: random.Random, changes: int, moves: bool) -> list:
    """Change rows of a simulated table keyed by ``id`` alone: inserts, updates, deletes (rows that
    existed before the batch among them) and, with ``moves``, updates that change the key."""
    table = {i: (f"old {i}", Decimal("1.00")) for i in range(8)}
    rows = []
    for n in range(changes):
        position = (1, 100 + n // 2, n % 2)  # two rows per event
        value = rnd.choice((None, f"v{rnd.randrange(5)}")), rnd.choice((None, Decimal(rnd.randrange(999)) / 100))
        key = rnd.randrange(12)
        if key not in table:
            table[key] = value
            rows.append(("I", position, (key, "a", *value), None))
            continue
        old = (key, "a", *table[key])
        action = rnd.choice(("update", "delete", "move") if moves else ("update", "delete"))
        new_key = rnd.randrange(12) if action == "move" else key
        if action == "delete":
            del table[key]
            rows.append(("D", position, old, None))
        elif new_key == key or new_key not in table:
            del table[key]
            table[new_key] = value
            rows.append(("U", position, (new_key, "a", *value), old))
    return rows


def test_tables_netted_together_are_each_netted_as_alone():
    """``net_tables`` nets the tables with one integer key and no key moved in one pass for all of
    them, the others one by one; each table's net rows are exactly ``net_rows``' (which the tests
    above hold to the Spark transforms), schema included."""
    rnd = random.Random(7)
    columns = tuple(ColumnSpec(f.name, "x", str(f.type)) for f in FIELDS)
    keyed, by_pair, keyless = (TableChanges("db", "t", columns, keys, (), 0) for keys in (("id",), ("id", "k2"), ()))
    cases = [(change_table([]), keyed)]  # no rows, first
    for n in range(24):
        changes = change_table(int_key_history(rnd, rnd.randrange(1, 50), moves=n % 4 == 3))
        if n % 5 == 4:  # rows not in binlog order in the files: sorted, this table only
            changes = changes.take(rnd.sample(range(changes.num_rows), changes.num_rows))
        cases.append((changes, keyed))
    cases += [
        (change_table([]), keyed),  # no rows
        (change_table(keyed_history(rnd, 40)), by_pair),  # a key of two columns
        (change_table(keyless_history(rnd, 30)), keyless),
    ]
    wide = change_table(int_key_history(rnd, 30, moves=False))  # the same table, its key as uint64
    wide = wide.set_column(0, pa.field("id", pa.uint64(), False), wide.column("id").cast(pa.uint64()))
    cases += [(wide, keyed), (change_table([]), keyed), (change_table([]), keyed)]  # no rows, last
    grouped = [netting._group_key(ordered, t, netting.op_letters(netting.as_array(ordered.column(cr.OP)))) is not None
               for ordered, t in ((netting._in_order(c), t) for c, t in cases)]
    assert sum(grouped) >= 15 and not all(grouped)  # both paths taken
    nets = netting.net_tables([c for c, _ in cases], [t for _, t in cases])
    for (changes, table), net in zip(cases, nets):
        alone = netting.net_rows(changes, table)
        assert net.schema == alone.schema
        assert net.to_pylist() == alone.to_pylist()


def test_the_op_letters_of_tables_made_together_are_each_tables_own():
    """``each_op_letters`` makes the letters of many tables in one call; each table's must be what
    ``op_letters`` makes of its column alone: tables empty, of one row, sliced (an offset into
    their buffers) or of several chunks."""
    ops = pa.array(list("IUDDUIIUD"))
    tables = [pa.table({cr.OP: ops.slice(0, 0)}), pa.table({cr.OP: ops}), pa.table({cr.OP: ops.slice(3, 4)}),
              pa.table({cr.OP: ops.slice(8, 1)}), pa.Table.from_batches([pa.record_batch({cr.OP: ops.slice(1, 2)}),
                                                                          pa.record_batch({cr.OP: ops.slice(5, 3)})])]
    together = netting.each_op_letters(tables)
    assert [t.tolist() for t in together] == [netting.op_letters(netting.as_array(t.column(cr.OP))).tolist()
                                              for t in tables]
    assert [b"".join(t).decode() for t in together] == ["", "IUDDUIIUD", "DUII", "D", "UDIIU"]
    assert [t.tolist() for t in netting.each_op_letters(tables[2:3])] == [[b"D", b"U", b"I", b"I"]]
    assert netting.each_op_letters([]) == []


def test_the_rows_of_tables_kept_together_are_those_each_table_keeps_alone():
    """``rows_after_each`` compares many tables' rows with their positions in one pass; each table
    must keep exactly the rows ``rows_after`` keeps of it alone: all, some, none, from positions in
    another binlog file, tables without rows among them."""
    rnd = random.Random(3)
    tables = [change_table(keyed_history(rnd, n)) for n in (40, 0, 25, 60, 1)]
    positions = [BinlogPosition("b.000001", 100), BinlogPosition("b.000001", 150), BinlogPosition("b.000001", 150),
                 BinlogPosition("b.000002", 4), BinlogPosition("b.000001", 4)]
    for chosen in (positions, [BinlogPosition("b.000001", 4)] * len(tables)):
        together = netting.rows_after_each(tables, chosen)
        alone = [netting.rows_after(t, p) for t, p in zip(tables, chosen)]
        assert [t.to_pylist() for t in together] == [t.to_pylist() for t in alone]
    kept = [t.num_rows for t in netting.rows_after_each(tables, positions)]
    assert kept[0] == tables[0].num_rows and 0 < kept[2] < tables[2].num_rows and kept[3] == 0, kept
    assert netting.rows_after_each([], []) == []
