"""A retry after a kill between two tables' commits of a segment finishes (``tests/fixtures/
delta-retry-after-kill``: the object store as users left it, from ``../shared/repro``).

The merge was killed after committing a segment's first tables (``t_comp``, ``t_int``, ``t_nopk``,
``t_uniq`` MERGEd, the new table ``t_comp_c1020000078``'s first rows appended by delta-rs) and before
``t_uniqnull`` and the state row. Every later try failed. Here the stored objects are the lake and
the batches; the retry's batch is applied as the next run would, and the lake ends equal to the
leader: each table's rows are what replaying the whole history of batches gives, read with
delta-rs at the consistent cut (never with the product's reader)."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, QueryBuilder

from mysql_cdc.contracts import BinlogPosition
from mysql_cdc.job_secrets import JobSecrets
from mysql_cdc.kinds.delta import follower_spec
from mysql_cdc.kinds.delta.state import DeltaStateStore
from mysql_cdc.kinds.delta.state.cut import read_cut
from mysql_cdc.kinds.delta.state.location import LakeLocation
from mysql_cdc.merge.job import run_merge
from mysql_cdc.storage import StorageSpec

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "delta-retry-after-kill"
PIPELINE = "acc_lake_crash"
BATCHES = "cdc/acc_lake_crash/batches"
KILLED = "0000000001.00000000000000442764-0000000001.00000000000001039739"
RETRY = "0000000001.00000000000001017307-0000000001.00000000000001039739"


@pytest.fixture
def left_behind(tmp_path):
    """The store as the kill left it, at a root of this test's own (the lake's log paths are
    relative, so the copy is the same lake)."""
    root = tmp_path / "acc-bucket"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns("README.md"))
    lake = StorageSpec(f"file://{root}/lake")
    secrets = JobSecrets(follower_spec(lake), StorageSpec(f"file://{root}/cdc"))
    return root, lake, secrets


def manifest(root: Path, batch: str) -> str:
    return f"file://{root}/{BATCHES}/{batch}/manifest.json"


def change_rows(root: Path, batch: str, table: str) -> list[dict]:
    """The table's change rows of the batch's row segment, read from its span of the pack with
    pyarrow alone (the manifest's ``spans``: offset and length in the pack), in binlog order."""
    directory = root / BATCHES / batch
    (segment,) = [s for s in json.loads((directory / "manifest.json").read_text())["segments"] if s["kind"] == "rows"]
    (entry,) = [t for t in segment["tables"] if t["table"] == table]
    rows = []
    for file, (offset, length) in zip(entry["files"], entry["spans"]):
        with open(directory / file, "rb") as fh:
            fh.seek(offset)
            rows += pq.read_table(pa.BufferReader(fh.read(length))).to_pylist()
    return sorted(rows, key=lambda r: (r["_binlog_seq"], r["_binlog_pos"], r["_row_index"]))


def lake_rows(lake: StorageSpec, table: str, version: int) -> Counter:
    """The table's rows at ``version``, read with delta-rs's own query engine (its ``to_pyarrow_table``
    does not read deletion vectors)."""
    delta = DeltaTable(f"{lake.uri}/acc_rand/{table}", version=version)
    rows = pa.table(QueryBuilder().register("t", delta).execute('SELECT "code", "v" FROM t').read_all()).to_pylist()
    return Counter(tuple(sorted(r.items())) for r in rows)


@pytest.mark.parametrize("driver_merge_bytes", [None, 0], ids=["keyless-by-delta-rs", "keyless-by-spark"])
def test_the_retry_after_a_kill_between_two_tables_finishes(left_behind, spark, monkeypatch, driver_merge_bytes):
    """Either engine rewrites the keyless table the kill left behind: delta-rs in the driver (a small
    table), or Spark's MERGE (what the kill's run used, and what failed there)."""
    from mysql_cdc.kinds.delta import sink as delta_sink

    if driver_merge_bytes is not None:
        monkeypatch.setattr(delta_sink, "DRIVER_MERGE_BYTES", driver_merge_bytes)
    root, lake, secrets = left_behind
    state = DeltaStateStore(LakeLocation(lake))
    before = state.checkpoint(PIPELINE)
    assert before.position == BinlogPosition.parse("mysql-bin.000001:1017307")

    committed = {t: DeltaTable(f"{lake.uri}/acc_rand/{t}").version()
                 for t in ("t_comp", "t_comp_c1020000078", "t_int", "t_nopk", "t_uniq")}
    # the keyless table the kill left behind, as the leader had it after the batch: the rows at the
    # cut, with the segment's changes applied one by one (a multiset: full rows, duplicates kept)
    expected = lake_rows(lake, "t_uniqnull", state.table_versions(PIPELINE)["acc_rand.t_uniqnull"])
    for change in change_rows(root, RETRY, "t_uniqnull"):
        image = tuple(sorted((c, change[c]) for c in ("code", "v")))
        if change["_op"] in ("U", "D"):
            before = image if change["_op"] == "D" else tuple(sorted((c, change["_before"][c]) for c in ("code", "v")))
            assert expected[before] > 0, f"{before} is not in the table before its delete"
            expected[before] -= 1
        if change["_op"] in ("I", "U"):
            expected[image] += 1

    summary = run_merge(spark, manifest(root, RETRY), secrets)

    assert not summary.noop
    after = state.checkpoint(PIPELINE)
    assert after.position == BinlogPosition.parse("mysql-bin.000001:1039739")
    cut = read_cut(lake.uri, PIPELINE)
    assert sorted(cut.versions) == sorted(f"acc_rand.{t}" for t in (
        "t_big", "t_comp", "t_comp_c1020000078", "t_int", "t_nopk", "t_uniq", "t_uniqnull"))
    # the tables committed before the kill are skipped, the one it left behind is applied
    assert {t: cut.versions[f"acc_rand.{t}"] for t in committed} == committed
    assert {t: DeltaTable(f"{lake.uri}/acc_rand/{t}").version() for t in committed} == committed
    assert lake_rows(lake, "t_uniqnull", cut.versions["acc_rand.t_uniqnull"]) == +expected
    # a replay of the batch the kill interrupted, and of the retry's, changes nothing
    assert run_merge(spark, manifest(root, KILLED), secrets).noop
    assert run_merge(spark, manifest(root, RETRY), secrets).noop
    assert read_cut(lake.uri, PIPELINE).versions == cut.versions
