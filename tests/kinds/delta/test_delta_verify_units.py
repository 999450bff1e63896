"""The Delta verification side's Spark-free parts: a chunk bound (a leader value) as the lake
column's Arrow scalar, for the key types whose lake value differs from the leader's."""

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest

from mysql_cdc.monitor.cut_checksums import lake_scalar as _lake_scalar


@pytest.mark.parametrize("bound, arrow_type, expected", [
    # BIGINT UNSIGNED is DECIMAL(20,0) in the lake: the largest value too
    (18446744073709551615, pa.decimal128(20, 0), Decimal(18446744073709551615)),
    (7, pa.int64(), 7),
    # TIME is microseconds in the lake
    (dt.timedelta(hours=-1, seconds=1, microseconds=5), pa.int64(), -3_598_999_995),
    # TIMESTAMP is read in UTC; DATETIME has no zone
    (dt.datetime(2026, 1, 2, 3, 4, 5), pa.timestamp("us", tz="UTC"), dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)),
    (dt.datetime(2026, 1, 2, 3, 4, 5), pa.timestamp("us"), dt.datetime(2026, 1, 2, 3, 4, 5)),
])
def test_a_chunk_bound_is_the_lake_columns_value(bound, arrow_type, expected):
    scalar = _lake_scalar(bound, arrow_type)
    assert scalar.type == arrow_type
    assert scalar.as_py() == expected
