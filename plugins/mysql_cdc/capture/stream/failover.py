"""Following a failover: where a checkpoint taken on one leader is in another leader's binlog.

A checkpoint's ``FILE:OFFSET`` is a place in one server's binlog. When the pipeline's leader
connection points at another server (a replica promoted after the old leader failed), the same
place is found through the checkpoint's GTID set ``S``: the new leader's position ``P`` such that
the transactions its binlog holds before ``P`` are exactly those of ``S`` (every one of them in
``S``; every one after ``P`` not), and that has executed all of ``S``. Reading from ``P`` then
applies each transaction the follower lacks exactly once.

No such position, and the run stops with ``FailoverError``: the new leader lacks transactions the
follower already has (they were lost with the old leader), or it logged transactions in another
order than the old one (a replica applying in parallel without keeping the commit order). The
error names the safe recovery: a copy of every table from the new leader (a resnapshot).
"""

from __future__ import annotations

from ...contracts import BinlogPosition
from ...contracts.gtid_set import GtidSet, parse_gtid_set
from ..gtid import FILE_START_SETS, event_gtid
from ..leader import Leader, PreflightError

RESNAPSHOT_ALL = '{"resnapshot": ["*"]}'


class FailoverError(PreflightError):
    """The checkpoint cannot be placed on the new leader; the message names the recovery."""


def _fail(leader: Leader, gtid_set: str, why: str) -> FailoverError:
    return FailoverError(
        f"the pipeline's leader is now {leader.settings.describe('leader')} (server {leader.leader_id!r}), another "
        f"server than the one its checkpoint was taken on, and {why}. The follower holds the transactions "
        f"{gtid_set!r}. Copy every table from the new leader: trigger the DAG with conf {RESNAPSHOT_ALL}"
    )


def _file_start_set(leader: Leader, flavor: str, file: str) -> GtidSet | None:
    """The GTID set a binlog file starts with (MySQL Previous_gtids, MariaDB Gtid_list)."""
    for _, event_type, _, info in leader.binlog_events(file, page=8):
        if event_type in FILE_START_SETS:
            return parse_gtid_set(flavor, FILE_START_SETS[event_type](info))
    return None


def find_position(leader: Leader, gtid_set: str | None) -> BinlogPosition:
    """The position on ``leader`` that has exactly the transactions of ``gtid_set`` behind it."""
    if gtid_set is None:
        raise _fail(leader, "?", "the checkpoint has no GTID set to find its place there with (it was written "
                                 "by an older mysql-cdc, mid-batch after a DDL, or the old leader had no GTIDs)")
    flavor = leader.flavor
    wanted = parse_gtid_set(flavor, gtid_set)
    executed = parse_gtid_set(flavor, leader.current_gtid())
    if not executed.covers(wanted):
        raise _fail(leader, gtid_set, f"it has not executed all of them (its GTIDs: {str(executed)!r}): the "
                                      "transactions it lacks were lost with the old leader")
    files = [f.name for f in leader.binlog_files()]
    # Skip the files that end before the place: a file whose successor starts with a set the
    # checkpoint covers holds nothing after it.
    first = 0
    for index in range(1, len(files)):
        starts = _file_start_set(leader, flavor, files[index])
        if starts is not None and wanted.covers(starts):
            first = index
    found: BinlogPosition | None = None
    for file in files[first:]:
        for position, _, _, info in leader.binlog_events(file):
            gtid = event_gtid(info)
            if gtid is None:
                continue
            if found is None and gtid not in wanted:
                found = BinlogPosition(file, position)
            elif found is not None and gtid in wanted:
                raise _fail(leader, gtid_set, f"its binlog has {gtid}, which the follower has, after {found}, which "
                                              "the follower lacks: it logged the transactions in another order")
    return found or leader.current_position()
