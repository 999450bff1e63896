"""Batch retention's rule, on inline batches: which stored batches go at a given time."""

from __future__ import annotations

import datetime as dt

import pytest

from mysql_cdc.batch_retention import StoredBatch, parse_retain, retired
from mysql_cdc.contracts import COPYING, DONE, BinlogPosition, ChangeBatch, Checkpoint, TablePosition, TablePositions

P = BinlogPosition.parse
NOW = dt.datetime(2026, 11, 28, 12, tzinfo=dt.timezone.utc)
WEEK = dt.timedelta(days=7)


def batch(start: str, end: str, leader: str = "leader-a") -> ChangeBatch:
    return ChangeBatch(pipeline="p", batch_id=f"{start}-{end}", start=P(start), end=P(end), segments=(),
                       leader_id=leader)


def stored(b: ChangeBatch | None, age: dt.timedelta, batch_id: str | None = None) -> StoredBatch:
    return StoredBatch(batch_id or b.batch_id, b, 100, NOW - age)


def ids(batches: list[StoredBatch]) -> list[str]:
    return [s.batch_id for s in batches]


CHECKPOINT = Checkpoint("p", P("binlog.000002:400"), batch_id="binlog.000002:300-binlog.000002:400",
                        leader_id="leader-a")


def test_old_applied_batches_go_young_ones_and_unapplied_ones_stay():
    old_applied = stored(batch("binlog.000001:4", "binlog.000002:300"), WEEK * 2)
    young_applied = stored(batch("binlog.000002:250", "binlog.000002:300"), dt.timedelta(days=6))
    checkpoints_own = stored(batch("binlog.000002:300", "binlog.000002:400"), WEEK * 2)
    unapplied = stored(batch("binlog.000002:400", "binlog.000003:4"), WEEK * 2)
    going = retired([old_applied, young_applied, checkpoints_own, unapplied], CHECKPOINT, TablePositions(), WEEK, NOW)
    assert ids(going) == [old_applied.batch_id]


def test_an_unfinished_snapshot_stays_and_a_finished_one_goes():
    copy = batch("binlog.000001:4", "binlog.000001:900")  # (its segments do not matter here)
    pending = TablePositions({("db", "t"): TablePosition("db", "t", P("binlog.000001:900"), copy.batch_id, COPYING)})
    finished = TablePositions({("db", "t"): TablePosition("db", "t", P("binlog.000001:900"), copy.batch_id, DONE)})
    assert retired([stored(copy, WEEK * 2)], CHECKPOINT, pending, WEEK, NOW) == []
    assert ids(retired([stored(copy, WEEK * 2)], CHECKPOINT, finished, WEEK, NOW)) == [copy.batch_id]


def test_an_earlier_leaders_batch_counts_as_applied_and_nothing_goes_before_a_checkpoint():
    # after a failover, FILE:POS of the old leader do not compare with the checkpoint's: the stream
    # reads the new leader from the checkpoint, so the old leader's batches are never read again
    old_leader = stored(batch("binlog.000009:4", "binlog.000009:800", leader="leader-old"), WEEK * 2)
    assert ids(retired([old_leader], CHECKPOINT, TablePositions(), WEEK, NOW)) == [old_leader.batch_id]
    assert retired([old_leader], None, TablePositions(), WEEK, NOW) == []


def test_a_directory_without_a_manifest_goes_only_when_old():
    crashed, writing = stored(None, WEEK * 2, "crashed"), stored(None, dt.timedelta(minutes=1), "writing")
    assert ids(retired([crashed, writing], CHECKPOINT, TablePositions(), WEEK, NOW)) == ["crashed"]


@pytest.mark.parametrize("text, duration", [("7d", WEEK), ("36h", dt.timedelta(hours=36)),
                                            ("90m", dt.timedelta(minutes=90)), ("2w", WEEK * 2), (" 1h ", dt.timedelta(hours=1))])
def test_durations(text, duration):
    assert parse_retain(text) == duration


@pytest.mark.parametrize("text, said", [("7", "must be a duration such as '7d'"), ("1.5d", "must be a duration"),
                                        ("59m", "must be at least 1h"), (7, "must be a duration")])
def test_bad_durations_are_named(text, said):
    with pytest.raises(ValueError, match=said):
        parse_retain(text)
