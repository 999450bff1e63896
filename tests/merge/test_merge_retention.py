"""Batch retention against real batches (file:// and the moto S3 endpoint): old applied batches
go, everything still needed stays, a merge of a deleted batch names the retention setting, and
the range is read again from the binlog."""

from __future__ import annotations

import datetime as dt

import pytest

from merge_helpers import assert_same_database
from mysql_cdc.batch_retention import RetentionRecord, retire_batches, stored_batches
from mysql_cdc.server_state import MySQLStateStore
from mysql_cdc.merge.job import run_merge
from mysql_cdc.storage import StorageError


@pytest.mark.parametrize("on_s3", [False, True], ids=["file", "s3"])
def test_old_applied_batches_go_and_what_is_needed_stays(make_pipeline, spark, request, on_s3):
    pipeline = make_pipeline(request.getfixturevalue("s3_bucket") if on_s3 else None)
    db, name, store = pipeline.database, pipeline.name, pipeline.store
    first = pipeline.capture([f"CREATE DATABASE {db}", f"USE {db}", "CREATE TABLE t (id INT PRIMARY KEY, v INT)",
                              "INSERT INTO t VALUES (1, 1)"])
    second = pipeline.capture([f"USE {db}", "INSERT INTO t VALUES (2, 2)"])
    for batch in (first, second):
        run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets)
    unapplied = pipeline.capture([f"USE {db}", "INSERT INTO t VALUES (3, 3)"])
    store.put_bytes(f"{name}/batches/crashed-extraction/seg-00000/t/part-00000.parquet", b"half")  # no manifest
    state = MySQLStateStore(pipeline.follower_settings)
    checkpoint, positions = state.checkpoint(name), state.table_positions(name)
    now = dt.datetime.now(dt.timezone.utc)

    young = retire_batches(store, name, checkpoint, positions, "1h", now)
    assert (young.deleted_batches, young.kept_batches) == (0, 4)

    later = retire_batches(store, name, checkpoint, positions, "1h", now + dt.timedelta(hours=2))
    # the first batch and the crashed extraction go; the checkpoint's own batch and the one not
    # applied yet stay
    assert [s.batch_id for s in stored_batches(store, name)] == [second.batch_id, unapplied.batch_id]
    assert (later.deleted_batches, later.kept_batches, later.retired_ids) == (2, 2, [first.batch_id])
    assert later.deleted_bytes > 0 and later.kept_bytes == sum(s.size for s in stored_batches(store, name))
    assert RetentionRecord.read(store, name) == later

    run_merge(spark, pipeline.manifest_uri(unapplied), pipeline.secrets)
    assert_same_database(pipeline.leader, pipeline.follower, db)

    with pytest.raises(StorageError, match=r"no batch at .*manifest\.json does not exist \(it was applied and then "
                                           r"deleted by the pipeline's retention setting `batches: \{retain: 1h\}`; "
                                           r"trigger a run of the pipeline's DAG with its range as 'start' and 'end'"):
        run_merge(spark, pipeline.manifest_uri(first), pipeline.secrets)
    # what a replay run does: the range read again from the binlog, a no-op for the follower
    again = pipeline.extract(first.start, first.end)
    assert again.batch_id == first.batch_id
    assert run_merge(spark, pipeline.manifest_uri(again), pipeline.secrets).noop
    assert state.checkpoint(name).position == unapplied.end
