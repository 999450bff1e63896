"""How a snapshot copy cuts a table into key ranges (``split_bounds``), on a real leader.

Whatever the cut, the ranges must cover every key exactly once (the first and last unbounded);
the way they are found decides only how even they are and what finding them costs.
"""

from __future__ import annotations

import pytest

from mysql_cdc.capture.snapshot.leader_snapshot import LeaderSnapshot
from mysql_cdc.capture.snapshot.copy import split_bounds
from mysql_cdc.mysql_server import MySQLSettings


def _rows_per_range(leader, db: str, table: str, column: str, bounds) -> list[int]:
    counts = []
    conn = leader.connect()
    try:
        with conn.cursor() as cur:
            for lo, hi in bounds:
                where = " AND ".join([*([f"{column} >= {lo}"] if lo is not None else []),
                                      *([f"{column} < {hi}"] if hi is not None else [])]) or "TRUE"
                cur.execute(f"SELECT COUNT(*) FROM {db}.{table} WHERE {where}")
                counts.append(cur.fetchone()[0])
    finally:
        conn.close()
    return counts


def _bounds(leader_user, db, table, column, split_rows, unique):
    with LeaderSnapshot(MySQLSettings(**leader_user), "mariadb") as snapshot:
        return split_bounds(snapshot, db, table, column, split_rows, unique)


@pytest.mark.parametrize("shape, keys, unique", [
    # dense, with a gap of 50 values in the middle: cut by arithmetic between MIN and MAX, in even
    # steps (a walk of the index would step 150 over the gap)
    ("dense", "seq + IF(seq > 500, 50, 0)", True),
    # sparse (1,000 key values per row): the estimate cannot place the cuts, the index walk does
    ("sparse", "seq * 1000", True),
    # the first of two key columns repeats (10 rows a value): ranges of it are no row counts, the
    # index walk again, whose cuts fall on value boundaries
    ("composite", "seq DIV 10", False),
])
def test_ranges_cover_every_key_once_and_hold_about_split_rows(leader, leader_user, unique_name, shape, keys,
                                                              unique):
    db = unique_name
    pk = "PRIMARY KEY (k)" if unique else "PRIMARY KEY (k, seq)"
    leader.run_sql([f"CREATE DATABASE {db}"])
    leader.run_sql([f"CREATE TABLE t (k BIGINT NOT NULL, seq INT NOT NULL, {pk})",
                    f"INSERT INTO t SELECT {keys}, seq FROM seq_1_to_1000",
                    "ANALYZE TABLE t"], database=db)  # the row estimate the arithmetic cut reads
    bounds = _bounds(leader_user, db, "t", "k", 100, unique)
    assert bounds[0][0] is None and bounds[-1][1] is None
    assert all(hi == next_lo for (_, hi), (next_lo, _) in zip(bounds, bounds[1:]))
    counts = _rows_per_range(leader, db, "t", "k", bounds)
    assert sum(counts) == 1000
    if shape == "dense":
        steps = {hi - lo for lo, hi in bounds[1:-1]}
        assert len(steps) == 1 and 8 <= len(bounds) <= 12 and max(counts) <= 2 * 100, (steps, counts)
    else:
        assert all(abs(c - 100) <= 10 for c in counts[:-1]) and len(counts) in (10, 11)


def test_an_empty_table_is_one_range(leader, leader_user, unique_name):
    leader.run_sql([f"CREATE DATABASE {unique_name}", f"CREATE TABLE {unique_name}.t (k INT PRIMARY KEY)"])
    assert _bounds(leader_user, unique_name, "t", "k", 100, True) == ((None, None),)
