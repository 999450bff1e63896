"""The lake read by the readers users have, in each table-features mode (``kinds.delta.options.FEATURES``):
delta-rs's ``to_pyarrow_table`` and ``to_pandas``, Polars' ``read_delta`` (both in the venv) and
DuckDB's ``delta_scan`` (DuckDB 1.4 with its Delta extension from PyPI, in a Python process of its
own: ``make readers``). Each reader's rows are compared, value by value, with the leader's, after
merges that update, delete, change a key, and rename, drop and add columns. What a reader cannot
open is asserted too: that is the reader table of ``docs/lakehouse.md``, and a reader that learns a
feature fails this test until the docs say so."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from lake_helpers import (python_value, assert_lake_equals_leader, first_statements, later_statements, leader_columns,
                          leader_rows, reader_rows)
from mysql_cdc.kinds.delta.sink.tables import NOT_PORTABLE
from mysql_cdc.kinds.delta.state.location import LakeLocation
from mysql_cdc.merge.errors import FollowerSchemaError
from mysql_cdc.merge.job import run_merge

REPO = Path(__file__).resolve().parents[3]
DUCKDB_SITE = REPO / ".local" / "readers" / "duckdb-delta" / "site"


# -- the readers: each returns the table's rows as dicts (column -> Python value) -----------------


def delta_rs_arrow(uri: str) -> list[dict]:
    return DeltaTable(uri).to_pyarrow_table().to_pylist()


def delta_rs_pandas(uri: str) -> list[dict]:
    frame = DeltaTable(uri).to_pandas()
    return [{k: python_value(v) for k, v in row.items()} for row in frame.to_dict("records")]


def polars_read_delta(uri: str) -> list[dict]:
    import polars as pl

    return pl.read_delta(uri).rows(named=True)


DUCKDB_READ = """
import sys
import duckdb
import duckdb_ext
from pathlib import Path
path, out = sys.argv[1], sys.argv[2]
extension = next(Path(duckdb_ext.__path__[0]).glob("extensions/*/*/delta.duckdb_extension"))
con = duckdb.connect()
con.execute(f"LOAD '{extension}'")
con.execute(f"COPY (SELECT * FROM delta_scan('{path}')) TO '{out}' (FORMAT parquet)")
"""


def duckdb_delta_scan(uri: str, work: Path) -> list[dict]:
    if not (DUCKDB_SITE / "duckdb_ext").is_dir():
        pytest.fail(f"DuckDB's Delta extension is not installed in {DUCKDB_SITE}: run `make readers`")
    out = work / f"duckdb-{abs(hash(uri))}.parquet"
    env = {**os.environ, "PYTHONPATH": str(DUCKDB_SITE)}
    done = subprocess.run([sys.executable, "-c", DUCKDB_READ, uri.removeprefix("file://"), str(out)], env=env,
                          capture_output=True, text=True, timeout=120)
    if done.returncode:
        raise RuntimeError(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "duckdb failed")
    return pq.read_table(out).to_pylist()


READERS = {
    "delta-rs to_pyarrow_table": lambda uri, work: delta_rs_arrow(uri),
    "delta-rs to_pandas": lambda uri, work: delta_rs_pandas(uri),
    "Polars read_delta": lambda uri, work: polars_read_delta(uri),
    "DuckDB delta_scan": duckdb_delta_scan,
}
# mode -> the readers that open its tables (docs/lakehouse.md, "Reading the lake")
OPENS = {
    "standard": {"DuckDB delta_scan"},
    "portable": set(READERS),
}


# tables partitioned as a pipelines file may say (``follower.partition_by``): each reader reads the
# partition values from the paths and the log, not from the data files
PARTITIONED = (("*.pet", ("species",)), ("*.owner", ("since",)))


def without_values(rows: Counter, columns: list[tuple[str, str]], names: list[str]) -> Counter:
    """The rows with NULL in the columns ``names``."""
    blank = {i for i, (c, _) in enumerate(columns) if c.lower() in {n.lower() for n in names}}
    blanked: Counter = Counter()
    for row, n in rows.items():
        blanked[tuple(None if i in blank else v for i, v in enumerate(row))] += n
    return blanked


@pytest.mark.parametrize(("features", "partition_by"), [
    ("standard", ()), ("portable", ()), ("portable", PARTITIONED), ("standard", PARTITIONED)],
    ids=["standard", "portable", "portable-partitioned", "standard-partitioned"])
def test_each_reader_opens_what_its_mode_promises_with_the_leaders_rows(lake_pipeline, spark, tmp_path, features,
                                                                        partition_by):
    pipeline = lake_pipeline(features=features, partition_by=partition_by)
    db = pipeline.database
    for statements in (first_statements(db), later_statements(db)):
        batch = pipeline.capture(statements)
        run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets)
    assert_lake_equals_leader(pipeline)
    location = LakeLocation(pipeline.lake)
    for table in ("owner", "pet"):
        uri = location.table_uri(db, table)
        reader_features = set(DeltaTable(uri).protocol().reader_features or ())
        assert bool(reader_features & NOT_PORTABLE) == (features == "standard"), reader_features
        assert DeltaTable(uri).metadata().partition_columns == [
            columns[0] for glob, columns in partition_by if glob == f"*.{table}"]
        expected = leader_rows(pipeline.leader, db, table)
        columns = leader_columns(pipeline.leader, db, table)
        partitioned = DeltaTable(uri).metadata().partition_columns
        for name, read in READERS.items():
            if name == "DuckDB delta_scan" and features == "standard" and partitioned:
                # (docs/lakehouse.md: the extension does not map a column-mapped table's partition values)
                assert reader_rows(read(uri, tmp_path), columns) == without_values(expected, columns, partitioned)
            elif name in OPENS[features]:
                assert reader_rows(read(uri, tmp_path), columns) == expected, f"{name} read {db}.{table}"
            else:
                with pytest.raises(Exception) as refused:
                    read(uri, tmp_path)
                assert any(f in str(refused.value) for f in NOT_PORTABLE), f"{name}: {refused.value}"


def test_a_table_made_before_portable_is_refused_by_name_and_a_resnapshot_repairs_it(lake_pipeline, spark, tmp_path):
    import shutil

    standard = lake_pipeline()
    db = standard.database
    first = standard.capture(first_statements(db))
    run_merge(spark, standard.manifest_uri(first), standard.secrets)
    pipeline = type(standard).of(standard, standard.lake, features="portable")  # the user changes the setting
    later = pipeline.capture(later_statements(db))
    with pytest.raises(FollowerSchemaError) as refused:
        run_merge(spark, pipeline.manifest_uri(later), pipeline.secrets)
    message = str(refused.value)
    owner_uri = LakeLocation(pipeline.lake).table_uri(db, "owner")
    assert f"{db}.owner at {owner_uri}" in message and "columnMapping" in message and "resnapshot" in message
    assert pipeline.checkpoint().position == first.end  # nothing of the batch applied
    # the recovery the message names, for every table of the database
    for table in ("owner", "pet"):
        shutil.rmtree(LakeLocation(pipeline.lake).table_uri(db, table).removeprefix("file://"))
    copy = pipeline.snapshot()
    run_merge(spark, pipeline.manifest_uri(copy), pipeline.secrets)
    assert_lake_equals_leader(pipeline)
    for table in ("owner", "pet"):
        uri = LakeLocation(pipeline.lake).table_uri(db, table)
        assert reader_rows(polars_read_delta(uri), leader_columns(pipeline.leader, db, table)) == \
            leader_rows(pipeline.leader, db, table)



def test_each_reader_opens_a_portable_lakes_tables_that_keep_deleted_rows_and_versions(lake_pipeline, spark, tmp_path):
    """A ``soft_deletes`` table and a ``history`` table (``merge.soft_deletes``, ``merge.history``) of a
    ``portable`` lake, read by every reader: the live rows and the current versions are the leader's,
    and the rows the leader deleted and the closed versions are there, with their marks."""
    pipeline = lake_pipeline(features="portable", soft_deletes=("*.kept",), history=("*.versioned",))
    db = pipeline.database
    tables = ("kept", "versioned")
    first = [f"CREATE DATABASE {db}", f"USE {db}"] + [
        statement for t in tables for statement in (
            f"CREATE TABLE {t} (id INT PRIMARY KEY, name VARCHAR(20), amount DECIMAL(10,2), at DATETIME(6))",
            f"INSERT INTO {t} VALUES (1, 'a', 1.5, '2026-01-01 10:00:00.25'), (2, 'b', 2, NULL), (3, 'c', -3, NULL)")]
    # id 1 updated twice, 2 deleted, 3 moved to 30
    later = [f"USE {db}"] + [statement for t in tables for statement in (
        f"UPDATE {t} SET name = 'a2' WHERE id = 1", f"UPDATE {t} SET amount = 9 WHERE id = 1",
        f"DELETE FROM {t} WHERE id = 2", f"UPDATE {t} SET id = 30 WHERE id = 3")]
    for statements in (first, later):
        run_merge(spark, pipeline.manifest_uri(pipeline.capture(statements)), pipeline.secrets)
    location = LakeLocation(pipeline.lake)
    for name, read in READERS.items():
        kept = read(location.table_uri(db, "kept"), tmp_path)
        gone = [r for r in kept if r["_deleted"] is True]
        assert sorted(r["id"] for r in gone) == [2, 3], name
        assert all(r["_deleted_at"] is not None and ":" in r["_deleted_txn"] for r in gone), name
        versions = read(location.table_uri(db, "versioned"), tmp_path)
        closed = [r for r in versions if r["_current"] is False]
        assert sorted(r["id"] for r in closed) == [1, 1, 2, 3], name
        assert all(r["_valid_to"] is not None and r["_valid_to_seq"] > r["_valid_from_seq"] for r in closed), name
        for table, live in (("kept", [r for r in kept if r["_deleted"] is False]),
                            ("versioned", [r for r in versions if r["_current"] is True])):
            columns = leader_columns(pipeline.leader, db, table)
            assert reader_rows(live, columns) == leader_rows(pipeline.leader, db, table), f"{name} read {db}.{table}"
