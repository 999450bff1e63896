"""The compiled decoder reading a snapshot copy's rows, against the reference (PyMySQL's parsing).

Randomized rows of every column type (the generators of ``test_native_decoder``) are written on a
real leader, MariaDB and MySQL, and the same table is copied twice, once per decoder. The Parquet
parts must hold identical Arrow tables, schema and every value. Small batches (``chunk_rows``) make
rows arrive over many socket reads and several record batches; a 3 MB value spans packets and reads.
The copy with ``decoder: native`` is watched with a spy (``ResultRows.read`` wrapped, still
called), so the comparison cannot pass by the reference path being used twice.
"""

from __future__ import annotations

import io
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pymysql
import pytest

from mysql_cdc.capture import native
from mysql_cdc.capture.snapshot.leader_snapshot import LeaderSnapshot, SnapshotError, SnapshotTableWriter
from mysql_cdc.capture.table_changes import WriterLimits
from mysql_cdc.mysql_server import MySQLSettings
from mysql_cdc.storage import open_store

from .test_native_decoder import COLUMNS, GENERATORS, SEED

ROWS = 300
LIMITS = WriterLimits(chunk_rows=7, file_rows=100)


@pytest.fixture
def native_reads(monkeypatch):
    """The tables the compiled decoder read (a spy: the real read still runs)."""
    calls = []
    real = native.ResultRows.read

    def read(self, sql):
        calls.append(self.qualified)
        yield from real(self, sql)

    monkeypatch.setattr(native.ResultRows, "read", read)
    return calls


def _server(request, flavor):
    if flavor == "mariadb":
        return request.getfixturevalue("leader"), MySQLSettings(**request.getfixturevalue("leader_user"))
    return request.getfixturevalue("mysql_leader"), MySQLSettings(**request.getfixturevalue("mysql_leader_user"))


def _copy(settings, flavor, store, database, table, decoder) -> list[pa.Table]:
    """The table copied by ``decoder`` into Parquet parts, read back."""
    with LeaderSnapshot(settings, flavor) as snapshot:
        columns = snapshot.describe(database, table)[0]
        snapshot.open_read_view()
        writer = SnapshotTableWriter(store, decoder, f"{database}.{table}", columns, "/tmp", LIMITS)
        snapshot.copy(database, table, columns, writer, LIMITS, decoder=decoder)
        files, _ = writer.finish()
        # the connection is whole after the compiled decoder's read: the next query works
        with snapshot.conn.cursor() as cur:
            cur.execute("SELECT 1")
            assert cur.fetchone() == (1,)
    return [pq.read_table(io.BytesIO(store.get_bytes(f"{decoder}/{f}"))) for f in files]


def _assert_same_parts(python: list[pa.Table], compiled: list[pa.Table], table: str) -> int:
    assert len(compiled) == len(python)
    rows = 0
    for expected, actual in zip(python, compiled):
        assert actual.schema == expected.schema
        rows += actual.num_rows
        for name in expected.column_names:  # column by column, so a failure names the column
            assert actual.column(name).equals(expected.column(name)), f"{table}.{name} differs (seed {SEED})"
    return rows


@pytest.mark.parametrize("flavor", ["mariadb", "mysql"])
def test_both_decoders_copy_identical_arrow_for_random_rows_of_every_type(flavor, request, tmp_path, unique_name,
                                                                          native_reads):
    leader, settings = _server(request, flavor)
    r = random.Random(SEED)
    columns = ", ".join(f"{name} {ddl}" for name, ddl in COLUMNS.items())
    rows = [f"({k}, {', '.join('NULL' if r.random() < 0.15 else GENERATORS[n](r) for n in COLUMNS)})"
            for k in range(ROWS)]
    leader.run_sql([
        f"CREATE DATABASE {unique_name}",
        f"CREATE TABLE {unique_name}.t (id INT PRIMARY KEY, {columns}, "
        "latin VARCHAR(20) CHARACTER SET latin1, big LONGBLOB, f_extreme FLOAT, d_extreme DOUBLE)",
        "SET time_zone = '+00:00'",
        *(f"INSERT INTO {unique_name}.t (id, {', '.join(COLUMNS)}) VALUES " + ", ".join(rows[i:i + 50])
          for i in range(0, ROWS, 50)),
        # the server converts other character sets to the session's utf8mb4
        f"UPDATE {unique_name}.t SET latin = 'naïve café' WHERE id % 3 = 0",
        # a 3 MB value: one row over many packets' worth of socket reads
        f"UPDATE {unique_name}.t SET big = REPEAT(X'00FF7A', 1000000) WHERE id = 5",
        f"INSERT INTO {unique_name}.t (id, f_extreme, d_extreme, bi, biu, dt_date, dt6, tm6) VALUES "
        "(1000, 3.40282e38, 1.7976931348623157e308, -9223372036854775808, 18446744073709551615, "
        "'1000-01-01', '9999-12-31 23:59:59.999999', '-838:59:59.000000'), "
        "(1001, -1.17549e-38, -4.9406564584124654e-324, 9223372036854775807, 0, "
        "'9999-12-31', '1000-01-01 00:00:00.000000', '-00:00:00.500000')",
    ])
    store = open_store(f"file://{tmp_path}/store")

    python = _copy(settings, flavor, store, unique_name, "t", "python")
    compiled = _copy(settings, flavor, store, unique_name, "t", "native")

    assert native_reads == [f"{unique_name}.t"], "the native copy did not use the compiled decoder"
    assert _assert_same_parts(python, compiled, "t") == ROWS + 2
    assert len(compiled) > 1  # file_rows=100: the parts rolled, in the same places
    big = pa.concat_tables(compiled).filter(pa.compute.equal(pa.concat_tables(compiled).column("id"), 5))
    assert big.column("big")[0].as_py() == bytes.fromhex("00FF7A") * 1_000_000


