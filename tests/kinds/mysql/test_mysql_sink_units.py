"""The MySQL sink's Spark-free parts: the LOAD DATA encoding, type matching, its connection error,
shadow table names."""

import datetime as dt
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

from mysql_cdc.kinds.mysql.sink.encoding import encode_rows, load_column, load_data_clause
from mysql_cdc.kinds.mysql.sink.tables import FollowerColumn, shadow_name


def encoded(values, arrow_type, mysql_type="x") -> list[str]:
    column = load_column("c", arrow_type, mysql_type)
    return bytes(encode_rows([pa.array(values, arrow_type)], [column])).decode().split("\n")[:-1]


def test_time_keeps_sign_hours_past_24_and_microseconds():
    values = [dt.timedelta(hours=838, minutes=59, seconds=59), -dt.timedelta(hours=12),
              -dt.timedelta(hours=838, minutes=59, seconds=58, microseconds=999999),
              dt.timedelta(microseconds=1), -dt.timedelta(microseconds=1), None]
    assert encoded(values, pa.duration("us"), "time(6)") == [
        "838:59:59.000000", "-12:00:00.000000", "-838:59:58.999999", "0:00:00.000001", "-0:00:00.000001", "\\N",
    ]


def test_text_escapes_the_load_data_specials_and_null_is_distinct_from_the_text_backslash_n():
    assert encoded(["tab\there", "nl\nx", "back\\slash", "nul\x00", "\\N", "", None, "😀"], pa.string()) == [
        "tab\\there", "nl\\nx", "back\\\\slash", "nul\\0", "\\\\N", "", "\\N", "😀",
    ]


def test_binary_and_bit_travel_as_hex_through_variables():
    assert encoded([b"\x00\xff\n", b"", None], pa.binary(), "varbinary") == ["00ff0a", "", "\\N"]
    columns = [load_column("b", pa.binary(), "blob"), load_column("f", pa.binary(), "bit(64)"),
               load_column("n", pa.int64(), "bigint")]
    assert load_data_clause(columns) == (
        "(@v0, @v1, `n`) SET `b` = UNHEX(@v0), `f` = CAST(CONV(@v1, 16, 10) AS UNSIGNED)"
    )


def test_numbers_dates_and_years_are_exact_text():
    assert encoded([Decimal(2**64 - 1), None], pa.decimal128(20, 0)) == ["18446744073709551615", "\\N"]
    assert encoded([Decimal("-0.50")], pa.decimal128(10, 2)) == ["-0.50"]
    # a FLOAT goes out as its exact double value: the server then stores the same float32
    assert encoded([3.14159], pa.float32()) == ["3.141590118408203"]
    assert encoded([0, 2155], pa.int16(), "year") == ["0000", "2155"]
    assert encoded([dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999)], pa.timestamp("us")) == [
        "0001-01-01 00:00:00.000000", "9999-12-31 23:59:59.999999",
    ]
    assert encoded([dt.datetime(2038, 1, 19, 3, 14, 7, 999999)], pa.timestamp("us", tz="UTC")) == [
        "2038-01-19 03:14:07.999999",
    ]


@pytest.mark.parametrize(("batch_type", "follower", "same"), [
    ("bigint unsigned", ("bigint", "bigint(20) unsigned"), True),
    ("bigint", ("bigint", "bigint(20) unsigned"), False),
    ("decimal(65,30)", ("decimal", "decimal(65,30)"), True),
    ("json", ("longtext", "longtext"), True),
    ("varchar", ("text", "text"), False),
    ("binary(4)", ("binary", "binary(4)"), True),
])
def test_batch_types_match_follower_columns(batch_type, follower, same):
    column = FollowerColumn("c", follower[0], follower[1], None, None, False)
    assert column.matches(batch_type) is same


def test_the_merge_names_the_follower_connection_it_cannot_reach():
    from local_services import free_port
    from mysql_cdc.kinds.mysql.sink.connection import connect
    from mysql_cdc.merge.errors import MergeError
    from mysql_cdc.mysql_server import MySQLSettings

    port = free_port()
    settings = MySQLSettings("127.0.0.1", port, "cdc_writer", "pw", conn_id="mysql_follower")
    with pytest.raises(MergeError, match=rf"cannot connect to the follower at 127.0.0.1:{port} as 'cdc_writer' "
                                         r"\(Airflow connection 'mysql_follower'\)"):
        connect(settings)


