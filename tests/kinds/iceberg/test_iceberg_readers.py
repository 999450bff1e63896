"""An Iceberg follower read by the readers users have, none of them the product's code: pandas
(pyiceberg's ``to_pandas``), Polars' ``scan_iceberg`` and DuckDB's ``iceberg_scan`` (DuckDB 1.4 with
its Iceberg extension from PyPI, ``make readers``), each at the snapshot the consistent cut names.
Each reader's rows are compared, value by value, with the leader's, after merges that update,
delete, change a key, rename, drop and add columns, on a keyed and a keyless table: the reader
table of ``docs/iceberg.md``."""

from __future__ import annotations

import polars as pl

from iceberg_helpers import assert_iceberg_equals_leader, delete_by_position_in_every_file, duckdb_iceberg_scan
from lake_helpers import first_statements, later_statements, leader_columns, leader_rows, python_value, reader_rows
from mysql_cdc.merge.job import run_merge


def pandas_rows(table, snapshot_id: int, work) -> list[dict]:
    frame = table.scan(snapshot_id=snapshot_id).to_pandas()
    return [{k: python_value(v) for k, v in row.items()} for row in frame.to_dict("records")]


def polars_rows(table, snapshot_id: int, work) -> list[dict]:
    return pl.scan_iceberg(table, snapshot_id=snapshot_id).collect().rows(named=True)


def duckdb_rows(table, snapshot_id: int, work) -> list[dict]:
    # DuckDB reads a metadata file's current snapshot: after a finished merge, the cut's
    assert table.current_snapshot().snapshot_id == snapshot_id
    return duckdb_iceberg_scan(table.metadata_location, work).to_pylist()


READERS = {"pandas (pyiceberg to_pandas)": pandas_rows, "Polars scan_iceberg": polars_rows,
           "DuckDB iceberg_scan": duckdb_rows}


def test_each_reader_reads_the_leaders_rows_at_the_cut(iceberg_pipeline, spark, tmp_path):
    pipeline = iceberg_pipeline()
    db = pipeline.database
    run_merge(spark, pipeline.manifest_uri(pipeline.capture(first_statements(db))), pipeline.secrets)
    delete_by_position_in_every_file(pipeline, f"{db}.owner")  # (pet's changes rewrite its file)
    run_merge(spark, pipeline.manifest_uri(pipeline.capture(later_statements(db))), pipeline.secrets)
    assert_iceberg_equals_leader(pipeline)
    cut, catalog = pipeline.cut(), pipeline.catalog.open()
    # the owners' updates and delete left position delete files (the tables merge on read): every
    # reader below must apply them
    owner = catalog.load_table((db, "owner")).snapshot_by_id(cut[f"{db}.owner"])
    assert int(owner.summary["total-position-deletes"]) > 0
    for name in ("owner", "pet"):
        table = catalog.load_table((db, name))
        expected, columns = leader_rows(pipeline.leader, db, name), leader_columns(pipeline.leader, db, name)
        for reader, read in READERS.items():
            assert reader_rows(read(table, cut[f"{db}.{name}"], tmp_path), columns) == expected, f"{reader}: {db}.{name}"

