"""Every MySQL type the Types table of docs/types.md names reaches the follower exactly: inserts (spark-submit), then
updates of every column and deletes (in-process), in a keyed table and in a keyless one (whose
deletes match rows by every column's value)."""

import pytest

from merge_helpers import assert_same_database, job_output, spark_submit, table_rows
from mysql_cdc.merge.netting import DRIVER_NET_ROWS
from mysql_cdc.merge.job import run_merge

COLUMNS = """
    ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, siu SMALLINT UNSIGNED,
    mi MEDIUMINT, miu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED,
    bi BIGINT, biu BIGINT UNSIGNED,
    d_small DECIMAL(10,2), d_wide DECIMAL(65,30),
    f FLOAT, dbl DOUBLE,
    dt_date DATE, dt6 DATETIME(6), dt0 DATETIME, ts6 TIMESTAMP(6) NULL, tm6 TIME(6), tm0 TIME, yr YEAR,
    js JSON, en ENUM('small','medium','large'), st SET('a','b','c'),
    b1 BIT(1), b64 BIT(64), bin4 BINARY(4), vb VARBINARY(64), bl BLOB, lbl LONGBLOB,
    txt TEXT, vc VARCHAR(100), ch CHAR(10)
"""

ROW_1 = (
    "-128, 255, -32768, 65535, -8388608, 16777215, -2147483648, 4294967295, "
    "-9223372036854775808, 18446744073709551615, "
    "-12345678.90, '-12345678901234567890123456789012345.123456789012345678901234567890', "
    "3.14159, 2.718281828459045, "
    "'1000-01-01', '9999-12-31 23:59:59.999999', '2024-02-29 12:00:00', '2038-01-19 03:14:07.999999', "
    "'838:59:59.000000', '-12:00:00', 2155, "
    "'{\"k\": [1, 2.5, \"x\"], \"nested\": {\"t\": true, \"n\": null}}', 'large', 'a,c', "
    "b'1', b'1111111111111111111111111111111111111111111111111111111111111111', "
    "X'00FF0A00', X'DEADBEEF00', X'0001020300FF09', REPEAT(X'00', 70000), "
    "'utf8mb4 😀 ✓ naïve', 'tab\\there\\nnewline \\\\ backslash \\\\N', 'pad'"
)
ROW_2 = (
    "127, 0, 32767, 0, 8388607, 0, 2147483647, 0, 9223372036854775807, 0, "
    "0.01, '0.000000000000000000000000000001', -1.5, -0.0000001, "
    "'2000-01-01', '1970-01-01 00:00:01.000001', '2000-01-01 00:00:00', '1970-01-01 00:00:01.000000', "
    "'00:00:00.000001', '00:00:00', 1901, "
    "'[]', 'small', '', b'0', b'0', X'00000000', X'', X'', X'', '', '', ''"
)
NULLS = ", ".join(["NULL"] * 33)

UPDATE_ALL = (
    "SET ti = ti DIV 2, tiu = 7, si = 7, siu = 7, mi = 7, miu = 7, i = 7, iu = 7, bi = 7, "
    "biu = 18446744073709551614, d_small = 1.23, d_wide = 1.5, f = 0.5, dbl = 0.25, "
    "dt_date = '2020-06-10', dt6 = '2020-06-10 10:00:00.123456', dt0 = '2020-06-10 10:00:00', "
    "ts6 = '2020-06-10 10:00:00.654321', tm6 = '-838:59:58.999999', tm0 = '-01:02:03', yr = 2000, "
    "js = '{\"updated\": 1}', en = 'medium', st = 'a,b,c', b1 = b'0', b64 = b'101', bin4 = X'01020304', "
    "vb = X'00', bl = X'FF00FF', lbl = X'01', txt = 'ünïcödé', vc = 'up\\tdated', ch = 'u'"
)
FILL_NULLS = (
    "SET ti = 1, tiu = 1, si = 1, siu = 1, mi = 1, miu = 1, i = 1, iu = 1, bi = 1, biu = 9223372036854775808, "
    "d_small = -0.01, d_wide = -1, f = -3.4e38, dbl = 1.7976931348623157e308, dt_date = '2001-02-03', "
    "dt6 = '2001-02-03 04:05:06.7', dt0 = '2001-02-03 04:05:06', ts6 = '2001-02-03 04:05:06.000007', "
    "tm6 = '00:00:00', tm0 = '-838:59:59', yr = 1999, js = 'null', en = 'large', st = 'b', b1 = b'1', "
    "b64 = b'0', bin4 = X'FFFFFFFF', vb = X'0A0D09', bl = X'5C4E', lbl = X'00', txt = '\\\\N', vc = ' ', ch = 'z'"
)


def type_tables(db: str) -> list[str]:
    """The type tests' first batch: ``types`` (keyed) and ``bag`` (no key: applied by full row
    image) with every column, two rows of values and one of NULLs (the bag holds duplicates)."""
    return [
        f"CREATE DATABASE {db}", f"USE {db}",
        f"CREATE TABLE types (id INT NOT NULL PRIMARY KEY, {COLUMNS})", f"CREATE TABLE bag ({COLUMNS})",
        f"INSERT INTO types VALUES (1, {ROW_1}), (2, {ROW_2}), (3, {NULLS})",
        f"INSERT INTO bag VALUES ({ROW_1}), ({ROW_1}), ({ROW_2}), ({NULLS}), ({NULLS})",
    ]


# the first batch goes through spark-submit (small tables: netted on the driver), the second
# in-process, netted on the driver (DRIVER_NET_ROWS) or by Spark (0)
@pytest.mark.parametrize("flavor, driver_rows",
                         [("mariadb", DRIVER_NET_ROWS), ("mariadb", 0), ("mysql", DRIVER_NET_ROWS)],
                         ids=["mariadb-driver", "mariadb-spark", "mysql-driver"])
def test_every_type_round_trips_through_the_merge(make_pipeline, spark, tmp_path, flavor, driver_rows):
    pipeline = make_pipeline(flavor=flavor)
    leader, follower, db = pipeline.leader, pipeline.follower, pipeline.database
    first = pipeline.capture(type_tables(db))
    result = spark_submit(pipeline, first, tmp_path / "job")
    assert result.returncode == 0, job_output(result)[-4000:]
    assert_same_database(leader, follower, db)
    assert sum(table_rows(follower, db, "bag").values()) == 5

    second = pipeline.capture([
        f"USE {db}",
        f"UPDATE types {UPDATE_ALL} WHERE id = 1",
        f"UPDATE types {FILL_NULLS} WHERE id = 3",
        "DELETE FROM types WHERE id = 2",
        f"UPDATE bag {UPDATE_ALL} WHERE ti = -128 LIMIT 1",  # one of two identical rows
        f"UPDATE bag {FILL_NULLS} WHERE ti IS NULL LIMIT 1",
        "DELETE FROM bag WHERE ti = 127",
    ])
    run_merge(spark, pipeline.manifest_uri(second), pipeline.secrets, driver_rows)
    assert_same_database(leader, follower, db)
    assert pipeline.checkpoint().position == second.end
