"""``CdcPipelineHook``'s decision tree (``plan_run``): which read a run makes, from the pipeline's
state and what the run asked for. Pure: no server, no Airflow context."""

import pytest

from mysql_cdc.contracts import BinlogPosition, Checkpoint, PositionRange, TablePosition, TablePositions
from mysql_cdc.contracts.checkpoint import COPYING, DONE
from mysql_cdc.hooks.pipeline import FINISH_SNAPSHOT, REPLAY, SNAPSHOT, STREAM, plan_run

P = BinlogPosition.parse
CHECKPOINT = Checkpoint("p", P("binlog.000002:400"))
RANGE = PositionRange(P("binlog.000001:4"), P("binlog.000001:900"))
DONE_COPY = TablePositions({("db", "a"): TablePosition("db", "a", P("binlog.000002:100"), "snap-1", DONE)})
UNFINISHED = TablePositions({("db", "a"): TablePosition("db", "a", P("binlog.000002:100"), "snap-1", DONE),
                             ("db", "b"): TablePosition("db", "b", P("binlog.000002:300"), "snap-2", COPYING)})


def plan(checkpoint=CHECKPOINT, positions=TablePositions(), replay=None, resnapshot=None,
         start_position="snapshot", recopy=()):
    return plan_run(checkpoint, positions, replay=replay, resnapshot=resnapshot, start_position=start_position,
                    recopy=recopy)


def test_a_pipeline_with_a_checkpoint_streams_the_next_range():
    assert plan().action == STREAM
    assert plan(positions=DONE_COPY).action == STREAM  # finished copies do not hold the stream back


@pytest.mark.parametrize(("start_position", "action"), [("snapshot", SNAPSHOT), ("binlog.000001:4", STREAM),
                                                        ("current", STREAM)])
def test_the_first_run_copies_every_table_only_when_the_pipeline_starts_from_a_snapshot(start_position, action):
    first = plan(checkpoint=None, start_position=start_position)
    assert first.action == action
    if action == SNAPSHOT:
        assert first.tables is None  # every table


def test_a_resnapshot_copies_the_tables_it_names():
    resnapshot = plan(resnapshot=["db.a", "db.b*"])
    assert (resnapshot.action, resnapshot.tables) == (SNAPSHOT, ("db.a", "db.b*"))


def test_an_unfinished_snapshot_is_finished_first_whatever_the_run_asked_for():
    for asked in ({}, {"resnapshot": ["db.c"]}, {"checkpoint": None}):
        unfinished = plan(positions=UNFINISHED, **asked)
        assert (unfinished.action, unfinished.batch_id) == (FINISH_SNAPSHOT, "snap-2"), asked


def test_a_replay_reads_its_range_even_while_a_snapshot_is_unfinished():
    # a replay never moves the checkpoint, so it cannot pass an unfinished copy
    assert plan(replay=RANGE).action == REPLAY
    assert plan(replay=RANGE, positions=UNFINISHED).action == REPLAY


def test_tables_a_failover_could_not_carry_over_are_copied_again_before_anything_else():
    recopy = plan(recopy=["db.a"], replay=RANGE, positions=UNFINISHED)
    assert (recopy.action, recopy.tables) == (SNAPSHOT, ("db.a",))
    assert "failover" in recopy.reason
