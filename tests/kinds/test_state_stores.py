"""Every state store against real storage: MySQLStateStore in the session's MariaDB and MySQL
followers, DeltaStateStore in a lake on file:// and on the session's S3 endpoint (moto). The same
tests, one fixture: a new follower kind is one more parameter here
(``tests/airflow/hooks/test_follower_hook.py`` shows the hook handing a store out)."""

from __future__ import annotations

import datetime as dt

import pytest

from mysql_cdc.contracts import COPYING, BinlogPosition, ChangeBatch, Checkpoint, SnapshotSegment
from mysql_cdc.contracts.history import EXTRACTED, FAILED, MERGED, BatchRecord, FailedTry
from mysql_cdc.contracts.verification import VerificationResult
from mysql_cdc.state_store import StateStore
from mysql_cdc.mysql_server import MySQLSettings
from mysql_cdc.kinds.delta.state import DeltaStateStore, LakeLocation
from mysql_cdc.server_state import MySQLStateStore
from mysql_cdc.storage import StorageSpec

P1 = BinlogPosition("binlog.000001", 4)
P2 = BinlogPosition("binlog.000001", 900)
P3 = BinlogPosition("binlog.000002", 4)


@pytest.fixture(params=["mariadb", "mysql", "delta-file", "delta-s3"])
def state(request, tmp_path) -> StateStore:
    if request.param == "delta-file":
        return DeltaStateStore(LakeLocation(StorageSpec(f"file://{tmp_path}/lake")))
    if request.param == "delta-s3":
        bucket = request.getfixturevalue("s3_bucket")
        options = {k: bucket[k] for k in ("endpoint_url", "region_name", "aws_access_key_id", "aws_secret_access_key")}
        return DeltaStateStore(LakeLocation(StorageSpec(f"s3://{bucket['bucket']}/lake", options)))
    follower_user = request.getfixturevalue("follower_user" if request.param == "mariadb" else "mysql_follower_user")
    return MySQLStateStore(MySQLSettings(**follower_user))


def test_initialize_creates_once_and_never_moves_an_existing_checkpoint(state, unique_name):
    assert state.checkpoint(unique_name) is None
    created = state.initialize(Checkpoint(unique_name, P2))
    assert (created.pipeline, created.position) == (unique_name, P2)
    again = state.initialize(Checkpoint(unique_name, P1))
    assert again.position == P2
    assert state.checkpoint(unique_name).position == P2


def test_move_is_compare_and_set(state, unique_name):
    first = state.initialize(Checkpoint(unique_name, P1))
    elsewhere = Checkpoint(unique_name, P2)
    assert not state.move(elsewhere, Checkpoint(unique_name, P3))  # it is not where the caller thinks
    assert state.checkpoint(unique_name).position == P1
    assert state.move(first, Checkpoint(unique_name, P2, batch_id="b1"))
    moved = state.checkpoint(unique_name)
    assert (moved.position, moved.batch_id) == (P2, "b1")
    assert not state.move(first, Checkpoint(unique_name, P3))  # replayed: the checkpoint is past it now
    assert state.checkpoint(unique_name).position == P2


def test_move_refuses_an_unknown_pipeline(state, unique_name):
    assert not state.move(Checkpoint(unique_name, P1), Checkpoint(unique_name, P2))
    assert state.checkpoint(unique_name) is None


def test_a_fresh_mysql_follower_has_no_checkpoint_until_the_first_run(mysql_follower, mysql_follower_user, unique_name):
    """MySQL answers a query on a missing schema with 1049 (OperationalError in PyMySQL), MariaDB
    with 1146: both mean "no checkpoint yet", and the first run creates the schema."""
    mysql_follower.run_sql(["DROP DATABASE IF EXISTS _mysql_cdc"])
    state = MySQLStateStore(MySQLSettings(**mysql_follower_user))
    assert state.checkpoint(unique_name) is None
    assert state.history(unique_name) == [] and state.latest_verification(unique_name) is None
    assert state.initialize(Checkpoint(unique_name, P1)).position == P1
    assert state.checkpoint(unique_name).position == P1


def test_a_snapshot_marks_its_tables_copying_and_a_first_checkpoint(state, unique_name):
    batch = ChangeBatch(unique_name, "snap-1", P2, P2, (
        SnapshotSegment(0, P2, "db", "t", "", "", (), (), (), 0, True),
        SnapshotSegment(1, P2, "db", "u", "", "", (), (), (), 0, True)))
    assert state.start_snapshot(batch).position == P2
    positions = state.table_positions(unique_name)
    assert positions.pending_batch() == "snap-1"
    assert {(p.table, p.state) for p in positions.by_table.values()} == {("t", COPYING), ("u", COPYING)}


def test_the_history_keeps_one_record_per_run_with_its_failed_tries(state, unique_name):
    ended = dt.datetime(2026, 11, 25, 10, 0, 0, 123456)
    state.record_extracted(BatchRecord(unique_name, "run-1", "stream", EXTRACTED, "b1", str(P1), str(P2), ended,
                                       rows_in=10, extract_seconds=1.5))
    state.record_failed_try(FailedTry(unique_name, "run-1", "merge_batch", 1, "killed"))
    state.record_merged(unique_name, "run-1", 7, 2.5)
    state.record_failed(unique_name, "run-2", "stream", "gap: range starts after the checkpoint")
    # a retried extract of a run starts its record afresh
    state.record_extracted(BatchRecord(unique_name, "run-3", "stream", EXTRACTED, "b2", str(P2), str(P3), None,
                                       rows_in=1, extract_seconds=0.1))
    state.record_extracted(BatchRecord(unique_name, "run-3", "stream", EXTRACTED, "b2", str(P2), str(P3), None,
                                       rows_in=2, extract_seconds=0.2))
    history = state.history(unique_name)
    assert [r.run_id for r in history] == ["run-3", "run-2", "run-1"]
    third, second, first = history
    assert (third.status, third.rows_in) == (EXTRACTED, 2)
    assert (second.status, second.error) == (FAILED, "gap: range starts after the checkpoint")
    assert (first.status, first.net_rows, first.merge_seconds, first.end_time) == (MERGED, 7, 2.5, ended)
    assert [(t.task_id, t.try_number, t.error) for t in first.failed_tries] == [("merge_batch", 1, "killed")]
    assert state.last_applied_time(unique_name) == ended
    assert state.history(unique_name, limit=1)[0].run_id == "run-3"


def test_the_latest_verification_is_kept(state, unique_name):
    assert state.latest_verification(unique_name) is None
    started = dt.datetime(2026, 11, 25, 9, 0, tzinfo=dt.timezone.utc)
    state.record_verification(VerificationResult(unique_name, started, started, tables=2, chunks=4, rows=100))
    later = VerificationResult(unique_name, started + dt.timedelta(hours=1), started + dt.timedelta(hours=1),
                               tables=2, missing=["db.t"])
    state.record_verification(later)
    latest = state.latest_verification(unique_name)
    assert (latest.status, latest.missing) == ("drift", ["db.t"])
