"""A long range read in parts at once (cut at binlog file starts, one reader process each), against
the real leader: the batch holds exactly the change rows and DDL one reader finds, in the same
order, and applied it leaves the follower equal to the leader."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from apply_workload import Workload
from merge_helpers import assert_same_database, leader_position
from mysql_cdc.merge.reader import parquet_files
from mysql_cdc.contracts import DdlSegment, RowSegment
from mysql_cdc.contracts import change_row as cr
from mysql_cdc.pipeline_options import ExtractOptions
from mysql_cdc.merge.job import run_merge


def contents(pipeline, batch) -> tuple[list, dict]:
    """The batch's DDL statements in order, and every table's change rows in binlog order."""
    ddl = [s.statement for s in batch.segments if isinstance(s, DdlSegment)]
    rows: dict[str, list] = {}
    for segment in batch.segments:
        if isinstance(segment, RowSegment):
            for table in segment.tables:
                for data in parquet_files(pipeline.store, batch.prefix, table):
                    rows.setdefault(table.qualified_name, []).append(pq.read_table(pa.BufferReader(data)))
    ordered = {name: pa.concat_tables(parts, promote_options="permissive").sort_by(
        [(c, "ascending") for c in cr.ORDER_COLUMNS]).to_pylist() for name, parts in rows.items()}
    return ddl, ordered


def test_a_range_over_several_binlog_files_is_read_in_parts(make_pipeline, leader, spark):
    pipeline = make_pipeline()
    db = pipeline.database
    start = pipeline.position
    workload = Workload(20261123, db)
    conn = leader.connect()
    try:
        workload.setup(conn)
        for _ in range(4):  # four binlog files of changes, DDL among them
            workload.run(conn, transactions=25, ddl_probability=0.1)
            with conn.cursor() as cur:
                cur.execute("FLUSH BINARY LOGS")
        workload.run(conn, transactions=10)
    finally:
        conn.close()
    end = leader_position(pipeline.leader_settings)

    parallel = pipeline.extract(start, end, ExtractOptions(workers=2, min_part_mb=0))
    files = [f for s in parallel.segments if isinstance(s, RowSegment) for t in s.tables for f in t.files]
    assert {f.split("/")[0] for f in files} == {"part-000", "part-001"}
    read_in_parts = contents(pipeline, parallel)
    single = pipeline.extract(start, end)  # the same range, one reader: the reference (same directory)
    assert read_in_parts == contents(pipeline, single) and parallel.row_count == single.row_count > 0
    assert read_in_parts[0], "the workload ran no DDL: the test proves less than it says"
    assert (parallel.start_gtid_set, parallel.end_gtid_set) == (single.start_gtid_set, single.end_gtid_set)

    # the parallel batch again (the single read overwrote its directory), then applied
    batch = pipeline.extract(start, end, ExtractOptions(workers=2, min_part_mb=0))
    run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets)
    assert_same_database(leader, pipeline.follower, db)
    assert pipeline.checkpoint().gtid_set == batch.end_gtid_set


def test_a_range_read_in_parts_under_another_manifest_name_publishes_no_batch(make_pipeline, leader):
    """A copy's catch-up changes are a range read under ``part.json``: read in parts, its parts
    are combined under that name, and no ``manifest.json`` (which would make it a batch of the
    pipeline) is written."""
    from mysql_cdc.capture.stream.extract import PART_MANIFEST, BatchTarget, RangeRequest, extract_range
    from mysql_cdc.capture.filters import TableFilter
    from mysql_cdc.contracts import MANIFEST_NAME, PositionRange

    pipeline = make_pipeline()
    db = pipeline.database
    start = pipeline.position
    leader.run_sql([f"CREATE DATABASE {db}", f"CREATE TABLE {db}.t (id INT PRIMARY KEY)", "FLUSH BINARY LOGS",
                    f"INSERT INTO {db}.t VALUES (1)", "FLUSH BINARY LOGS", f"INSERT INTO {db}.t VALUES (2)"])
    end = leader_position(pipeline.leader_settings)
    target = BatchTarget(pipeline.store, pipeline.storage, prefix=f"{pipeline.name}/catch-up", manifest_name=PART_MANIFEST)
    request = RangeRequest(pipeline.name, PositionRange(start, end), TableFilter((f"{db}.*",)))
    batch = extract_range(pipeline.leader_settings, request, target, ExtractOptions(workers=2, min_part_mb=0))
    keys = pipeline.store.list_keys(f"{pipeline.name}/catch-up")
    assert any(k.startswith(f"{pipeline.name}/catch-up/part-001/") for k in keys), "the range was not read in parts"
    assert f"{pipeline.name}/catch-up/{PART_MANIFEST}" in keys and batch.row_count == 2
    assert not [k for k in keys if k.endswith(MANIFEST_NAME)], keys
