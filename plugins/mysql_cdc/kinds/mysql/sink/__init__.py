"""A MySQL or MariaDB server as the follower.

How a batch lands (``Sink`` methods; the modules beside this one do the work):

- rows: the executors split each table's net rows per Spark partition (``staging``): removals
  into a staging table in the follower, final rows into a load file in the batch store; then the
  driver applies every table of the segment and moves the checkpoint in ONE follower transaction
  (``follower.Follower.apply_rows``, ``rows``), which LOADs the files straight into the tables.
  A small keyed table netted on the driver skips both: its net rows become a DELETE and an INSERT
  (``statements``), sent with other tables' in one round trip of that same transaction, which a
  sender thread begins while the segment's other tables are still being prepared (``stream``).
- DDL: replayed on the follower in its dialect (``dialect``), crash-safe through the checkpoint's
  pending-DDL marker.
- a copy: loaded by the executors in parallel into a shadow table beside the target, which the
  driver renames into its place, crash-safe through the table position's ``swapping`` state (a
  table a rename would break, with triggers or foreign keys, is loaded in the commit's own
  transaction instead).

The pipeline's state is the ``_mysql_cdc`` schema of this same server (``mysql_cdc.kinds.mysql.state``),
so the checkpoint moves in the transaction that writes the rows.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import partial
from typing import Any, Mapping

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ....merge.reader import snapshot_schema
from ....merge.report import TableReport
from ....contracts import SWAPPING, ChangeBatch, Checkpoint, DdlSegment, RowSegment, SnapshotSegment
from ....crash_points import crash_point
from ....mysql_server import MySQLSettings
from ....merge.spark_read import spark_schema, unit_indexes
from ....merge.sink import BatchJob, NetTable, Sink, TableCopy
from .connection import connect
from .follower import Follower
from .staging import (
    PARTITION, RESULT_SCHEMA, StagePlan, prepare_partition, prepare_partitions, prepare_read_units, scratch_prefix,
    scratch_segment_prefix, staging_prefix, staging_segment_prefix, staging_table_prefix,
)
from .statements import TableStatements, tables_statements, takes_statements
from .stream import StatementSender
from .tables import FollowerColumn, StagedTable

log = logging.getLogger("mysql_cdc.merge")

_DRIVER_PART_ROWS = 100_000  # net rows a slice of a table netted on the driver gets at least


def stage(net: DataFrame, plan: StagePlan) -> list[dict]:
    """Prepare net rows for the follower transaction from the executors, in parallel: each
    partition's removals into a staging table, its final rows into a load file (or into
    ``plan.load_into``); returns one result per non-empty partition."""
    tagged = net.withColumn(PARTITION, F.spark_partition_id())
    results = tagged.mapInArrow(partial(prepare_partitions, plan), spark_schema(RESULT_SCHEMA)).collect()
    return [r.asDict() for r in results]


def _counts_row(net: pa.Table, statements: TableStatements) -> dict:
    """The stage result (``RESULT_SCHEMA``) of a table applied by statements: its counts only. (Its
    INSERT takes the ``I`` and ``U`` rows, its DELETE the keys of the ``U`` and ``D`` rows.)"""
    upserts = statements.inserts_expected + statements.deletes_expected - net.num_rows
    return dict(stage=None, load_file=None, load_columns=None, rows=net.num_rows,
                inserts=statements.inserts_expected - upserts, upserts=upserts,
                deletes=statements.deletes_expected - upserts, loaded=0)


def counts(staged: StagedTable) -> tuple[int, int, int]:
    """Rows inserted, updated and deleted by applying a staged table."""
    return staged.total("inserts"), staged.total("upserts"), staged.total("deletes")


class ThreadSessions:
    """A follower session per thread that prepares net rows on the driver, opened on first use:
    connecting (TLS, authentication) takes tens of milliseconds, more than a small table's whole
    prepare, so a batch of a thousand small tables must not open one per table. Closed after
    each segment (``close``)."""

    def __init__(self, settings: MySQLSettings):
        self.settings = settings
        self._local = threading.local()
        self._opened: list = []
        self._lock = threading.Lock()

    def get(self):
        conn = getattr(self._local, "conn", None)
        if conn is None or not conn.open:
            conn = self._local.conn = connect(self.settings, local_infile=True)
            with self._lock:
                self._opened.append(conn)
        return conn

    def close(self) -> None:
        with self._lock:
            opened, self._opened = self._opened, []
        self._local = threading.local()
        for conn in opened:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - a session already gone needs no closing
                pass


class MySQLSink(Sink):
    def __init__(self, settings: MySQLSettings, leader_flavor: str | None = None):
        self.settings = settings
        self.follower = Follower(settings, leader_flavor)
        self.sessions = ThreadSessions(settings)
        # the running segment's statement sender (``stream``), if one of its tables started it
        self._sending: StatementSender | None = None
        self._sending_lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any], leader_flavor: str | None) -> "MySQLSink":
        return cls(MySQLSettings(**settings), leader_flavor)

    def close(self) -> None:
        self._abandon_statements()
        self.sessions.close()
        self.follower.close()

    # -- state ------------------------------------------------------------------------------------

    def begin(self, job: BatchJob) -> None:
        self.follower.drop_staging(staging_prefix(job.batch.pipeline))
        job.store.delete_prefix(scratch_prefix(job.batch.pipeline))

    def advance(self, expected: Checkpoint, done: Checkpoint) -> None:
        self.follower.advance(expected, done)

    # -- rows -------------------------------------------------------------------------------------

    def check_table(self, changes) -> tuple[FollowerColumn, ...]:
        return self.follower.check_table(changes)

    def check_tables(self, tables) -> list[tuple[FollowerColumn, ...]]:
        return self.follower.check_tables(tables)

    def _plan(self, job: BatchJob, segment: RowSegment | SnapshotSegment, index: int, table,
              columns: tuple[FollowerColumn, ...]) -> StagePlan:
        # (batch column, follower column) pairs; a keyed table's deletes need only its key, a keyless
        # row is named by all its values. Batch names address the Arrow data, follower columns give
        # the staging DDL (names compare case-insensitively in MySQL).
        pairs = list(zip(table.columns, columns))
        keys = {k.lower() for k in table.key_columns}
        removal = [p for p in pairs if p[0].name.lower() in keys] if keys else pairs
        return StagePlan(
            follower=self.settings,
            storage=job.storage,
            table_prefix=staging_table_prefix(job.batch.pipeline, segment.index, index),
            scratch_dir=f"{scratch_segment_prefix(job.batch.pipeline, segment.index)}{index:03d}",
            keyed=bool(keys),
            columns=tuple(c.name for c in table.columns),
            mysql_types=tuple(c.mysql_type for c in table.columns),
            insert_columns=tuple(c.name for c, f in pairs if not f.generated),
            removal_columns=tuple(c.name for c, _ in removal),
            removal_ddl=tuple(f.staging_ddl() for _, f in removal),
        )

    def stage_rows(self, job: BatchJob, segment: RowSegment, index: int, target: tuple[FollowerColumn, ...],
                   changes: DataFrame, net: DataFrame, report: TableReport) -> StagedTable:
        table = segment.tables[index]
        staged = StagedTable(table, target, tuple(stage(net, self._plan(job, segment, index, table, target))))
        report.inserted, report.updated, report.deleted = counts(staged)
        return staged

    def takes_driver_rows(self, table) -> bool:
        return True  # whatever the job's limit: its rows are prepared right where they are

    def stage_net_tables(self, job: BatchJob, segment: RowSegment, tables: list[NetTable]) -> list[StagedTable]:
        # Small keyed tables: a DELETE and an INSERT each, made for all of them in one pass
        # (``statements.tables_statements``) and handed to the segment's sender right away
        # (``stream``); the commit only waits for it. The others are prepared as tasks would.
        small = [t for t in tables if takes_statements(segment.tables[t.index], t.target, t.net.num_rows)]
        made = dict(zip((t.index for t in small),
                        tables_statements([(segment.tables[t.index], t.target, t.net) for t in small])))
        staged = []
        for t in tables:
            statements = made.get(t.index)
            if statements is not None and statements.size <= self.follower.statement_bytes:
                staged.append(self._statement_table(job, segment.tables[t.index], t, statements))
            else:
                staged.append(self._load_table(job, segment, t))
        return staged

    def _statement_table(self, job: BatchJob, table, net_table: NetTable, statements: TableStatements) -> StagedTable:
        net = net_table.net
        staged = StagedTable(table, net_table.target, (_counts_row(net, statements),) if net.num_rows else (),
                             statements)
        net_table.report.inserted, net_table.report.updated, net_table.report.deleted = counts(staged)
        if staged.stages:
            self._sender(job).put(staged)
        return staged

    def _load_table(self, job: BatchJob, segment: RowSegment, net_table: NetTable) -> StagedTable:
        """A table's net rows prepared in this process as tasks would: a small table in this thread,
        with its kept follower session; a large one in slices of at least _DRIVER_PART_ROWS at once
        (encoding is Arrow compute and file writes, outside the GIL), each slice with a session of
        its own."""
        table, net = segment.tables[net_table.index], net_table.net
        plan = self._plan(job, segment, net_table.index, table, net_table.target)
        parts = max(1, min(os.cpu_count() or 1, net.num_rows // _DRIVER_PART_ROWS))
        if parts == 1:
            results = [prepare_partition(plan, 0, net.to_batches(), self.sessions.get(), job.store)]
        else:
            size = -(-net.num_rows // parts)
            with ThreadPoolExecutor(max_workers=parts) as pool:
                results = list(pool.map(
                    lambda part: prepare_partition(plan, part, net.slice(part * size, size).to_batches(), store=job.store),
                    range(parts)))
        staged = StagedTable(table, net_table.target, tuple(r for r in results if r["rows"]))
        net_table.report.inserted, net_table.report.updated, net_table.report.deleted = counts(staged)
        return staged

    def _sender(self, job: BatchJob) -> StatementSender:
        """The segment's statement sender (``stream``), started by its first statement table."""
        with self._sending_lock:
            if self._sending is None:
                self._sending = StatementSender(self.follower, job.batch.pipeline, self.follower.statement_bytes)
            return self._sending

    def _stop_sending(self) -> StatementSender | None:
        with self._sending_lock:
            sender, self._sending = self._sending, None
        return sender

    def commit_rows(self, job: BatchJob, expected: Checkpoint, staged: list[StagedTable],
                    done: Checkpoint) -> dict[str, tuple[int, float]]:
        return self.follower.apply_rows(expected, [s for s in staged if s.stages], job.store, done,
                                        self._stop_sending())

    def _abandon_statements(self) -> None:
        """Roll back what a sender sent for a segment that failed before its commit (before this
        session runs anything else: a DDL statement would commit it)."""
        sender = self._stop_sending()
        if sender is not None:
            try:
                sender.finish()
            except Exception:  # noqa: BLE001 - the segment failed already; its own error is reported
                pass
            self.follower.rollback()

    def discard_segment(self, job: BatchJob, segment: RowSegment | SnapshotSegment) -> None:
        self._abandon_statements()
        self.sessions.close()
        self.follower.drop_staging(staging_segment_prefix(job.batch.pipeline, segment.index))
        job.store.delete_prefix(scratch_segment_prefix(job.batch.pipeline, segment.index))

    # -- DDL --------------------------------------------------------------------------------------

    def replay_ddl(self, batch: ChangeBatch, segment: DdlSegment, checkpoint: Checkpoint) -> Checkpoint:
        return self.follower.replay_ddl(batch, segment, checkpoint)

    # -- copies -----------------------------------------------------------------------------------

    def _swap_started(self, job: BatchJob, segment: SnapshotSegment) -> bool:
        """Whether an earlier attempt had this copy complete in its shadow table and began to swap
        it in (then crashed): the retry only finishes the swap."""
        position = self.follower.table_positions(job.batch.pipeline).of(segment.database, segment.table)
        return (position is not None and position.state == SWAPPING and position.batch_id == job.batch.batch_id
                and position.position == segment.at)

    def replace_table(self, job: BatchJob, copy: TableCopy, checkpoint: Checkpoint, done: Checkpoint | None,
                      report: TableReport) -> None:
        segment = copy.segment
        if self._swap_started(job, segment):
            log.info("%s: finishing the swap of its copy that a crash interrupted", segment.qualified_name)
            self.follower.finish_swap(checkpoint, segment, job.batch.batch_id, done)
            return
        columns = self.follower.prepare_snapshot_table(segment)
        refused = self.follower.swap_refused(segment.database, segment.table)
        if refused:
            log.info("%s: the copy is loaded in one stream inside the commit's transaction, not through a shadow "
                     "table: %s", segment.qualified_name, refused)
        try:
            self._load_copy(job, copy, checkpoint, columns, done, report, shadow=not refused)
        finally:
            self.discard_segment(job, segment)

    def _load_files(self, job: BatchJob, segment: SnapshotSegment, plan: StagePlan) -> list[dict]:
        """A copy with no catch-up (nothing changed in the table during it) goes from its Parquet
        files into ``plan.load_into`` in the tasks that read them: no transform, so no row needs to
        cross into Spark's JVM and back. Returns one stage result per task."""
        table = segment.as_table_changes()
        units, indexes = unit_indexes(job.spark(), table)
        if not units:
            return []
        load = partial(prepare_read_units, plan, job.storage, job.batch.prefix, snapshot_schema(table), units)
        return [r.asDict() for r in indexes.mapInArrow(load, spark_schema(RESULT_SCHEMA)).collect()]

    def _load_copy(self, job: BatchJob, copy: TableCopy, checkpoint: Checkpoint, columns: tuple[FollowerColumn, ...],
                   done: Checkpoint | None, report: TableReport, shadow: bool) -> None:
        """Stage the caught-up copy and apply it. Through a shadow table (``shadow``), the Spark
        tasks load their partitions into it in parallel and the driver swaps it in; otherwise the
        driver loads the load files in the transaction that records the table's position."""
        started = time.monotonic()
        segment = copy.segment
        table = segment.as_table_changes()
        plan = self._plan(job, segment, 0, table, columns)
        if shadow:
            plan = replace(plan, load_into=self.follower.create_shadow(segment))
        swapping = False  # once True, a shadow left behind may be the copy a retry swaps in
        try:
            if shadow and not copy.caught_up:
                staged = StagedTable(table, columns, tuple(self._load_files(job, segment, plan)))
            else:
                rows, (report.inserted, report.updated, report.deleted) = copy.rows()
                staged = StagedTable(table, columns, tuple(stage(rows, plan)) if rows is not None else ())
            crash_point("after_staging")
            report.stage_seconds = time.monotonic() - started
            applied = time.monotonic()
            # without a catch-up the load must hold exactly the rows copied; with one, what was staged
            if shadow:
                expected = staged.total("loaded") if copy.caught_up else segment.row_count
                swapping = True
                report.rows_written = self.follower.swap_in(checkpoint, segment, job.batch.batch_id, done, expected)
            else:
                report.rows_written = self.follower.apply_snapshot(
                    checkpoint, segment, staged, job.store, job.batch.batch_id, done,
                    None if copy.caught_up else segment.row_count)
            report.apply_seconds = time.monotonic() - applied
        except BaseException:
            if shadow and not swapping:
                try:
                    self.follower.drop_shadow(segment)
                except Exception:  # noqa: BLE001 - the retry drops it; keep the real error
                    log.warning("could not drop the shadow table of %s", segment.qualified_name, exc_info=True)
            raise
