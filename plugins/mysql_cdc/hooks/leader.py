"""The leader: where its binlog stands, whether it can be captured, and extraction of a range."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Sequence

from ..capture.stream.extract import BatchTarget, RangeRequest, extract_range
from ..capture.stream.failover import find_position
from ..capture.filters import TableFilter
from ..capture.leader import Leader, PreflightError
from ..capture.snapshot.copy import snapshot_tables
from ..pipeline_options import ExtractOptions, SnapshotOptions
from ..contracts import BinlogPosition, ChangeBatch, PositionRange
from .connections import MySQLConnectionHook


class LeaderHook(MySQLConnectionHook):
    """``LeaderHook(mysql_conn_id)``: positions, preflight and extraction on the leader."""

    default_conn_name = "mysql_leader"
    hook_name = "MySQL CDC leader"
    role = "leader"

    @contextmanager
    def _leader(self) -> Iterator[Leader]:
        with Leader(self.settings) as leader:
            yield leader

    def current_position(self) -> BinlogPosition:
        with self._leader() as leader:
            return leader.current_position()

    def earliest_position(self) -> BinlogPosition:
        with self._leader() as leader:
            return leader.earliest_position()

    def leader_id(self) -> str:
        with self._leader() as leader:
            return leader.leader_id

    def gtid_set_at(self, position: BinlogPosition) -> str | None:
        with self._leader() as leader:
            return leader.gtid_set_at(position)

    def find_position(self, gtid_set: str | None) -> BinlogPosition:
        """Where a checkpoint taken on another server is on this one (``capture.failover``)."""
        with self._leader() as leader:
            return find_position(leader, gtid_set)

    def preflight(self) -> None:
        """Binlog on, ROW/FULL/FULL, replication privileges; raises PreflightError saying what to fix."""
        with self._leader() as leader:
            leader.check_settings()

    def resolve_start(self, start_position: str) -> BinlogPosition:
        """``current`` | ``earliest`` | ``FILE:POS`` -> a position the leader still holds."""
        with self._leader() as leader:
            leader.check_settings()
            current = leader.current_position()
            if start_position == "current":
                return current
            if start_position == "earliest":
                return leader.earliest_position()
            position = BinlogPosition.parse(start_position)
            if current < position:
                raise PreflightError(
                    f"start_position {position} is past the leader's current position {current}"
                )
            leader.check_range(PositionRange(position, current))  # purged? inside a real file?
            return position

    def snapshot(self, target: BatchTarget, pipeline: str, table_filter: TableFilter,
                 only: Sequence[str] | None = None, options: SnapshotOptions = SnapshotOptions()) -> ChangeBatch:
        """Copy the tables (all, or those matching the globs ``only``) into a snapshot batch in
        ``target`` (its ``storage`` is what the copy's worker processes open)."""
        return snapshot_tables(self.settings, target.storage, pipeline, table_filter, only, options=options,
                               store=target.store)

    def is_purged(self, position: BinlogPosition) -> bool:
        """Whether the leader no longer holds the binlog at ``position``."""
        with self._leader() as leader:
            return leader.is_purged(position)

    def extract(self, request: RangeRequest, target: BatchTarget,
                options: ExtractOptions = ExtractOptions()) -> ChangeBatch | None:
        """Write the change batch of ``request`` to ``target`` (manifest last); None when the range
        is empty (``capture.extract``)."""
        return extract_range(self.settings, request, target, options)
