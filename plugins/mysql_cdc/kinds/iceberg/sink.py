"""An Iceberg follower's sink: the merge job writes each table through pyiceberg and the catalog,
from the driver (no Spark job: the rows are netted in Arrow, or collected from Spark's netting).

- rows: each table of a row segment is one snapshot (``commit.TableCommit``) carrying the app id
  and the segment's end position, skipped on a retry when the table holds it; when every table is
  committed, the checkpoint and the cut (each table's snapshot id) move in one transaction of the
  catalog's server (``state.move_with_cut``).
- DDL (``ddl``): with Iceberg's own schema evolution and the catalog's create, rename and drop; it
  ends with a snapshot carrying the statement's position, and the checkpoint moves after it.
- a copy: the table's rows replaced in one snapshot (its columns changed in the same commit), and
  the table's position recorded with the cut.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Mapping

import pyarrow as pa
import pyarrow.compute as pc

from ...contracts import DONE, ChangeBatch, Checkpoint, DdlSegment, RowSegment, TableChanges, TablePosition
from ...contracts import change_row as cr
from ...contracts import require_checkpoint
from ...crash_points import crash_point
from ...merge import history, soft_deletes
from ...merge.errors import CheckpointError, TableCommitError
from ...merge.netting import copies_per_op
from ...merge.report import TableReport
from ...merge.sink import BatchJob, NetRows, SegmentWriter, Sink, TableCopy
from ...server_state.checkpoint import read_checkpoint
from . import ddl
from .catalog import CatalogRef
from .commit import CommitId, TableCommit, spelling
from .state import ensure_cut_table, move_with_cut, read_cut
from .tables import create_table, mark, schema_changes
from .types import iceberg_schema, to_iceberg

# a segment's tables are loaded and committed this many at a time: a table's load or commit of a
# few rows is mostly waiting (the catalog's server, the warehouse's storage), and each commit is
# its own (idempotent under the segment's position, the checkpoint moving after all of them), so
# their order changes nothing a retry finds; the catalog's connection pool (``catalog.py``) holds
# as many
_TABLE_THREADS = 8


@dataclass(frozen=True)
class IcebergTarget:
    """A table of the segment as ``check_tables`` found it (created if it was missing)."""

    database: str
    table: str

    @property
    def name(self) -> str:
        return f"{self.database}.{self.table}"


@dataclass
class _Staged:
    """One table's net rows for the segment's commit, in Iceberg values with the net op and copies."""

    changes: TableChanges
    net: pa.Table
    written: int
    versions: history.SegmentVersions | None = None  # a history table's, in Iceberg values


class IcebergSink(Sink[IcebergTarget]):
    def __init__(self, catalog: CatalogRef, soft_deletes: tuple[str, ...] = (), history: tuple[str, ...] = ()):
        self.ref = catalog
        self.soft_deletes = soft_deletes  # globs of the tables that keep their deleted rows
        self.history = history  # globs of the tables that keep every version of each row
        self._catalog = None
        self.job: BatchJob | None = None
        # the tables ``check_tables`` loaded for the segment, which their commits start from (nothing
        # else writes them meanwhile: one merge of a pipeline at a time); a commit takes its table out
        self._checked: dict[str, Any] = {}
        # a table's creation creates its namespace first: two threads creating one collide
        self._creating = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any], leader_flavor: str | None) -> "IcebergSink":
        return cls(CatalogRef.from_json(settings["catalog"]), tuple(settings.get("soft_deletes", ())),
                   tuple(settings.get("history", ())))

    @property
    def catalog(self):
        if self._catalog is None:
            self._catalog = self.ref.open()
        return self._catalog

    def load(self, database: str, table: str):
        """The table (pyiceberg) at its current snapshot, or None."""
        from pyiceberg.exceptions import NoSuchTableError

        try:
            return self.catalog.load_table((database, table))
        except NoSuchTableError:
            return None

    def keeps_deleted(self, database: str, table: str) -> bool:
        """Whether the table keeps the rows the leader deleted (``merge.soft_deletes``)."""
        return soft_deletes.keeps_deleted(self.soft_deletes, database, table)

    def keeps_history(self, database: str, table: str) -> bool:
        """Whether the table keeps every version of each row (``merge.history``)."""
        return history.keeps_history(self.history, database, table)

    def schema(self, database: str, table: str, columns, key_columns) -> pa.Schema:
        """The Arrow schema of the table's Iceberg columns: the leader's (``columns``), then the marks
        of a table keeping its deleted rows, or the validity of a table keeping its history (either
        needs a key: ``check_table``)."""
        name = f"{database}.{table}"
        schema = iceberg_schema(columns, name)
        soft, kept = self.keeps_deleted(database, table), self.keeps_history(database, table)
        history.check_table(name, key_columns, [c.name for c in columns], soft, kept)
        if soft:
            schema = pa.schema([*schema, *soft_deletes.FIELDS])
        if kept:
            schema = pa.schema([*schema, *history.FIELDS])
        return schema

    def held_now(self, database: str, table: str):
        """rows -> a mask of those the leader holds, for a table of a history mode (its deleted rows,
        its earlier versions are not); None for any other table."""
        if self.keeps_deleted(database, table):
            return lambda rows: pc.invert(pc.fill_null(rows.column(soft_deletes.DELETED), False))
        if self.keeps_history(database, table):
            return lambda rows: pc.fill_null(rows.column(history.CURRENT), True)
        return None

    def change_metadata(self, table: TableChanges) -> frozenset[str]:
        soft = soft_deletes.METADATA if self.keeps_deleted(table.database, table.table) else frozenset()
        kept = history.METADATA if self.keeps_history(table.database, table.table) else frozenset()
        return soft | kept

    def app_id(self, batch: ChangeBatch) -> str:
        # positions of two leaders do not compare: after a failover the positions start afresh
        return f"mysql-cdc/{batch.pipeline}/{batch.leader_id or 'leader'}"

    # -- state --------------------------------------------------------------------------------------

    def _state(self):
        return self.ref.server.connect(autocommit=False)

    def expect(self, expected: Checkpoint) -> dict[str, int]:
        """The cut at ``expected`` (a ``CheckpointError`` when the checkpoint is elsewhere)."""
        conn = self._state()
        try:
            current = require_checkpoint(read_checkpoint(conn, expected.pipeline), expected.pipeline)
            if current.position != expected.position:
                raise _moved(expected, current)
            return read_cut(conn, expected.pipeline)
        finally:
            conn.close()

    def move(self, expected: Checkpoint, done: Checkpoint | None, cut: Mapping[str, int | None],
             positions: tuple[TablePosition, ...] = ()) -> None:
        conn = self._state()
        try:
            if not move_with_cut(conn, expected, done, cut, positions):
                raise _moved(expected, read_checkpoint(conn, expected.pipeline))
        finally:
            conn.close()

    def begin(self, job: BatchJob) -> None:
        # nothing to remove: a crashed attempt's files are in no snapshot (the maintenance job's
        # orphan removal deletes them)
        self.job = job
        conn = self._state()
        try:
            ensure_cut_table(conn)
        finally:
            conn.close()

    def advance(self, expected: Checkpoint, done: Checkpoint) -> None:
        self.move(expected, done, {})

    # -- rows -------------------------------------------------------------------------------------

    def check_table(self, changes: TableChanges) -> IcebergTarget:
        """The table, created from the batch's columns when missing, its columns the batch's (added,
        widened) when they differ in a way Iceberg changes in place."""
        name = changes.qualified_name
        schema = self.schema(changes.database, changes.table, changes.columns, changes.key_columns)
        table = self.load(changes.database, changes.table)
        if table is None:
            with self._creating:
                table = self.load(changes.database, changes.table) or create_table(
                    self.catalog, changes.database, changes.table, schema, None)
        else:
            updates = schema_changes(table, schema, name)
            if updates:
                with table.update_schema() as update:
                    for change in updates:
                        change(update)
        self._checked[name] = table
        return IcebergTarget(changes.database, changes.table)

    def check_tables(self, tables: list[TableChanges]) -> list[IcebergTarget]:
        self.catalog  # opened once, before the threads share it
        with ThreadPoolExecutor(_TABLE_THREADS, thread_name_prefix="mysql-cdc iceberg check") as pool:
            return list(pool.map(self.check_table, tables))

    def segment(self, job: BatchJob, segment: RowSegment, expected: Checkpoint) -> "IcebergSegmentWriter":
        return IcebergSegmentWriter(self, job, segment, expected)

    def commit_rows(self, staged: _Staged, commit_id: CommitId) -> int:
        """One table's snapshot of its net rows (none when it holds them already); returns the table's
        snapshot id after it."""
        changes = staged.changes
        table = self._checked.pop(changes.qualified_name, None) or self.load(changes.database, changes.table)
        change = TableCommit(table, commit_id)
        if change.done:
            return table.current_snapshot().snapshot_id
        name_in_table = spelling(table)
        if staged.versions is not None:
            change.apply_history(history.SegmentVersions(
                *(t.rename_columns([name_in_table(n) for n in t.column_names])
                  for t in (staged.versions.closing, staged.versions.added))),
                [name_in_table(k) for k in changes.key_columns])
        elif changes.key_columns:
            net = staged.net.rename_columns([name_in_table(n) for n in staged.net.column_names])
            change.upsert(net, [name_in_table(k) for k in changes.key_columns],
                          keep_deleted=self.keeps_deleted(changes.database, changes.table))
        else:
            net = staged.net.rename_columns([name_in_table(n) for n in staged.net.column_names])
            change.rewrite_multiset(net, [name_in_table(c.name) for c in changes.columns])
        if change.commit() is None:
            # nothing to write (a keyless table's inserts and deletes cancelled out): the table still
            # records the position, and its snapshot the columns the batch gave it
            return mark(table, commit_id).current_snapshot().snapshot_id
        return change.table.current_snapshot().snapshot_id

    # -- DDL --------------------------------------------------------------------------------------

    def replay_ddl(self, batch: ChangeBatch, segment: DdlSegment, checkpoint: Checkpoint) -> Checkpoint:
        cut = self.expect(checkpoint)
        changes = ddl.replay(self, segment, cut, CommitId(self.app_id(batch), segment.end))
        crash_point("before_checkpoint")
        done = Checkpoint(batch.pipeline, segment.end, segment.gtid or checkpoint.gtid, batch.batch_id,
                          gtid_set=segment.gtid_set, leader_id=batch.leader_id)
        self.move(checkpoint, done, changes)
        return done

    # -- copies -----------------------------------------------------------------------------------

    def replace_table(self, job: BatchJob, copy: TableCopy, checkpoint: Checkpoint, done: Checkpoint | None,
                      report: TableReport) -> None:
        segment = copy.segment
        name = f"{segment.database}.{segment.table}"
        self.expect(checkpoint)
        started = time.monotonic()
        frame, (report.inserted, report.updated, report.deleted) = copy.rows()
        schema = self.schema(segment.database, segment.table, segment.columns, segment.key_columns)
        rows = (to_iceberg(frame.toArrow(), segment.columns, name) if frame is not None
                else iceberg_schema(segment.columns, name).empty_table())
        report.stage_seconds = time.monotonic() - started
        applied = time.monotonic()
        # The copy's commit id is the batch's own: a retry of this batch skips it, but a later copy
        # (a resnapshot repairing drift) is applied even at the same leader position.
        commit_id = CommitId(f"{self.app_id(job.batch)}/copy/{job.batch.batch_id}", segment.at)
        keep = self.keeps_deleted(segment.database, segment.table)
        kept = self.keeps_history(segment.database, segment.table)
        snapshot = ddl.replace_rows(self, segment.database, segment.table, schema, rows, commit_id,
                                    segment.key_columns if keep else None, segment.key_columns if kept else None)
        report.rows_written = rows.num_rows
        report.apply_seconds = time.monotonic() - applied
        crash_point("before_checkpoint")
        position = TablePosition(segment.database, segment.table, segment.at, job.batch.batch_id, DONE)
        self.move(checkpoint, done, {name: snapshot}, (position,))


def _moved(expected: Checkpoint, current: Checkpoint | None) -> CheckpointError:
    where = current.position if current is not None else "nowhere"
    return CheckpointError(
        f"the checkpoint of pipeline {expected.pipeline!r} moved from {expected.position} to {where} during this "
        "merge (another merge of the pipeline?); the retry applies what is left")


class IcebergSegmentWriter(SegmentWriter[IcebergTarget]):
    """One row segment into the catalog: each table's net rows staged in Arrow, then each table
    committed (a snapshot carrying the segment's end position), then the checkpoint and the cut."""

    def __init__(self, sink: IcebergSink, job: BatchJob, segment: RowSegment, expected: Checkpoint):
        super().__init__(job, segment, expected)
        self.sink = sink
        self._staged: dict[int, _Staged] = {}
        self._lock = threading.Lock()

    def apply(self, tables: list[NetRows[IcebergTarget]]) -> None:
        for t in tables:
            arrow = t.on_driver()
            # Spark's netting (a table of many change rows) is collected: the commit is the driver's
            net = arrow.net if arrow is not None else t.in_spark(self.job.spark()).net.toArrow()
            where = t.table.qualified_name
            rows = to_iceberg(net, t.table.columns, where)
            rows = rows.append_column(cr.NET_OP, net.column(cr.NET_OP)) \
                .append_column(cr.NET_COUNT, net.column(cr.NET_COUNT).cast(pa.int64()))
            if self.sink.keeps_deleted(t.table.database, t.table.table):
                rows = soft_deletes.with_marks(rows, self._deletion_marks(t), t.table.key_columns)
            staged = _Staged(t.table, rows, t.report.count(copies_per_op(net)))
            if self.sink.keeps_history(t.table.database, t.table.table):
                staged.versions = self._versions(t)
            with self._lock:
                self._staged[t.index] = staged

    def _versions(self, t: NetRows[IcebergTarget]) -> history.SegmentVersions:
        """A history table's versions of the segment (``history.segment_versions``) in Iceberg values:
        from its change rows on the driver, or, netted by Spark, collected (every change is a version
        to write, from here)."""
        changes = t.arrow_changes()
        columns, where = t.table.columns, t.table.qualified_name
        versions = history.segment_versions(changes, [c.name for c in columns], t.table.key_columns)
        keys = [c for c in columns if c.name in t.table.key_columns]

        def valued(rows: pa.Table, specs, rest: tuple[str, ...]) -> pa.Table:
            converted = to_iceberg(rows, specs, where)
            return pa.table([*converted.columns, *(rows.column(r) for r in rest)], names=[*converted.column_names, *rest])

        return history.SegmentVersions(valued(versions.closing, keys, (history.VALID_TO, history.VALID_TO_SEQ)),
                                       valued(versions.added, columns, history.COLUMNS))

    def _deletion_marks(self, t: NetRows[IcebergTarget]) -> pa.Table:
        """The table's deleting events' marks (``soft_deletes.deletion_marks``)."""
        return soft_deletes.deletion_marks(t.arrow_changes(without_inserts=True), t.table.key_columns)

    def commit(self, done: Checkpoint) -> dict[str, tuple[int, float]]:
        # refused before any table is written when the checkpoint is not where the segment starts
        self.sink.expect(self.expected)
        commit_id = CommitId(self.sink.app_id(self.job.batch), done.position)
        cut: dict[str, int | None] = {}
        applied: dict[str, tuple[int, float]] = {}

        def commit_one(staged: _Staged) -> None:
            name = staged.changes.qualified_name
            started = time.monotonic()
            try:
                cut[name] = self.sink.commit_rows(staged, commit_id)
            except Exception as exc:  # noqa: BLE001 - said again naming the table and the recovery
                raise TableCommitError.of(name, staged.written, exc) from exc
            applied[name] = (staged.written, time.monotonic() - started)
            crash_point("between_tables")

        with ThreadPoolExecutor(_TABLE_THREADS, thread_name_prefix="mysql-cdc iceberg commit") as pool:
            for future in [pool.submit(commit_one, self._staged[i]) for i in sorted(self._staged)]:
                future.result()  # the first table's failure, after every commit under way ended
        crash_point("before_checkpoint")
        self.sink.move(self.expected, done, cut)
        return applied

    def discard(self) -> None:
        with self._lock:
            self._staged = {}
        self.sink._checked.clear()
