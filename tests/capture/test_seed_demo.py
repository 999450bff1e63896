"""The seed demo (shared/seeds/000_*: flvDb.pet) captured in one range, against a real leader."""

import datetime as dt

from demo_workload import seed_statements  # the demo's own workload: what the demo shows is tested

from mysql_cdc.capture.filters import TableFilter
from mysql_cdc.contracts import ChangeBatch, DdlSegment, DdlTarget, RowSegment

PET_COLUMNS = ["name", "owner", "species", "sex", "birth"]


def _image(row, columns):
    return {c: row[c] for c in columns}


def test_seed_demo_segments_and_row_images(capture, unique_name):
    db = unique_name
    captured = capture(seed_statements(db))
    batch = captured.batch
    kinds = [(s.kind, getattr(s, "action", None)) for s in batch.segments]
    assert kinds == [
        ("ddl", "create_database"),
        ("ddl", "create_table"),
        ("rows", None),
        ("ddl", "alter_table"),
        ("rows", None),
    ]
    create_db, create_table, rows1, alter, rows2 = batch.segments
    assert create_db.targets == (DdlTarget(db),)
    assert create_table.schema == db and create_table.targets == (DdlTarget(db, "pet"),)
    assert alter.statement == "ALTER TABLE pet ADD COLUMN last_vaccine DATE"
    # segments tile the range in binlog order, each starting where the previous ended
    assert batch.segments[0].start == batch.start
    for before, after in zip(batch.segments, batch.segments[1:]):
        assert before.end == after.start
    assert rows2.end == batch.end

    (pet1,) = rows1.tables
    assert [c.name for c in pet1.columns] == PET_COLUMNS
    assert pet1.key_columns == ()  # pet has no primary key: applied by full before-image
    assert [c.mysql_type for c in pet1.columns] == ["varchar", "varchar", "varchar", "char", "date"]
    changes = captured.rows(rows1, "pet")
    assert [r["_op"] for r in changes] == ["I", "I", "U"]
    assert _image(changes[0], PET_COLUMNS) == {
        "name": "Puffball", "owner": "Diane", "species": "hamster", "sex": "f", "birth": dt.date(1999, 3, 30)}
    assert changes[2]["birth"] == dt.date(1989, 8, 31)
    assert changes[2]["_before"] == {
        "name": "Jack", "owner": "Peter", "species": "dog", "sex": "m", "birth": dt.date(1999, 3, 30)}
    assert changes[0]["_before"] is None and changes[1]["_before"] is None
    # total order: (seq, pos, index) strictly increasing
    order = [(r["_binlog_seq"], r["_binlog_pos"], r["_row_index"]) for r in changes]
    assert order == sorted(order) and len(set(order)) == 3
    assert all(r["_gtid"] for r in changes)  # MariaDB always has GTIDs

    (pet2,) = rows2.tables
    assert [c.name for c in pet2.columns] == PET_COLUMNS + ["last_vaccine"]
    changes = captured.rows(rows2, "pet")
    assert [r["_op"] for r in changes] == ["D", "I", "U"]
    assert changes[0]["name"] == "Puffball" and changes[0]["last_vaccine"] is None  # before-image of delete
    assert changes[2]["last_vaccine"] == dt.date(2020, 6, 10)
    assert changes[2]["_before"]["last_vaccine"] is None and changes[2]["_before"]["name"] == "Spot"
    assert batch.row_count == 6

    # the manifest on storage is the batch we were handed back
    stored = ChangeBatch.from_json(captured.store.get_bytes(f"{batch.prefix}/manifest.json"))
    assert stored == batch


def test_excluded_tables_emit_neither_rows_nor_ddl(capture, unique_name):
    db = unique_name
    captured = capture(
        [
            f"CREATE DATABASE {db}",
            f"CREATE TABLE {db}.kept (id INT PRIMARY KEY, v INT)",
            f"CREATE TABLE {db}.secret (id INT PRIMARY KEY, v INT)",
            f"INSERT INTO {db}.kept VALUES (1, 1)",
            f"INSERT INTO {db}.secret VALUES (1, 1)",
            f"ALTER TABLE {db}.secret ADD COLUMN w INT",
            f"DROP TABLE {db}.secret",
        ],
        table_filter=TableFilter(include=(f"{db}.*",), exclude=(f"{db}.sec*",)),
    )
    segments = captured.batch.segments
    assert [(s.kind, getattr(s, "action", None)) for s in segments] == [
        ("ddl", "create_database"), ("ddl", "create_table"), ("rows", None)]
    assert isinstance(segments[2], RowSegment)
    assert [t.table for t in segments[2].tables] == ["kept"]
    assert segments[2].tables[0].key_columns == ("id",)
    assert all("secret" not in s.statement for s in segments if isinstance(s, DdlSegment))
