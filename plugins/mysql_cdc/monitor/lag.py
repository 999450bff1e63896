"""How far behind a pipeline is, read live from its leader and its follower's state store.

``bytes_behind`` is binlog bytes between the checkpoint and the leader's position now, across
files (0 when caught up). ``seconds_behind`` is now minus the leader's commit time of the last
transaction the follower applied (the latest merged batch's ``end_time``, on the leader's clock).
On an idle leader that time stops moving while nothing is behind: a pipeline with the heartbeat
on (``monitor.heartbeat``) commits a row on the leader every run so it keeps moving; without it,
a caught-up pipeline counts as 0 seconds behind, since there is nothing to wait for.

Plain Python on settings: the check task, the CDC page and ``GET /cdc/api/pipelines`` all read
the figures through ``pipeline_figures``, from the servers, never from a cache.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Sequence

from ..capture.leader import BinlogFile, Leader
from ..contracts import BinlogPosition, Checkpoint
from ..contracts.history import BatchRecord
from ..contracts.verification import VerificationResult
from ..mysql_server import MySQLSettings
from ..state_store import StateStore


class LagError(RuntimeError):
    """The figures cannot be computed from what the servers say (a purged checkpoint, say)."""


def bytes_behind(checkpoint: BinlogPosition, leader: BinlogPosition, files: Sequence[BinlogFile]) -> int:
    """Binlog bytes from ``checkpoint`` to ``leader``: the rest of the checkpoint's file, every
    file in between, and the leader's file up to its position. ``files`` is SHOW BINARY LOGS."""
    if checkpoint >= leader:
        return 0
    if checkpoint.file == leader.file:
        return leader.offset - checkpoint.offset
    sizes = {f.name: f.size for f in files}
    if checkpoint.file not in sizes:
        raise LagError(f"the checkpoint's binlog file {checkpoint.file} is no longer on the leader (purged): "
                       "the pipeline cannot catch up from it; run a resnapshot (conf {\"resnapshot\": [\"*\"]})")
    between = [f for f in files if checkpoint.sequence < BinlogPosition(f.name, 4).sequence < leader.sequence]
    return (sizes[checkpoint.file] - checkpoint.offset) + sum(f.size for f in between) + leader.offset


@dataclass(frozen=True)
class PipelineFigures:
    """One pipeline now, as the API returns it (``to_json``)."""

    name: str
    checkpoint: Checkpoint | None
    leader_position: BinlogPosition
    bytes_behind: int | None  # None: no checkpoint yet, or one on another server (a failover)
    seconds_behind: float | None  # None: nothing applied yet with a known commit time
    last_applied_time: dt.datetime | None
    history: tuple[BatchRecord, ...]
    verification: VerificationResult | None
    # each table's Delta version at the checkpoint (a lake's consistent cut); None for a MySQL follower
    table_versions: dict[str, int] | None = None

    @property
    def last_batch(self) -> BatchRecord | None:
        return self.history[0] if self.history else None

    def to_json(self) -> dict:
        last = self.last_batch
        return {
            "name": self.name,
            "checkpoint_position": str(self.checkpoint.position) if self.checkpoint else None,
            "checkpoint_gtid_set": self.checkpoint.gtid_set if self.checkpoint else None,
            "leader_position": str(self.leader_position),
            "bytes_behind": self.bytes_behind,
            "seconds_behind": self.seconds_behind,
            "last_applied_time": _iso(self.last_applied_time),
            "last_batch": last.to_json() if last else None,
            "verification": self.verification.to_json() if self.verification else None,
            "table_versions": self.table_versions,
        }


def _iso(value: dt.datetime | None) -> str | None:
    return value.replace(tzinfo=dt.timezone.utc).isoformat() if value else None


def seconds_behind(applied: dt.datetime | None, caught_up: bool, now: dt.datetime) -> float | None:
    """Now minus the commit time of the last applied transaction (both UTC), or 0 when nothing is
    behind; None when no commit time is known yet and something is behind."""
    if caught_up:
        return 0.0
    if applied is None:
        return None
    return round(max(0.0, (now - applied.replace(tzinfo=dt.timezone.utc)).total_seconds()), 3)


def pipeline_figures(name: str, leader: MySQLSettings, state: StateStore, history: int = 30,
                     heartbeat: bool = False, now: dt.datetime | None = None) -> PipelineFigures:
    """The pipeline's figures from its servers. With ``heartbeat``, a caught-up pipeline's
    seconds are still counted from the last applied commit (the heartbeat keeps it fresh), so a
    stopped pipeline shows as behind even when its leader is idle."""
    now = now or dt.datetime.now(dt.timezone.utc)
    with Leader(leader) as server:
        position, files, leader_id = server.current_position(), server.binlog_files(), server.leader_id
    checkpoint = state.checkpoint(name)
    records = tuple(state.history(name, history))
    applied = state.last_applied_time(name)
    verification = state.latest_verification(name)
    # a checkpoint taken on another server (a failover the next run follows) has no byte distance
    comparable = checkpoint is not None and checkpoint.leader_id in (None, leader_id)
    behind = bytes_behind(checkpoint.position, position, files) if comparable else None
    caught_up = behind == 0 and not heartbeat
    return PipelineFigures(name, checkpoint, position, behind, seconds_behind(applied, caught_up, now), applied,
                           records, verification, state.table_versions(name))
