"""A MySQL or MariaDB server as the follower.

How a batch lands (``Sink`` methods and ``SegmentWriter``; the modules beside this one do the work):

- rows: the executors split each table's net rows per Spark partition (``staging``): removals
  into a staging table in the follower, final rows into a load file in the batch store (a table
  the driver stages itself keeps its files on the driver's disk, ``MySQLSink.load_dir``); then the
  driver applies every table of the segment and moves the checkpoint in ONE follower transaction
  (``follower.Follower.apply_rows``, ``rows``), which LOADs the files straight into the tables.
  A small keyed table netted on the driver skips both: its net rows become a DELETE and an INSERT
  (``statements``), sent with other tables' in one round trip of that same transaction, which a
  sender thread begins while the segment's other tables are still being prepared (``stream``).
- DDL: replayed on the follower in its dialect (``dialect``), crash-safe through the checkpoint's
  pending-DDL marker.
- a copy: loaded in parallel into a shadow table beside the target (by the driver's threads, a
  file at a time, or by the executors: ``TableCopy.on_driver``), which the driver renames into its place, crash-safe through the table position's ``swapping`` state (a
  table a rename would break, with triggers or foreign keys, is loaded in the commit's own
  transaction instead).

The pipeline's state is the ``_mysql_cdc`` schema of this same server (``mysql_cdc.server_state``),
so the checkpoint moves in the transaction that writes the rows.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any, Mapping

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ....merge.reader import read_plan, snapshot_schema
from ....merge.report import TableReport
from ....contracts import SWAPPING, ChangeBatch, Checkpoint, DdlSegment, RowSegment, SnapshotSegment, TableChanges
from ....crash_points import crash_point
from ....mysql_server import MySQLSettings
from ....merge.spark_read import spark_schema, unit_indexes
from ....merge.sink import BatchJob, NetRows, SegmentWriter, Sink, TableCopy
from .connection import connect, unwritable
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
_LOAD_DIR_PREFIX = "mysql-cdc-loads-"  # + the driver's pid: the load files of a table it staged itself


def sweep_load_dirs() -> None:
    """Remove the load-file directories that merge drivers of this user left on this machine when
    they were killed (no cleanup runs then): the rows in them belong to no attempt any more."""
    for directory in Path(tempfile.gettempdir()).glob(f"{_LOAD_DIR_PREFIX}*-*"):
        pid = directory.name[len(_LOAD_DIR_PREFIX):].split("-", 1)[0]
        try:
            status = directory.lstat()  # a symlink is not followed, nor removed
        except OSError:
            continue
        if pid.isdigit() and stat.S_ISDIR(status.st_mode) and status.st_uid == os.getuid() and not _alive(int(pid)):
            shutil.rmtree(directory, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def stage(net: DataFrame, plan: StagePlan) -> list[dict]:
    """Prepare net rows for the follower transaction from the executors, in parallel: each
    partition's removals into a staging table, its final rows into a load file (or into
    ``plan.load_into``); returns one result per non-empty partition."""
    tagged = net.withColumn(PARTITION, F.spark_partition_id())
    results = tagged.mapInArrow(partial(prepare_partitions, plan), spark_schema(RESULT_SCHEMA)).collect()
    return [r.asDict() for r in results]


def _counts_row(net_rows: int, statements: TableStatements) -> dict:
    """The stage result (``RESULT_SCHEMA``) of a table applied by statements: its counts only. (Its
    INSERT takes the ``I`` and ``U`` rows, its DELETE the keys of the ``U`` and ``D`` rows.)"""
    upserts = statements.inserts_expected + statements.deletes_expected - net_rows
    return dict(stage=None, load_file=None, load_path=None, load_columns=None, rows=net_rows,
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


Columns = tuple[FollowerColumn, ...]  # a table's target: the follower's columns for the batch's


class MySQLSink(Sink[Columns]):
    def __init__(self, settings: MySQLSettings, leader_flavor: str | None = None):
        self.settings = settings
        self.follower = Follower(settings, leader_flavor)
        self.sessions = ThreadSessions(settings)
        self._load_dir: Path | None = None  # the driver's own load files, a directory per segment
        self._load_dir_lock = threading.Lock()  # a segment's tables are staged by several threads

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any], leader_flavor: str | None) -> "MySQLSink":
        return cls(MySQLSettings(**settings), leader_flavor)

    def close(self) -> None:
        self.sessions.close()
        self.follower.close()
        if self._load_dir is not None:
            shutil.rmtree(self._load_dir, ignore_errors=True)

    def load_dir(self, segment: RowSegment | SnapshotSegment) -> Path:
        """Where the driver keeps the load files it prepares for ``segment`` until its commit (a
        directory of this job's; gone when the segment's writer closes, and with the sink; a killed
        driver's is removed by the next merge's ``begin`` on this machine, ``sweep_load_dirs``)."""
        with self._load_dir_lock:
            if self._load_dir is None:
                self._load_dir = Path(tempfile.mkdtemp(prefix=f"{_LOAD_DIR_PREFIX}{os.getpid()}-"))
            directory = self._load_dir / f"{segment.index:05d}"
            directory.mkdir(exist_ok=True)
            return directory

    def __exit__(self, kind, exc, traceback) -> None:
        self.close()
        # a read-only or full server refuses whichever statement came first: say so, once, naming it
        refusal = unwritable(self.settings, exc)
        if refusal is not None:
            raise refusal from exc

    # -- state ------------------------------------------------------------------------------------

    def begin(self, job: BatchJob) -> None:
        self.follower.drop_staging(staging_prefix(job.batch.pipeline))
        job.store.delete_prefix(scratch_prefix(job.batch.pipeline))
        sweep_load_dirs()

    def advance(self, expected: Checkpoint, done: Checkpoint) -> None:
        self.follower.advance(expected, done)

    # -- rows -------------------------------------------------------------------------------------

    def check_table(self, changes) -> Columns:
        return self.follower.check_table(changes)

    def check_tables(self, tables) -> list[Columns]:
        return self.follower.check_tables(tables)

    def _plan(self, job: BatchJob, segment: RowSegment | SnapshotSegment, index: int, table, columns: Columns
              ) -> StagePlan:
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

    def segment(self, job: BatchJob, segment: RowSegment, expected: Checkpoint) -> "MySQLSegmentWriter":
        return MySQLSegmentWriter(self, job, segment, expected)

    def _drop_prepared(self, job: BatchJob, segment: RowSegment | SnapshotSegment) -> None:
        """Drop a segment's staging tables and scratch files, and the sessions that made them."""
        self.sessions.close()
        self.follower.drop_staging(staging_segment_prefix(job.batch.pipeline, segment.index))
        job.store.delete_prefix(scratch_segment_prefix(job.batch.pipeline, segment.index))
        if self._load_dir is not None:
            shutil.rmtree(self._load_dir / f"{segment.index:05d}", ignore_errors=True)

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
            self._drop_prepared(job, segment)

    def _load_files(self, job: BatchJob, copy: TableCopy, plan: StagePlan) -> list[dict]:
        """A copy with no catch-up (nothing changed in the table during it) goes from its Parquet
        files into ``plan.load_into`` by whoever reads them, each read unit in one ``LOAD DATA``: no
        transform, so no row needs to cross into Spark's JVM and back. Returns one stage result per
        loader."""
        table = copy.segment.as_table_changes()
        schema = snapshot_schema(table)
        if copy.on_driver:
            return self._load_files_here(job, table, schema, plan)
        units, indexes = unit_indexes(job.spark(), table)
        if not units:
            return []
        load = partial(prepare_read_units, plan, job.storage, job.batch.prefix, schema, units)
        return [r.asDict() for r in indexes.mapInArrow(load, spark_schema(RESULT_SCHEMA)).collect()]

    @staticmethod
    def _load_files_here(job: BatchJob, table: TableChanges, schema: pa.Schema, plan: StagePlan) -> list[dict]:
        """The read units loaded by this process's threads, one more than its cores: while one
        thread reads and encodes its unit (Arrow and file writes, outside the GIL), the others'
        ``LOAD DATA`` run. It spares the Spark session and the executors' Python workers that the
        same loads through Spark wait for: a 5M-row copy took the job 6.9-7.0 s with three threads
        against 9.4-9.6 s through Spark on 2 cores; four threads slowed the follower (9.4 s)."""
        units = read_plan(table, os.cpu_count() or 1)

        def load(unit: int) -> list[dict]:
            indexes = iter([pa.record_batch([pa.array([unit])], ["id"])])
            results = prepare_read_units(plan, job.storage, job.batch.prefix, schema, units, indexes)
            return [row for batch in results for row in batch.to_pylist()]

        with ThreadPoolExecutor(max_workers=max(1, min(len(units), (os.cpu_count() or 1) + 1))) as pool:
            return [row for rows in pool.map(load, range(len(units))) for row in rows]

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
                staged = StagedTable(table, columns, tuple(self._load_files(job, copy, plan)))
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


