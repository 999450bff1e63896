"""The replay rules (``contracts.replay``), the one owner the merge job and the merge task's plan
share: which segments of a batch are left to apply over a checkpoint, and which batches are refused."""

import pytest

from mysql_cdc.contracts import (
    BinlogPosition, ChangeBatch, Checkpoint, DdlSegment, DdlTarget, OtherLeaderError, RangeGapError, ReplayError,
    RowSegment, plan_replay,
)

P = BinlogPosition.parse


def batch_with(*segments, start="binlog.000001:100", end="binlog.000001:900") -> ChangeBatch:
    return ChangeBatch("p", "b", P(start), P(end), tuple(segments))


ROWS = RowSegment(0, P("binlog.000001:100"), P("binlog.000001:400"), ())
DDL = DdlSegment(1, P("binlog.000001:400"), P("binlog.000001:500"), "db", "ALTER TABLE t ADD c INT",
                 "alter_table", (DdlTarget("db", "t"),))
MORE = RowSegment(2, P("binlog.000001:500"), P("binlog.000001:900"), ())


@pytest.mark.parametrize(("checkpoint", "expected"), [
    ("binlog.000001:100", [ROWS, DDL, MORE]),
    ("binlog.000001:250", [ROWS, DDL, MORE]),  # inside the first row segment: its later rows apply
    ("binlog.000001:400", [DDL, MORE]),
    ("binlog.000001:500", [MORE]),
    ("binlog.000001:900", []),
    ("binlog.000002:4", []),
])
def test_segments_left_to_apply(checkpoint, expected):
    plan = plan_replay(batch_with(ROWS, DDL, MORE), Checkpoint("p", P(checkpoint)))
    assert list(plan.segments) == expected and plan.noop == (not expected)


def test_a_gap_names_both_positions():
    with pytest.raises(RangeGapError, match=r"gap: range \[binlog.000001:100, .* checkpoint binlog.000001:50"):
        plan_replay(batch_with(ROWS), Checkpoint("p", P("binlog.000001:50")))


def test_a_pending_ddl_must_be_the_next_segment():
    pending = Checkpoint("p", P("binlog.000001:400"), pending_ddl_pos=P("binlog.000001:400"),
                         pending_ddl_fingerprint="f")
    assert plan_replay(batch_with(ROWS, DDL, MORE), pending).segments == (DDL, MORE)
    elsewhere = Checkpoint("p", P("binlog.000001:100"), pending_ddl_pos=P("binlog.000001:77"))
    with pytest.raises(ReplayError, match="pending DDL at binlog.000001:77"):
        plan_replay(batch_with(ROWS, DDL, MORE), elsewhere)




def test_a_batch_of_another_leader_is_refused_and_an_unknown_leader_is_not():
    from dataclasses import replace

    batch = replace(batch_with(ROWS), leader_id="server-b")
    with pytest.raises(OtherLeaderError, match="read from the leader 'server-b'.*a position on 'server-a'"):
        plan_replay(batch, Checkpoint("p", P("binlog.000001:100"), leader_id="server-a"))
    # a checkpoint written before leaders were recorded places the batch by position alone
    assert plan_replay(batch, Checkpoint("p", P("binlog.000001:100"))).segments == (ROWS,)


def test_a_batch_of_transactions_on_other_tables_only_moves_the_checkpoint():
    plan = plan_replay(batch_with(start="binlog.000001:100", end="binlog.000001:900"), Checkpoint("p", P("binlog.000001:100")))
    assert plan.moves_only and not plan.noop and plan.end.position == P("binlog.000001:900")
