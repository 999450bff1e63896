"""The changelog's transform (``sinks.delta.changelog.changelog_rows``) on small inline change rows:
every row kept in its Delta values (a TIME's microseconds, a DATETIME's wall clock, in the
before-image too), the global change sequence, NULL before-images of inserts and deletes."""

import datetime as dt
from decimal import Decimal

from pyspark.sql import Row

from merge_helpers import assert_dataframe_equal as assertDataFrameEqual
from mysql_cdc.contracts import ColumnSpec
from mysql_cdc.kinds.delta.sink.changelog import changelog_rows

COLUMNS = (ColumnSpec("id", "int", "int32"), ColumnSpec("at", "datetime(6)", "timestamp[us]"),
           ColumnSpec("took", "time(6)", "duration[us]"))
SCHEMA = (
    "id INT, at TIMESTAMP, took INTERVAL DAY TO SECOND, _op STRING, _binlog_file STRING, _binlog_seq LONG, "
    "_binlog_pos LONG, _row_index INT, _commit_ts TIMESTAMP, _gtid STRING, _txn STRING, "
    "_before STRUCT<id: INT, at: TIMESTAMP, took: INTERVAL DAY TO SECOND>"
)
T0 = dt.datetime(2024, 5, 6, 7, 8, 9, 123456)
COMMITTED = dt.datetime(2024, 5, 6, 7, 8, 10)


def test_every_change_row_in_delta_values_with_its_place_in_the_pipeline(spark):
    rows = [
        (1, T0, dt.timedelta(hours=-1, microseconds=5), "I", "bin.000002", 2, 300, 0, COMMITTED, None, "bin.000002:200",
         None),
        (1, None, None, "U", "bin.000002", 2, 300, 1, COMMITTED, None, "bin.000002:200",
         (1, T0, dt.timedelta(hours=-1, microseconds=5))),
        (1, None, None, "D", "bin.000010", 10, 4, 0, COMMITTED, "0-1-9", "bin.000010:4", None),
    ]
    actual = changelog_rows(spark.createDataFrame(rows, SCHEMA), COLUMNS)
    wall = T0  # a DATETIME is its wall clock (TIMESTAMP_NTZ; the session, like the job's, is in UTC)
    micros = -3600 * 10**6 + 5
    expected = [
        Row(id=1, at=wall, took=micros, _op="I", _change_seq=Decimal(2 * 10**24 + 300 * 10**12),
            _binlog_file="bin.000002", _binlog_seq=2, _binlog_pos=300, _row_index=0, _txn="bin.000002:200",
            _gtid=None, _commit_ts=COMMITTED, _before=None),
        Row(id=1, at=None, took=None, _op="U", _change_seq=Decimal(2 * 10**24 + 300 * 10**12 + 1),
            _binlog_file="bin.000002", _binlog_seq=2, _binlog_pos=300, _row_index=1, _txn="bin.000002:200",
            _gtid=None, _commit_ts=COMMITTED, _before=Row(id=1, at=wall, took=micros)),
        Row(id=1, at=None, took=None, _op="D", _change_seq=Decimal(10 * 10**24 + 4 * 10**12),
            _binlog_file="bin.000010", _binlog_seq=10, _binlog_pos=4, _row_index=0, _txn="bin.000010:4",
            _gtid="0-1-9", _commit_ts=COMMITTED, _before=None),
    ]
    assertDataFrameEqual(actual, expected)
    assert [f.dataType.simpleString() for f in actual.schema.fields[:5]] == [
        "int", "timestamp_ntz", "bigint", "string", "decimal(38,0)"]
