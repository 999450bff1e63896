"""The compiled row decoder against the reference (mysql-replication + capture.types).

Randomized rows of every column type are written on a real leader (MariaDB, and MySQL for its
binary JSON), and the same binlog range is extracted twice, once per decoder. The two batches must
hold identical Arrow tables, schema and every value. The seed is fixed so a failure reproduces;
``NATIVE_DIFF_SEED`` picks another.

The compiled decoder is watched with a spy (``NativeRows.push`` wrapped, still called): the
comparison would prove nothing if the native extraction had quietly used the reference path.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mysql_cdc.merge.reader import parquet_files
from mysql_cdc.capture import native
from mysql_cdc.capture.events import CaptureError
from mysql_cdc.capture.stream.extract import BatchTarget, RangeRequest, extract_range
from mysql_cdc.contracts import PositionRange, RowSegment
from mysql_cdc.pipeline_options import ExtractOptions
from mysql_cdc.mysql_server import MySQLSettings
from mysql_cdc.storage import open_store

from .conftest import leader_position

SEED = int(os.environ.get("NATIVE_DIFF_SEED", "20261123"))
ROWS = 240

COLUMNS = {  # name -> (DDL type, value generator)
    "ti": "TINYINT", "tiu": "TINYINT UNSIGNED", "si": "SMALLINT", "siu": "SMALLINT UNSIGNED",
    "mi": "MEDIUMINT", "miu": "MEDIUMINT UNSIGNED", "i": "INT", "iu": "INT UNSIGNED",
    "bi": "BIGINT", "biu": "BIGINT UNSIGNED",
    "d_small": "DECIMAL(10,2)", "d_zero": "DECIMAL(18,0)", "d_38": "DECIMAL(38,10)", "d_wide": "DECIMAL(65,30)",
    "f": "FLOAT", "dbl": "DOUBLE",
    "dt_date": "DATE", "dt0": "DATETIME", "dt3": "DATETIME(3)", "dt6": "DATETIME(6)",
    "ts0": "TIMESTAMP NULL", "ts6": "TIMESTAMP(6) NULL",
    "tm0": "TIME", "tm1": "TIME(1)", "tm2": "TIME(2)", "tm3": "TIME(3)", "tm4": "TIME(4)", "tm5": "TIME(5)",
    "tm6": "TIME(6)", "yr": "YEAR",
    "js": "JSON", "en": "ENUM('small','medium','large','ünï')", "st": "SET('a','b','c','d')",
    "b1": "BIT(1)", "b13": "BIT(13)", "b64": "BIT(64)",
    "bin4": "BINARY(4)", "vb": "VARBINARY(300)", "bl": "BLOB", "tbl": "TINYBLOB",
    "txt": "TEXT", "vc": "VARCHAR(100)", "vc_long": "VARCHAR(400)", "ch": "CHAR(10)",
}

_TEXT = "aZ09 _-'\"\\\t\n\r\x01é✓😀ß中"


def _int(r: random.Random, bits: int, unsigned: bool) -> str:
    low, high = (0, 2 ** bits - 1) if unsigned else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    return str(r.choice([low, high, 0, r.randint(low, high)]))


def _decimal(r: random.Random, precision: int, scale: int) -> str:
    whole = "".join(r.choice("0123456789") for _ in range(r.randint(1, precision - scale))) if precision > scale else "0"
    fraction = "".join(r.choice("0123456789") for _ in range(scale))
    return f"{r.choice(['', '-'])}{whole}{'.' + fraction if scale else ''}"


def _float(r: random.Random) -> str:
    return repr(r.choice([0.0, 1.0, -2.5, r.uniform(-1, 1) * 10 ** r.randint(-30, 30)]))


def _string(r: random.Random, n: int) -> str:
    return "".join(r.choice(_TEXT) for _ in range(r.randint(0, n)))


def _sql_text(s: str) -> str:
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _sql_bytes(b: bytes) -> str:
    return f"X'{b.hex()}'"


def _time(r: random.Random, fsp: int) -> str:
    micros = r.randint(-838 * 3600 * 10 ** 6 - 3599 * 10 ** 6, 838 * 3600 * 10 ** 6 + 3599 * 10 ** 6)
    sign, micros = ("-" if micros < 0 else ""), abs(micros)
    seconds, fraction = divmod(micros, 10 ** 6)
    text = f"{sign}{seconds // 3600}:{seconds // 60 % 60:02}:{seconds % 60:02}"
    return f"'{text}.{fraction:06}'" if fsp else f"'{text}'"


def _moment(r: random.Random, first: dt.datetime, last: dt.datetime) -> str:
    span = int((last - first).total_seconds())
    value = first + dt.timedelta(seconds=r.randint(0, span), microseconds=r.randint(0, 999_999))
    return f"'{value:%Y-%m-%d %H:%M:%S.%f}'"


def _json_value(r: random.Random, depth: int = 0):
    kinds = ["int", "big", "float", "str", "bool", "null"] + (["list", "dict"] if depth < 3 else [])
    kind = r.choice(kinds)
    if kind == "int":
        return r.randint(-70000, 70000)
    if kind == "big":
        return r.choice([2 ** 63 - 1, -(2 ** 63), 2 ** 64 - 1, r.randint(2 ** 32, 2 ** 62)])
    if kind == "float":
        return r.choice([0.5, -1e-7, 1e16, 1.5e300, r.uniform(-1e6, 1e6)])
    if kind == "str":
        return _string(r, 12)
    if kind == "bool":
        return r.choice([True, False])
    if kind == "null":
        return None
    if kind == "list":
        return [_json_value(r, depth + 1) for _ in range(r.randint(0, 4))]
    return {_string(r, 6): _json_value(r, depth + 1) for _ in range(r.randint(0, 4))}


GENERATORS = {
    "ti": lambda r: _int(r, 8, False), "tiu": lambda r: _int(r, 8, True),
    "si": lambda r: _int(r, 16, False), "siu": lambda r: _int(r, 16, True),
    "mi": lambda r: _int(r, 24, False), "miu": lambda r: _int(r, 24, True),
    "i": lambda r: _int(r, 32, False), "iu": lambda r: _int(r, 32, True),
    "bi": lambda r: _int(r, 64, False), "biu": lambda r: _int(r, 64, True),
    "d_small": lambda r: _decimal(r, 10, 2), "d_zero": lambda r: _decimal(r, 18, 0),
    "d_38": lambda r: _decimal(r, 38, 10), "d_wide": lambda r: _decimal(r, 65, 30),
    "f": _float, "dbl": _float,
    "dt_date": lambda r: f"'{dt.date(1000, 1, 1) + dt.timedelta(days=r.randint(0, 3_287_181)):%Y-%m-%d}'",
    "dt0": lambda r: _moment(r, dt.datetime(1000, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59)),
    "dt3": lambda r: _moment(r, dt.datetime(1000, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59)),
    "dt6": lambda r: _moment(r, dt.datetime(1000, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59)),
    "ts0": lambda r: _moment(r, dt.datetime(1970, 1, 2), dt.datetime(2038, 1, 18)),
    "ts6": lambda r: _moment(r, dt.datetime(1970, 1, 2), dt.datetime(2038, 1, 18)),
    **{f"tm{fsp}": (lambda fsp: lambda r: _time(r, fsp))(fsp) for fsp in range(7)},
    "yr": lambda r: str(r.randint(1901, 2155)),
    "js": lambda r: _sql_text(json.dumps(_json_value(r), ensure_ascii=False)),
    "en": lambda r: _sql_text(r.choice(["small", "medium", "large", "ünï"])),
    "st": lambda r: _sql_text(",".join(v for v in "abcd" if r.random() < 0.5)),
    "b1": lambda r: f"b'{r.randint(0, 1)}'", "b13": lambda r: str(r.randint(0, 2 ** 13 - 1)),
    "b64": lambda r: str(r.randint(0, 2 ** 64 - 1)),
    "bin4": lambda r: _sql_bytes(bytes(r.randint(0, 255) for _ in range(r.randint(0, 4)))),
    "vb": lambda r: _sql_bytes(r.randbytes(r.randint(0, 300))),
    "bl": lambda r: _sql_bytes(r.randbytes(r.choice([0, 1, 70, 3000]))),
    "tbl": lambda r: _sql_bytes(r.randbytes(r.randint(0, 255))),
    "txt": lambda r: _sql_text(_string(r, 400)), "vc": lambda r: _sql_text(_string(r, 100)),
    "vc_long": lambda r: _sql_text(_string(r, 400)), "ch": lambda r: _sql_text(_string(r, 10).rstrip(" ")),
}


def _row(r: random.Random, key: int) -> str:
    values = ["NULL" if r.random() < 0.15 else GENERATORS[name](r) for name in COLUMNS]
    return f"({key}, {', '.join(values)})"


def _workload(db: str, r: random.Random, extra_rows: list[str]) -> list[str]:
    columns = ", ".join(f"{name} {ddl}" for name, ddl in COLUMNS.items())
    statements = [f"CREATE DATABASE {db}", f"CREATE TABLE {db}.t (id INT PRIMARY KEY, {columns})",
                  # a zero offset: TIMESTAMP values are written as given
                  "SET time_zone = '+00:00'"]
    for first in range(0, ROWS, 40):  # multi-row events, as bulk loads write them
        statements.append(f"INSERT INTO {db}.t VALUES " + ", ".join(_row(r, k) for k in range(first, first + 40)))
    statements += [f"INSERT INTO {db}.t (id, js) VALUES {row}" for row in extra_rows]
    for key in r.sample(range(ROWS), 60):  # updates carry two images, deletes one
        name = r.choice(list(COLUMNS))
        statements.append(f"UPDATE {db}.t SET {name} = {GENERATORS[name](r)}, ti = NULL WHERE id = {key}")
    statements.append(f"DELETE FROM {db}.t WHERE id % 7 = 3")
    return statements


def _tables(store, batch) -> list:
    out = []
    for segment in batch.segments:
        if isinstance(segment, RowSegment):
            for changes in segment.tables:
                parts = [pq.read_table(pa.BufferReader(f)) for f in parquet_files(store, batch.prefix, changes)]
                out.append((changes.table, changes.columns, parts))
    return out


@pytest.fixture
def native_pushes(monkeypatch):
    """How many rows events the compiled decoder decoded (a spy: the real push still runs)."""
    calls = []
    real = native.NativeRows.push

    def push(self, *args, **kwargs):
        calls.append(self.spec.table)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(native.NativeRows, "push", push)
    return calls


def _extract_both(settings, tmp_path, range_):
    batches = {}
    for decoder in ("python", "native"):
        store = open_store(f"file://{tmp_path}/{decoder}")
        batch = extract_range(settings, RangeRequest("p", range_), BatchTarget(store),
                              ExtractOptions(workers=1, decoder=decoder))
        batches[decoder] = _tables(store, batch)
    return batches


MYSQL_OPAQUE_JSON = [  # MySQL keeps these as opaque scalars inside binary JSON
    "(100000, JSON_OBJECT('n', CAST(1.50 AS DECIMAL(5,2)), 'd', DATE'2020-01-02', "
    "'dt', TIMESTAMP'2020-01-02 03:04:05.250000', 't', TIME'12:00:01'))",
    "(100001, CAST('null' AS JSON))",
    "(100002, JSON_ARRAY(CAST(-12345678901234.5 AS DECIMAL(20,1)), TIME'00:00:00'))",
]


@pytest.mark.parametrize("server", ["mariadb", "mysql", "mariadb_compressed", "mysql_compressed"])
def test_both_decoders_write_identical_arrow_for_random_rows_of_every_type(server, request, tmp_path, unique_name,
                                                                          native_pushes):
    """Compressed binlogs too: the rows events inside MariaDB's compressed events and MySQL's
    transaction payloads reach the compiled decoder once inflated."""
    if server == "mariadb":
        leader, settings = request.getfixturevalue("leader"), MySQLSettings(**request.getfixturevalue("leader_user"))
    elif server == "mysql":
        leader = request.getfixturevalue("mysql_leader")
        settings = MySQLSettings(**request.getfixturevalue("mysql_leader_user"))
    else:
        leader = request.getfixturevalue(server)
        settings = MySQLSettings(**leader.conn_params())
    extra = MYSQL_OPAQUE_JSON if server.startswith("mysql") else ["(100001, 'null')"]  # MariaDB's JSON is text
    r = random.Random(SEED)
    start = leader_position(settings)
    leader.run_sql(_workload(unique_name, r, extra))
    range_ = PositionRange(start, leader_position(settings))

    batches = _extract_both(settings, tmp_path, range_)

    assert native_pushes and set(native_pushes) == {"t"}, "the native extraction did not use the compiled decoder"
    python, compiled = batches["python"], batches["native"]
    assert [(t, c) for t, c, _ in compiled] == [(t, c) for t, c, _ in python]
    rows = 0
    for (table, _, expected_parts), (_, _, parts) in zip(python, compiled):
        assert len(parts) == len(expected_parts)
        for expected, actual in zip(expected_parts, parts):
            assert actual.schema == expected.schema
            rows += actual.num_rows
            for name in expected.column_names:  # column by column, so a failure names the column
                assert actual.column(name).equals(expected.column(name)), f"{table}.{name} differs (seed {SEED})"
    deleted = sum(1 for k in [*range(ROWS), *range(100000, 100000 + len(extra))] if k % 7 == 3)
    assert rows == ROWS + len(extra) + 60 + deleted  # inserts, updates, deletes


def _refusals(settings, tmp_path, range_) -> dict[str, str]:
    messages = {}
    for decoder in ("python", "native"):
        with pytest.raises(CaptureError) as caught:
            extract_range(settings, RangeRequest("p", range_), BatchTarget(open_store(f"file://{tmp_path}/{decoder}")),
                          ExtractOptions(workers=1, decoder=decoder))
        messages[decoder] = str(caught.value)
    return messages


def test_a_zero_date_is_refused_by_both_decoders_in_the_same_words(leader, leader_user, tmp_path, unique_name):
    settings = MySQLSettings(**leader_user)
    start = leader_position(settings)
    leader.run_sql([f"CREATE DATABASE {unique_name}", f"CREATE TABLE {unique_name}.t (id INT PRIMARY KEY, d DATE)",
                    "SET SESSION sql_mode = ''", f"INSERT INTO {unique_name}.t VALUES (1, '0000-00-00')"])
    messages = _refusals(settings, tmp_path, PositionRange(start, leader_position(settings)))
    assert f"{unique_name}.t.d: a value the binlog reader cannot represent" in messages["native"]
    assert f"{unique_name}.t.d: a value the binlog reader cannot represent" in messages["python"]


def test_a_partial_row_image_is_refused_by_both_decoders_in_the_same_words(leader, leader_user, tmp_path,
                                                                           unique_name):
    settings = MySQLSettings(**leader_user)
    start = leader_position(settings)
    leader.run_sql([f"CREATE DATABASE {unique_name}",
                    f"CREATE TABLE {unique_name}.t (id INT PRIMARY KEY, a INT, b VARCHAR(10))",
                    f"INSERT INTO {unique_name}.t VALUES (1, 1, 'x')",
                    "SET SESSION binlog_row_image = 'MINIMAL'",
                    f"UPDATE {unique_name}.t SET a = 2 WHERE id = 1"])
    messages = _refusals(settings, tmp_path, PositionRange(start, leader_position(settings)))
    assert messages["native"] == messages["python"]
    assert "binlog_row_image=MINIMAL" in messages["native"]


def test_text_in_another_character_set_is_read_by_the_reference_decoder(leader, leader_user, tmp_path, unique_name,
                                                                      native_pushes):
    """latin1 text is decoded with Python's codec for it: its table takes the reference path, the
    UTF-8 table beside it the compiled one, and both are exact."""
    settings = MySQLSettings(**leader_user)
    start = leader_position(settings)
    leader.run_sql([f"CREATE DATABASE {unique_name}",
                    f"CREATE TABLE {unique_name}.latin (id INT PRIMARY KEY, s VARCHAR(20) CHARACTER SET latin1)",
                    f"CREATE TABLE {unique_name}.utf (id INT PRIMARY KEY, s VARCHAR(20) CHARACTER SET utf8mb4)",
                    f"INSERT INTO {unique_name}.latin VALUES (1, 'naïve café')",
                    f"INSERT INTO {unique_name}.utf VALUES (1, 'naïve café 😀')"])
    store = open_store(f"file://{tmp_path}/store")
    batch = extract_range(settings, RangeRequest("p", PositionRange(start, leader_position(settings))),
                          BatchTarget(store))
    values = {t: parts[0].column("s").to_pylist() for t, _, parts in _tables(store, batch)}
    assert values == {"latin": ["naïve café"], "utf": ["naïve café 😀"]}
    assert native_pushes == ["utf"]
