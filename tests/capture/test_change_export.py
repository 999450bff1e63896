"""A pipeline's change rows exported as plain Parquet (``mysql_cdc.change_export``, the CLI's
``changes``): batches captured from a real MariaDB leader onto a real S3 endpoint (moto), small
tables packed into ``.pack`` objects as the extract writes them, exported through the CLI and
opened with readers that are not the product's (DuckDB, pyarrow's dataset, Spark), compared with
the statements the leader ran."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow.dataset as ds
import pytest

from mysql_cdc.cli import main as cli
from mysql_cdc.contracts import RowSegment


@pytest.fixture
def captured(make_pipeline, s3_bucket, monkeypatch):
    pipeline = make_pipeline(s3_bucket=s3_bucket)
    db = pipeline.database
    first = pipeline.capture([
        f"CREATE DATABASE {db}", f"USE {db}",
        "CREATE TABLE orders (id INT PRIMARY KEY, v VARCHAR(10))",
        "CREATE TABLE notes (note VARCHAR(10))",  # no key
        "BEGIN", "INSERT INTO orders VALUES (1, 'a'), (2, 'b')", "INSERT INTO notes VALUES ('x')", "COMMIT",
        "BEGIN", "UPDATE orders SET v = 'c' WHERE id = 1", "DELETE FROM notes", "COMMIT",
        "ALTER TABLE orders ADD COLUMN n INT",  # a second row segment, with another shape
        "BEGIN", "INSERT INTO orders VALUES (3, 'd', 7)", "DELETE FROM orders WHERE id = 2", "COMMIT",
    ], database=None)
    second = pipeline.capture([f"UPDATE {db}.orders SET n = 8 WHERE id = 3"])
    # the CLI reaches S3 through boto3's own chain, as a user's shell does
    for key, env in (("aws_access_key_id", "AWS_ACCESS_KEY_ID"), ("aws_secret_access_key", "AWS_SECRET_ACCESS_KEY"),
                     ("endpoint_url", "AWS_ENDPOINT_URL"), ("region_name", "AWS_DEFAULT_REGION")):
        monkeypatch.setenv(env, s3_bucket[key])
    return pipeline, first, second


def export(pipeline, out: Path, *args: str) -> int:
    return cli(["changes", "--storage-uri", pipeline.storage.uri, "--pipeline", pipeline.name,
                "--out", f"file://{out}", *args])


def test_every_change_row_of_packed_tables_in_files_any_reader_opens(captured, tmp_path, capsys):
    pipeline, first, second = captured
    db = pipeline.database
    packed = [t for s in first.segments if isinstance(s, RowSegment) for t in s.tables if t.spans]
    assert packed, "the small tables are in packs, which no Parquet reader opens"
    assert export(pipeline, tmp_path / "out") == 0
    printed = capsys.readouterr().out
    files = sorted(p.relative_to(tmp_path / "out").as_posix() for p in (tmp_path / "out").rglob("*.parquet"))
    # the first batch's row segments: before and after the ALTER (its DDL segments in between)
    before, after = (s.index for s in first.segments if isinstance(s, RowSegment))
    (last,) = (s.index for s in second.segments if isinstance(s, RowSegment))
    assert files == sorted([f"{db}.orders/{first.batch_id}.{i:05d}.parquet" for i in (before, after)]
                           + [f"{db}.notes/{first.batch_id}.{before:05d}.parquet",
                              f"{db}.orders/{second.batch_id}.{last:05d}.parquet"]), printed
    orders = duckdb.sql(
        f"SELECT _op, id, v, n, _before.v AS before_v FROM read_parquet('{tmp_path}/out/{db}.orders/*.parquet', "
        "union_by_name = true) ORDER BY _binlog_seq, _binlog_pos, _row_index").fetchall()
    assert orders == [("I", 1, "a", None, None), ("I", 2, "b", None, None), ("U", 1, "c", None, "a"),
                      ("I", 3, "d", 7, None), ("D", 2, "b", None, None), ("U", 3, "d", 8, "d")]
    notes = ds.dataset(tmp_path / "out" / f"{db}.notes", format="parquet").to_table().to_pydict()
    assert (notes["_op"], notes["note"]) == (["I", "D"], ["x", "x"])
    assert all(t and len(t) == len(notes["_op"]) for t in (notes["_txn"], notes["_commit_ts"]))


def test_a_range_and_a_table_glob(captured, tmp_path):
    pipeline, first, second = captured
    db = pipeline.database
    assert export(pipeline, tmp_path / "out", "--table", f"{db}.ord*", "--start", str(second.start)) == 0
    (only,) = (tmp_path / "out").rglob("*.parquet")
    assert only.relative_to(tmp_path / "out").as_posix().startswith(f"{db}.orders/{second.batch_id}.")
    assert duckdb.sql(f"SELECT _op, id, n FROM '{only}'").fetchall() == [("U", 3, 8)]
    # an end within a segment cuts it at the row: the update's event ends the range before it
    everything = tmp_path / "all"
    assert export(pipeline, everything, "--table", f"{db}.orders") == 0
    ((file, pos),) = duckdb.sql(f"SELECT _binlog_file, _binlog_pos FROM read_parquet('{everything}/*/*.parquet', "
                                "union_by_name = true) WHERE _op = 'U' AND id = 1").fetchall()
    assert export(pipeline, tmp_path / "cut", "--end", f"{file}:{pos}") == 0
    cut = duckdb.sql(f"SELECT _op, coalesce(CAST(id AS VARCHAR), note) FROM read_parquet('{tmp_path}/cut/*/*.parquet', "
                     "union_by_name = true) ORDER BY _binlog_pos, _row_index").fetchall()
    assert cut == [("I", "1"), ("I", "2"), ("I", "x")]


def test_spark_reads_the_exported_table_as_one(captured, tmp_path, spark):
    pipeline, _, _ = captured
    db = pipeline.database
    assert export(pipeline, tmp_path / "out", "--table", f"{db}.orders") == 0
    rows = (spark.read.option("mergeSchema", "true").parquet(str(tmp_path / "out" / f"{db}.orders"))
            .orderBy("_binlog_seq", "_binlog_pos", "_row_index").select("_op", "id", "n").collect())
    assert [tuple(r) for r in rows] == [("I", 1, None), ("I", 2, None), ("U", 1, None), ("I", 3, 7), ("D", 2, None),
                                        ("U", 3, 8)]


def test_no_batch_in_the_range_writes_nothing_and_says_so(captured, tmp_path, capsys):
    pipeline, _, second = captured
    assert export(pipeline, tmp_path / "out", "--start", str(second.end)) == 0
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").rglob("*"))
    assert "no change rows in that range" in capsys.readouterr().err
