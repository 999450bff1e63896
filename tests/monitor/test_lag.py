"""Lag figures from positions and times (pure functions; the live reads are covered by the DAG runs)."""

from __future__ import annotations

import datetime as dt

import pytest

from mysql_cdc.capture.leader import BinlogFile
from mysql_cdc.contracts import BinlogPosition
from mysql_cdc.monitor.lag import LagError, bytes_behind, seconds_behind

P = BinlogPosition.parse
FILES = [BinlogFile("bin.000007", 1000), BinlogFile("bin.000008", 5000), BinlogFile("bin.000009", 700),
         BinlogFile("bin.000010", 300)]


def test_bytes_behind_within_one_file_and_across_files():
    assert bytes_behind(P("bin.000009:400"), P("bin.000009:650"), FILES) == 250
    # the rest of 000008 (5000 - 4000) + all of 000009 (700) + 000010 up to 120
    assert bytes_behind(P("bin.000008:4000"), P("bin.000010:120"), FILES) == 1000 + 700 + 120
    assert bytes_behind(P("bin.000010:120"), P("bin.000010:120"), FILES) == 0


def test_a_checkpoint_past_the_leader_is_not_negative():
    # (the leader reported before the merge that moved the checkpoint committed)
    assert bytes_behind(P("bin.000010:300"), P("bin.000010:120"), FILES) == 0


def test_a_purged_checkpoint_file_names_the_recovery():
    with pytest.raises(LagError, match=r"bin.000003 is no longer on the leader .*resnapshot"):
        bytes_behind(P("bin.000003:4"), P("bin.000010:120"), FILES)


def test_seconds_behind_counts_from_the_last_applied_commit():
    now = dt.datetime(2026, 11, 23, 12, 0, 0, tzinfo=dt.timezone.utc)
    applied = dt.datetime(2026, 11, 23, 11, 58, 30)  # naive UTC, as DATETIME columns come back
    assert seconds_behind(applied, caught_up=False, now=now) == 90.0
    assert seconds_behind(applied, caught_up=True, now=now) == 0.0  # nothing is waiting
    assert seconds_behind(None, caught_up=False, now=now) is None  # nothing applied with a time yet
