"""An Iceberg follower's maintenance (``kinds.iceberg.maintenance``) after many merges and a merge
killed past the cut: fewer files, old snapshots and unreferenced files gone, the cut still the
leader's rows, every snapshot left still readable, and the killed merge's retry still finishes
without writing a row twice. Young files and snapshots (within ``retain_hours``) are never touched."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from iceberg_helpers import assert_iceberg_equals_leader, delete_by_position_in_every_file, iceberg_submit
from merge_helpers import job_output
from mysql_cdc.kinds.iceberg.maintenance import maintain_catalog
from mysql_cdc.merge.job import run_merge


def rows_at_cut(pipeline) -> dict[str, list]:
    """Each table's rows at the cut, read with pyiceberg."""
    catalog = pipeline.catalog.open()
    return {name: sorted(map(repr, catalog.load_table(tuple(name.split("."))).scan(snapshot_id=snapshot)
                             .to_arrow().to_pylist())) for name, snapshot in pipeline.cut().items()}


def delete_files(pipeline, name: str) -> int:
    table = pipeline.catalog.open().load_table(tuple(name.split(".")))
    return int(table.current_snapshot().summary.get("total-delete-files", "0"))


def test_maintenance_compacts_expires_and_removes_orphans_and_never_breaks_the_cut(iceberg_pipeline, spark,
                                                                                    tmp_path):
    pipeline = iceberg_pipeline()
    db = pipeline.database
    first = pipeline.capture([f"CREATE DATABASE {db}", f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT)",
                              f"CREATE TABLE {db}.bag (a INT)"])
    run_merge(spark, pipeline.manifest_uri(first), pipeline.secrets)
    delete_by_position_in_every_file(pipeline, f"{db}.t")
    for n in range(4):
        # a new key lands in a file of its own (no file's key range holds it), an updated one leaves
        # its file through a position delete file (the table merges on read); a keyless table's
        # change rewrites the table
        batch = pipeline.capture([f"INSERT INTO {db}.t VALUES ({n}, {n})", f"UPDATE {db}.t SET v = v + 10 WHERE id < {n}",
                                  f"INSERT INTO {db}.bag VALUES ({n}), ({n})"])
        run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets)
    assert delete_files(pipeline, f"{db}.t") == 3
    pending = pipeline.capture([f"INSERT INTO {db}.t VALUES (9, 9)", f"DELETE FROM {db}.bag WHERE a = 0 LIMIT 1"])
    crashed = iceberg_submit(pipeline, pending, tmp_path / "crash", {"MYSQL_CDC_CRASH_AT": "before_checkpoint"})
    assert crashed.returncode != 0 and "MYSQL_CDC_CRASH_AT=before_checkpoint" in job_output(crashed)
    # the leader is a batch ahead of the cut now: the cut's rows, as they read before any maintenance
    at_cut = rows_at_cut(pipeline)
    stray = Path(pipeline.catalog.warehouse.uri.removeprefix("file://")) / db / "t" / "data" / "stray.parquet"
    stray.write_bytes(b"left by a writer that crashed before its commit")

    # within the retention nothing is expired or removed; the small files are compacted
    young = {m.table: m for m in maintain_catalog(pipeline.catalog, pipeline.name, retain_hours=1)}
    assert {name: (m.snapshots_expired, m.orphans_removed) for name, m in young.items()} == {
        f"{db}.t": (0, 0), f"{db}.bag": (0, 0)}
    assert (young[f"{db}.t"].files_before, young[f"{db}.t"].files_after) == (5, 1), young
    assert delete_files(pipeline, f"{db}.t") == 0  # folded into the rewritten file
    assert (young[f"{db}.bag"].files_before, young[f"{db}.bag"].files_after) == (1, 1), young
    assert stray.exists()
    assert rows_at_cut(pipeline) == at_cut

    # two hours later: every snapshot before the cut's is expired, and the files no snapshot names go
    later = dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=2)
    old = {m.table: m for m in maintain_catalog(pipeline.catalog, pipeline.name, retain_hours=1, now=later)}
    assert all(m.snapshots_expired > 0 and m.orphans_removed > 0 for m in old.values()), old
    assert not stray.exists()
    assert rows_at_cut(pipeline) == at_cut
    cut = pipeline.cut()
    catalog = pipeline.catalog.open()
    for name in cut:
        table = catalog.load_table(tuple(name.split(".")))
        # the cut's snapshot and everything after it stay, and every snapshot left reads
        assert cut[name] in {s.snapshot_id for s in table.snapshots()}
        for snapshot in table.snapshots():
            table.scan(snapshot_id=snapshot.snapshot_id).to_arrow()

    run_merge(spark, pipeline.manifest_uri(pending), pipeline.secrets)  # the killed merge's retry
    assert_iceberg_equals_leader(pipeline)
    assert pipeline.checkpoint().position == pending.end