def test_a_zero_date_is_refused_by_both_decoders_in_the_same_words(leader, leader_user, tmp_path, unique_name):
    """The compiled decoder stops inside the result set: the connection it leaves half-read is
    closed, and the refusal (not a closed-connection error) is what the user sees."""
    settings = MySQLSettings(**leader_user)
    leader.run_sql([f"CREATE DATABASE {unique_name}",
                    f"CREATE TABLE {unique_name}.t (id INT PRIMARY KEY, d DATE)", "SET SESSION sql_mode = ''",
                    f"INSERT INTO {unique_name}.t VALUES " + ", ".join(f"({k}, '2020-01-01')" for k in range(50)),
                    f"INSERT INTO {unique_name}.t VALUES (50, '0000-00-00'), (51, '2020-01-01')"])
    store = open_store(f"file://{tmp_path}/store")
    messages = {}
    for decoder in ("python", "native"):
        with pytest.raises(SnapshotError) as caught:
            _copy(settings, "mariadb", store, unique_name, "t", decoder)
        messages[decoder] = str(caught.value)
    assert messages["native"] == messages["python"] == (
        "column d: value '0000-00-00' is not a date (a zero date); fix the value on the leader or exclude the table")


def test_a_server_error_inside_the_rows_is_raised_as_pymysql_raises_it(leader, leader_user, unique_name):
    """An ERR packet after rows were sent ends the result set: the error is the server's, and the
    connection stays usable (the server finished its answer)."""
    leader.run_sql([f"CREATE DATABASE {unique_name}", f"CREATE TABLE {unique_name}.t (id INT PRIMARY KEY)",
                    f"INSERT INTO {unique_name}.t VALUES " + ", ".join(f"({k})" for k in range(2000))])
    conn = MySQLSettings(**leader_user).connect()
    try:
        schema = pa.schema([("id", pa.int32()), ("v", pa.int64())])
        reader = native.ResultRows(conn, schema, 100, 1 << 20, f"{unique_name}.t")
        # the subquery returns two rows only from id 1500 on: rows are on their way when it fails
        sql = (f"SELECT id, IF(id < 1500, id, (SELECT 1 UNION SELECT 2)) FROM {unique_name}.t ORDER BY id")
        batches = []
        with pytest.raises(pymysql.err.OperationalError) as caught:
            for batch in reader.read(sql):
                batches.append(batch)
        assert caught.value.args[0] == 1242  # Subquery returns more than 1 row
        with conn.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM " + f"{unique_name}.t")
            assert cur.fetchone() == (2000,)
    finally:
        conn.close()


def test_a_connection_killed_inside_the_rows_is_an_error_and_is_closed(leader, leader_user, unique_name):
    """The server kills the connection while rows are on their way: the read fails as PyMySQL's
    would (an OperationalError, never a short batch taken for the whole table), and the
    half-read connection is closed, not handed back for reuse."""
    leader.run_sql([f"CREATE DATABASE {unique_name}"])
    leader.run_sql(["CREATE TABLE t (id INT PRIMARY KEY)", "INSERT INTO t SELECT seq FROM seq_1_to_300000"],
                   database=unique_name)
    conn = MySQLSettings(**leader_user).connect()
    killer = MySQLSettings(**leader_user).connect()
    try:
        schema = pa.schema([("id", pa.int32()), ("pad", pa.string())])
        reader = native.ResultRows(conn, schema, 1000, 1 << 20, f"{unique_name}.t")
        rows = 0
        with pytest.raises(pymysql.err.OperationalError):
            # 33 MB of rows: far more than the sockets between the two can hold when the kill lands
            for batch in reader.read(f"SELECT id, REPEAT('x', 100) FROM {unique_name}.t"):
                if rows == 0:
                    with killer.cursor() as cur:
                        cur.execute(f"KILL CONNECTION {conn.thread_id()}")
                rows += batch.num_rows
        assert 0 < rows < 300_000 and not conn.open
    finally:
        killer.close()