def test_shadow_tables_are_named_within_mysql_limits_and_apart_per_table_and_role():
    assert shadow_name("orders", "new") == "__mcdc_new_orders" and shadow_name("orders", "old") == "__mcdc_old_orders"
    long_a, long_b = "a" * 60 + "_one", "a" * 60 + "_two"  # past 64 once prefixed, alike in their first 57
    names = {shadow_name(t, role) for t in (long_a, long_b) for role in ("new", "old")}
    assert len(names) == 4 and all(len(n) <= 64 and n.startswith("__mcdc_") for n in names)
    assert shadow_name(long_a, "new") == shadow_name(long_a, "new")


@pytest.mark.parametrize("version", ["10.5.0-MariaDB", "10.11.6-MariaDB-0+deb12u1", "11.4.2-MariaDB", "8.0.36",
                                     "8.4.3", "9.7.0"])
def test_a_follower_of_a_supported_version_passes(version):
    from mysql_cdc.kinds.mysql.sink.follower import check_follower_version

    check_follower_version(version, "the follower at db2:3306 as 'cdc'")


@pytest.mark.parametrize("version, flavor", [("10.4.34-MariaDB-1:10.4.34+maria~deb10", "mariadb"),
                                             ("5.7.44-log", "mysql")])
def test_an_older_follower_is_refused_naming_it_and_what_it_needs(version, flavor):
    from mysql_cdc.merge.errors import FollowerVersionError
    from mysql_cdc.retry_policy import is_permanent
    from mysql_cdc.kinds.mysql.sink.follower import check_follower_version

    with pytest.raises(FollowerVersionError) as raised:
        check_follower_version(version, "the follower at db2:3306 as 'cdc'")
    assert str(raised.value) == (
        f"the follower at db2:3306 as 'cdc' runs {flavor} {version}: the merge needs MariaDB 10.5+ or MySQL 8.0+ as "
        "the follower; upgrade it, or point the pipeline's follower connection at a newer server")
    assert is_permanent(raised.value)  # no retry: the task fails at once


def test_a_load_file_encoded_in_pieces_holds_the_bytes_of_its_rows_encoded_at_once(monkeypatch, tmp_path):
    """A large batch is encoded ``ENCODE_ROWS`` rows at a time (staging._EncodedFile): the file must
    be exactly what encoding each whole batch gives (the reference), piece edges included."""
    from mysql_cdc.kinds.mysql.sink import staging
    from mysql_cdc.mysql_server import MySQLSettings
    from mysql_cdc.storage import StorageSpec

    monkeypatch.setattr(staging, "ENCODE_ROWS", 3)
    names, types = ("id", "note", "data", "amount", "created"), ("bigint", "varchar(20)", "varbinary(8)",
                                                                   "decimal(12,2)", "datetime(6)")
    plan = staging.StagePlan(follower=MySQLSettings("127.0.0.1"), storage=StorageSpec(f"file://{tmp_path}"),
                             table_prefix="t", scratch_dir="scratch", keyed=True, columns=names, mysql_types=types,
                             insert_columns=names, removal_columns=("id",), removal_ddl=("id BIGINT",))

    def batch(first: int, rows: int) -> pa.RecordBatch:
        ids = range(first, first + rows)
        return pa.record_batch([
            pa.array(ids, pa.int64()),
            pa.array([None if i % 4 == 0 else f"n\t{i}\\\n" for i in ids]),
            pa.array([bytes([i % 256, 0]) if i % 3 else None for i in ids], pa.binary()),
            pa.array([Decimal(i) / 4 for i in ids], pa.decimal128(12, 2)),
            pa.array([dt.datetime(2024, 1, 1, 0, 0, i % 60, i) for i in ids], pa.timestamp("us")),
        ], names=list(names))

    batches = [batch(0, 10), batch(10, 2), batch(12, 3)]  # 4 pieces, 1 piece, exactly 1 piece
    extras = [[pa.array(range(b.num_rows), pa.int64())] for b in batches]
    encoded = staging._EncodedFile(plan, names, ("n",))
    for b, extra in zip(batches, extras):
        encoded.write(b, extra)
    kept = Path(encoded.keep(tmp_path / "kept.tsv")).read_bytes()

    expected = b"".join(bytes(encode_rows([b.column(n) for n in names] + extra, encoded.columns))
                        for b, extra in zip(batches, extras))
    assert encoded.rows == 15
    assert kept == expected
    assert kept.count(b"\n") == 15  # a line per row: the text's own LF and TAB travel escaped