class MySQLSegmentWriter(SegmentWriter[Columns]):
    """One row segment into the follower: each table's net rows staged (removals in a staging table,
    final rows in a load file, or a small keyed table's DELETE and INSERT statements, sent ahead by
    the segment's ``StatementSender``), then all tables and the checkpoint in one transaction
    (``Follower.apply_rows``)."""

    def __init__(self, sink: MySQLSink, job: BatchJob, segment: RowSegment, expected: Checkpoint):
        super().__init__(job, segment, expected)
        self.sink = sink
        self._staged: dict[int, StagedTable] = {}  # by the table's index in the segment
        self._sending: StatementSender | None = None  # started by the segment's first statement table
        self._lock = threading.Lock()

    def apply(self, tables: list[NetRows[Columns]]) -> None:
        on_driver = [t for t in tables if t.on_driver() is not None]
        staged = [self._stage_in_spark(t) for t in tables if t.on_driver() is None]
        if on_driver:
            staged += self._stage_on_driver(on_driver)
        with self._lock:
            self._staged.update(staged)

    def _stage_in_spark(self, t: NetRows[Columns]) -> tuple[int, StagedTable]:
        plan = self.sink._plan(self.job, self.segment, t.index, t.table, t.target)
        staged = StagedTable(t.table, t.target, tuple(stage(t.in_spark(self.job.spark()).net, plan)))
        t.report.inserted, t.report.updated, t.report.deleted = counts(staged)
        return t.index, staged

    def _stage_on_driver(self, tables: list[NetRows[Columns]]) -> list[tuple[int, StagedTable]]:
        # Small keyed tables: a DELETE and an INSERT each, made for all of them in one pass
        # (``statements.tables_statements``) and handed to the segment's sender right away
        # (``stream``); the commit only waits for it, and their net rows are taken as the netting
        # left them (``netting.PickedNet``: no net table made). The others are prepared as tasks would.
        small = [t for t in tables if takes_statements(t.table, t.target, t.on_driver().netted.num_rows)]
        made = dict(zip((t.index for t in small),
                        tables_statements([(t.table, t.target, t.on_driver().netted) for t in small])))
        staged = []
        for t in tables:
            statements = made.get(t.index)
            if statements is not None and statements.size <= self.sink.follower.statement_bytes:
                staged.append((t.index, self._statement_table(t, statements)))
            else:
                staged.append((t.index, self._load_table(t)))
        return staged

    def _statement_table(self, t: NetRows[Columns], statements: TableStatements) -> StagedTable:
        net_rows = t.on_driver().netted.num_rows
        staged = StagedTable(t.table, t.target, (_counts_row(net_rows, statements),) if net_rows else (), statements)
        t.report.inserted, t.report.updated, t.report.deleted = counts(staged)
        if staged.stages:
            self._sender().put(staged)
        return staged

    def _load_table(self, t: NetRows[Columns]) -> StagedTable:
        """A table's net rows prepared in this process as tasks would: a small table in this thread,
        with its kept follower session; a large one in slices of at least _DRIVER_PART_ROWS at once
        (encoding is Arrow compute and file writes, outside the GIL), each slice with a session of
        its own."""
        net, keep_in = t.on_driver().net, self.sink.load_dir(self.segment)
        plan = self.sink._plan(self.job, self.segment, t.index, t.table, t.target)
        parts = max(1, min(os.cpu_count() or 1, net.num_rows // _DRIVER_PART_ROWS))
        if parts == 1:
            results = [prepare_partition(plan, 0, net.to_batches(), self.sink.sessions.get(), keep_in)]
        else:
            size = -(-net.num_rows // parts)
            with ThreadPoolExecutor(max_workers=parts) as pool:
                results = list(pool.map(
                    lambda part: prepare_partition(plan, part, net.slice(part * size, size).to_batches(),
                                                   keep_in=keep_in),
                    range(parts)))
        staged = StagedTable(t.table, t.target, tuple(r for r in results if r["rows"]))
        t.report.inserted, t.report.updated, t.report.deleted = counts(staged)
        return staged

    def _sender(self) -> StatementSender:
        with self._lock:
            if self._sending is None:
                follower = self.sink.follower
                self._sending = StatementSender(follower, self.job.batch.pipeline, follower.statement_bytes)
            return self._sending

    def _stop_sending(self) -> StatementSender | None:
        with self._lock:
            sender, self._sending = self._sending, None
        return sender

    def commit(self, done: Checkpoint) -> dict[str, tuple[int, float]]:
        staged = [self._staged[i] for i in sorted(self._staged)]  # in the segment's order
        return self.sink.follower.apply_rows(self.expected, [s for s in staged if s.stages], self.job.store, done,
                                             self._stop_sending())

    def discard(self) -> None:
        # what a sender sent for a segment that failed before its commit is rolled back before this
        # session runs anything else (a DDL statement would commit it)
        sender = self._stop_sending()
        if sender is not None:
            try:
                sender.finish()
            except Exception:  # noqa: BLE001 - the segment failed already; its own error is reported
                pass
            self.sink.follower.rollback()
        self._staged.clear()
        self.sink._drop_prepared(self.job, self.segment)
