"""The leader: where its binlog stands, whether it can be captured, and extraction of a range."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Sequence

from ..capture.extract import extract_range
from ..capture.failover import find_position
from ..capture.filters import TableFilter
from ..capture.leader import Leader, PreflightError
from ..capture.snapshot_copy import snapshot_tables
from ..settings import ExtractOptions, SnapshotOptions
from ..contracts import BinlogPosition, ChangeBatch, PositionRange, TablePositions
from ..storage import ObjectStore, StorageSpec
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

    def snapshot(self, storage: StorageSpec, store: ObjectStore, pipeline: str, table_filter: TableFilter,
                 only: Sequence[str] | None = None, options: SnapshotOptions = SnapshotOptions()) -> ChangeBatch:
        """Copy the tables (all, or those matching the globs ``only``) into a snapshot batch
        (``storage``: for the copy's worker processes, which open their own ``store``)."""
        return snapshot_tables(self.settings, storage, pipeline, table_filter, only, options=options, store=store)

    def is_purged(self, position: BinlogPosition) -> bool:
        """Whether the leader no longer holds the binlog at ``position``."""
        with self._leader() as leader:
            files = leader.binlog_files()
        return not files or position < BinlogPosition(files[0].name, 4) or position.file not in {f.name for f in files}

    def extract(self, storage: StorageSpec, store: ObjectStore, pipeline: str, range_: PositionRange,
                table_filter: TableFilter, start_gtid: str | None = None, positions: TablePositions = TablePositions(),
                start_gtid_set: str | None = None, options: ExtractOptions = ExtractOptions()) -> ChangeBatch | None:
        """Write the change batch of ``range_`` (manifest last); None when the range is empty.
        ``positions``: tables copied by a snapshot, whose events before their copy are skipped;
        ``start_gtid_set``: the executed GTID set at the range's start, when known; ``storage``:
        for the reader processes of a long range, which open their own ``store``."""
        return extract_range(self.settings, store, pipeline, range_, table_filter, start_gtid=start_gtid,
                             positions=positions, start_gtid_set=start_gtid_set, storage=storage, options=options)
