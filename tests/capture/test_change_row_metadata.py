"""Every change row's metadata, exactly: each rows event's values spread over its rows, the row
index counting within the event, whatever chunks the writer cuts (real MariaDB leader)."""

from __future__ import annotations

from mysql_cdc.capture.table_changes import WriterLimits


def test_each_event_gives_its_rows_its_values_and_indexes_across_chunks(capture, unique_name):
    db = unique_name
    captured = capture([
        f"CREATE DATABASE {db}",
        f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT)",
        f"INSERT INTO {db}.t VALUES (1, 1), (2, 2), (3, 3), (4, 4), (5, 5)",  # one event of 5 rows
        "BEGIN",
        f"UPDATE {db}.t SET v = v + 10 WHERE id <= 2",
        f"DELETE FROM {db}.t WHERE id = 5",
        "COMMIT",
        f"INSERT INTO {db}.t VALUES (6, 6)",
    ], limits=WriterLimits(chunk_rows=3))  # a chunk is written after an event takes it to 3 rows or more
    segment = next(s for s in captured.batch.segments if getattr(s, "tables", None))
    rows = captured.rows(segment, "t")

    assert [(r["_op"], r["id"], r["_row_index"]) for r in rows] == [
        ("I", 1, 0), ("I", 2, 1), ("I", 3, 2), ("I", 4, 3), ("I", 5, 4),
        ("U", 1, 0), ("U", 2, 1), ("D", 5, 0), ("I", 6, 0),
    ]
    events = [(r["_binlog_file"], r["_binlog_seq"], r["_binlog_pos"], r["_commit_ts"], r["_gtid"], r["_txn"])
              for r in rows]
    # rows of one event share all of it; the update and the delete share their transaction
    assert len(set(events[:5])) == 1 and len(set(events[5:7])) == 1
    assert len({e[2] for e in events}) == 4  # four rows events, four positions
    assert events[5][4:] == events[7][4:] and events[5][4:] != events[0][4:] != events[8][4:]
    assert all(e[0] == captured.batch.start.file and e[1] == captured.batch.start.sequence for e in events)
    assert all(e[4] and e[4].count("-") == 2 for e in events)  # MariaDB GTIDs: domain-server-sequence
