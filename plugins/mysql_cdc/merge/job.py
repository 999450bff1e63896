"""The merge job's steps: apply one change batch to the follower, exactly once, through its sink.

Per segment of the batch, in binlog order, through ``SEGMENT_APPLIERS`` (dispatch by the
manifest's segment kind, so a new kind of segment is a new function, not a branch):

- ``rows``: for each table, executors read its Parquet files (``read.read_changes``), keep the
  rows after the checkpoint and net them (``transforms``); the sink prepares them (tables of a
  segment concurrently), then applies all tables of the segment and moves the checkpoint in one
  commit (``Sink.segment``: a ``SegmentWriter``). A table of up to ``driver_rows`` change rows
  (``merge.netting.DRIVER_NET_ROWS``: 1M) is read and netted right here on the driver: no Spark
  job reads and nets it; their stages cost more than such a table's rows. Such tables go to the
  writer in groups (``driver_groups``): what a sink does per column, it then does once per group.
- ``ddl``: replayed by the sink, exactly once.
- row segments with only DDL on other tables between them: one commit (``merge.joined``), for a
  sink that can replay such DDL ahead of the rows before it.
- ``snapshot``: one table's copy, its chunks caught up to one position (``transforms``), put in
  the table's place by the sink, which records the table's position.

What is the same for every follower kind lives here; what a kind does with it is its sink's
(``mysql_cdc.merge.sink``). ``run_merge`` is the in-process entry point; ``spark_jobs/merge_batch.py``
only wires it.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Protocol, Union

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from . import netting
from .joined import JoinedRows, join_segments
from .reader import change_schema
from .report import MergeSummary, TableReport, segment_lines
from ..contracts import (
    BinlogPosition, ChangeBatch, Checkpoint, DdlSegment, RowSegment, Segment, SnapshotSegment, TableChanges,
    TablePositions, checkpoint_after_copies, plan_replay, require_checkpoint, table_position,
    table_position_at,
)
from ..contracts import change_row as cr
from ..retry_policy import describe, server_error_code
from ..crash_points import crash_point
from .sink import ArrowRows, BatchJob, NetRows, SegmentWriter, Sink, SparkRows, TableCopy
from ..state_store import StateStore
from ..storage import StorageSpec, read_manifest
from ..text import plural
from .spark_read import read_changes, read_snapshot_rows
from .transforms import after_checkpoint, after_copies, fold_catch_up, net_changes

log = logging.getLogger("mysql_cdc.merge")

SparkProvider = Union[SparkSession, Callable[[], SparkSession]]
_STAGING_THREADS = 4  # tables staged through Spark at once
_DRIVER_THREADS = 2  # large tables netted on the driver at once
# Tables netted on the driver are prepared in groups: a sink makes what it can for a whole group in
# one pass (a thousand tables of a hundred rows: Arrow kernels cost tens of microseconds however few
# their rows, and one call per column of a group costs what one per column of each table would not)
DRIVER_GROUP_TABLES = 64
DRIVER_GROUP_ROWS = 50_000


@dataclass
class _Context:
    job: BatchJob
    sink: Sink
    summary: MergeSummary
    positions: TablePositions
    driver_rows: int  # tables with at most this many change rows are netted on the driver
    ahead: "_NetAhead | None" = None

    def on_driver(self, table) -> bool:
        """Whether a table's rows are netted on the driver (``merge.netting``), not by Spark."""
        return table.row_count <= self.driver_rows

    def alone_on_driver(self, table) -> bool:
        """Whether a table is netted on the driver in a group of its own (``driver_groups``)."""
        return self.on_driver(table) and table.row_count > DRIVER_GROUP_ROWS

    @property
    def batch(self) -> ChangeBatch:
        return self.job.batch


# -- row segments ---------------------------------------------------------------------------------


@dataclass
class _SegmentStaging:
    """What staging one row segment's tables shares: its writer, its tables' targets
    (``Sink.check_tables``), the checkpoint it starts from and the tables' reports."""

    ctx: _Context
    writer: SegmentWriter
    checkpoint: Checkpoint
    targets: dict[int, Any]
    reports: dict[int, TableReport]

    @property
    def segment(self) -> RowSegment:
        return self.writer.segment

    def net_rows(self, i: int, rows: ArrowRows | SparkRows) -> NetRows:
        return NetRows(i, self.segment.tables[i], self.targets[i], rows, self.reports[i])

    def position(self, table: TableChanges) -> BinlogPosition:
        # a table copied by a snapshot after the checkpoint has its changes up to the copy already
        return table_position(self.checkpoint, self.ctx.positions, table.database, table.table)


def _net_item(ctx: _Context, checkpoint: Checkpoint, table: TableChanges) -> netting.NetItem:
    """What netting ``table`` on the driver needs: the schema its change rows are read as, the
    table, and the follower's position for it (as ``_SegmentStaging.position`` gives it)."""
    return (change_schema(table, ctx.sink.change_metadata(table)), table,
            table_position(checkpoint, ctx.positions, table.database, table.table))


def _stage_through_spark(st: _SegmentStaging, i: int) -> None:
    """A table read and netted by Spark, staged by the writer (one per call: their jobs run
    concurrently)."""
    started = time.monotonic()
    ctx, table = st.ctx, st.segment.tables[i]
    changes = read_changes(ctx.job.spark(), ctx.job.storage, ctx.batch.prefix, table, ctx.sink.change_metadata(table))
    changes = after_checkpoint(changes, st.position(table))
    st.writer.apply([st.net_rows(i, SparkRows(changes, net_changes(changes, table)))])
    st.reports[i].stage_seconds = time.monotonic() - started


def _stage_driver_tables(st: _SegmentStaging, indexes: list[int],
                         netted_ahead: Callable[[], list[netting.Netted]] | None = None) -> None:
    """Tables read and netted here on the driver (``merge.netting``), then staged by the writer in
    one pass. ``netted_ahead``: the group's netting, done ahead (``_GroupsAhead``)."""
    started = time.monotonic()
    ctx, tables = st.ctx, [st.segment.tables[i] for i in indexes]
    if netted_ahead is not None:
        netted = netted_ahead()
    else:
        items = [_net_item(ctx, st.checkpoint, t) for t in tables]
        ahead = ctx.ahead.take(st.segment, indexes[0], items[0][2]) if ctx.ahead and len(indexes) == 1 else None
        netted = [ahead] if ahead is not None else netting.read_and_net(ctx.job.store, ctx.batch.prefix, items)
    st.writer.apply([st.net_rows(i, ArrowRows(changes, net)) for i, (changes, net) in zip(indexes, netted)])
    share = (time.monotonic() - started) / len(indexes)  # tables prepared together: each its share
    for i in indexes:
        st.reports[i].stage_seconds = share


class _GroupsAhead:
    """The groups of small tables of one row segment (``driver_groups``), read and netted
    (``netting.read_and_net``) in a thread of their own, up to ``GROUPS_AHEAD`` groups ahead of
    the one the writer prepares; the first ones from before the follower is asked for the
    segment's tables (``Sink.check_tables``), which they do not need.

    Reading and netting do not touch the follower, and each group's result only waits for its
    turn: a table the check refuses stops the segment before the writer is given anything. What
    it gains: the follower's time to answer the check (a thousand tables: 60-80 ms), a pack's
    request on S3 (tens of milliseconds of waiting, 16 of them for a thousand small tables), and
    the compiled reader's decoding outside the GIL, each beside the preparation of other groups.
    ``GROUPS_AHEAD`` + 1 groups' change rows and net rows in memory at most."""

    GROUPS_AHEAD = 2

    def __init__(self, ctx: _Context, segment: RowSegment, checkpoint: Checkpoint, groups: list[list[int]]):
        self._ctx, self._segment, self._checkpoint = ctx, segment, checkpoint
        self.groups = groups
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="mysql-cdc net-groups-ahead")
        self._requested: dict[int, Future] = {}
        for k in range(self.GROUPS_AHEAD):
            self._request(k)

    def taker(self, k: int) -> Callable[[], list[netting.Netted]]:
        """What group ``k``'s preparation calls for its netted tables (groups are prepared in order)."""
        return lambda: self._take(k)

    def _take(self, k: int) -> list[netting.Netted]:
        self._request(k + self.GROUPS_AHEAD)
        return self._request(k).result()

    def _request(self, k: int) -> Future | None:
        if k < len(self.groups) and k not in self._requested:
            self._requested[k] = self._pool.submit(self._net, self.groups[k])
        return self._requested.get(k)

    def _net(self, group: list[int]) -> list[netting.Netted]:
        ctx = self._ctx
        items = [_net_item(ctx, self._checkpoint, self._segment.tables[i]) for i in group]
        return netting.read_and_net(ctx.job.store, ctx.batch.prefix, items)

    def __enter__(self) -> "_GroupsAhead":
        return self

    def __exit__(self, *exc) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def _read_and_net_tables(store, batch_prefix: str, items: list[netting.NetItem]) -> list[netting.Netted]:
    """``netting.read_and_net`` with each net table made too (``netting.net_table``): a large table
    netted ahead is staged from its net table by every sink, so its take belongs in the thread
    that works ahead, not in the one that waits for it."""
    return [(changes, netting.net_table(net)) for changes, net in netting.read_and_net(store, batch_prefix, items)]


class _NetAhead:
    """The driver's netting (``netting.read_and_net``) of the next row segment's large tables (those
    netted in a group of their own), started in a thread while what comes before the segment is
    applied: a DDL statement's replay and the sink's start mostly wait on the follower, where
    reading and netting a large table is mostly Arrow and numpy work outside the GIL (a batch of a
    CREATE TABLE and 1M changes into an Iceberg follower, runs alternating with and without it:
    20-60 ms less of 0.3-0.4 s). One segment ahead: its net rows are what its staging holds anyway.

    A table is netted ahead from the segment's start (or its copy's position, if later); its
    staging takes the result only when it would net from the same position."""

    def __init__(self, ctx: _Context):
        self._ctx = ctx
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="mysql-cdc net-ahead")
        self._netting: dict[tuple[int, int], tuple[BinlogPosition, Future]] = {}  # (segment, table) ->

    def start(self, segment: RowSegment | None) -> None:
        ctx = self._ctx
        if segment is None:
            return
        for i, table in enumerate(segment.tables):
            if (segment.index, i) in self._netting:
                continue
            position = table_position_at(segment.start, ctx.positions, table.database, table.table)
            if table.files and ctx.alone_on_driver(table) and position < segment.end:
                item = (change_schema(table, ctx.sink.change_metadata(table)), table, position)
                future = self._pool.submit(_read_and_net_tables, ctx.job.store, ctx.batch.prefix, [item])
                self._netting[(segment.index, i)] = (position, future)

    def take(self, segment: RowSegment, i: int, position: BinlogPosition) -> netting.Netted | None:
        """Table ``i`` of ``segment`` netted from ``position``, if it was netted ahead from there
        (its failure is raised here, as the netting's own would be)."""
        netted_from, future = self._netting.pop((segment.index, i), (None, None))
        if future is None or netted_from != position:
            return None
        return future.result()[0]

    def __enter__(self) -> "_NetAhead":
        return self

    def __exit__(self, *exc) -> None:
        self._netting.clear()
        self._pool.shutdown(wait=True, cancel_futures=True)


def _rows_of(item) -> RowSegment | None:
    """The row segment an item of the merge's plan commits, if any."""
    return item if isinstance(item, RowSegment) else item.rows if isinstance(item, JoinedRows) else None


def _ahead_of(items: list, k: int) -> RowSegment | None:
    """The row segment netted ahead (``_NetAhead``) while item ``k`` of the merge's plan is applied
    (-1: while the sink starts, before the first item): joined rows' own, as their DDL replays
    first; else the next item's, unless item ``k`` stages rows itself (its staging uses every core)."""
    if k >= 0 and isinstance(items[k], JoinedRows):
        return items[k].rows
    if k >= 0 and _rows_of(items[k]) is not None:
        return None
    return _rows_of(items[k + 1]) if k + 1 < len(items) else None


def driver_groups(tables: list, indexes: list[int]) -> list[list[int]]:
    """The tables ``indexes`` in groups prepared in one pass each: up to ``DRIVER_GROUP_TABLES``
    tables of up to ``DRIVER_GROUP_ROWS`` change rows together (a larger table is a group alone)."""
    groups: list[list[int]] = []
    rows = 0
    for i in indexes:
        if not groups or len(groups[-1]) >= DRIVER_GROUP_TABLES or rows + tables[i].row_count > DRIVER_GROUP_ROWS:
            groups.append([])
            rows = 0
        groups[-1].append(i)
        rows += tables[i].row_count
    return groups


def _stage_tables(st: _SegmentStaging, with_files: list[int], groups: list[list[int]], ahead: _GroupsAhead) -> None:
    """Stage the tables (indexes of the segment's tables that have change rows) through the
    segment's writer, Spark's and the driver's at once: ``groups`` are those netted on the driver
    (``driver_groups``), ``ahead`` nets those of more than one table."""
    # The tables' Spark jobs run concurrently: a small table's job is mostly latency (task
    # scheduling, Python workers, follower round trips), which overlaps well. A large table
    # netted on the driver is mostly Arrow and numpy work outside the GIL: two at a time. A
    # group of small tables is Python under the GIL: one group at a time, as two only contend
    # (a thousand small tables: 3.4 s one group at a time, 3.4-4.2 s two at a time).
    on_driver = {i for group in groups for i in group}
    through_spark = [i for i in with_files if i not in on_driver]
    with ThreadPoolExecutor(_STAGING_THREADS) as spark_pool, ThreadPoolExecutor(_DRIVER_THREADS) as large_pool, \
            ThreadPoolExecutor(1) as small_pool:
        work = [small_pool.submit(_stage_driver_tables, st, group, ahead.taker(k)) for k, group in enumerate(ahead.groups)]
        work += [large_pool.submit(_stage_driver_tables, st, group) for group in groups if len(group) == 1]
        work += [spark_pool.submit(_stage_through_spark, st, i) for i in through_spark]
        for future in work:
            future.result()


def apply_row_segment(ctx: _Context, segment: RowSegment, checkpoint: Checkpoint) -> Checkpoint:
    """Stage every table of the segment, then apply them all and move the checkpoint to the
    segment's end in one commit."""
    # a table copied by a snapshot at or after the segment's end already holds all of its changes
    # here (the follower may not even have it: it was dropped before its copy's position)
    live = [i for i, t in enumerate(segment.tables)
            if table_position(checkpoint, ctx.positions, t.database, t.table) < segment.end]
    reports = {i: TableReport(segment.tables[i].qualified_name, segment.tables[i].row_count) for i in live}
    with_files = [i for i in live if segment.tables[i].files]
    groups = driver_groups(segment.tables, [i for i in with_files if ctx.on_driver(segment.tables[i])])
    with _GroupsAhead(ctx, segment, checkpoint, [group for group in groups if len(group) > 1]) as ahead:
        # every table is checked before anything is staged: a bad table leaves the follower untouched
        targets = dict(zip(live, ctx.sink.check_tables([segment.tables[i] for i in live])))
        with ctx.sink.segment(ctx.job, segment, checkpoint) as writer:
            if any(segment.tables[i].files and not ctx.on_driver(segment.tables[i]) for i in live):
                ctx.job.spark()  # start Spark (if this is its first use) before the threads below share it
            _stage_tables(_SegmentStaging(ctx, writer, checkpoint, targets, reports), with_files, groups, ahead)
            crash_point("after_staging")
            done = Checkpoint(
                ctx.batch.pipeline, segment.end,
                # a segment's last GTID is only known when it ends the batch
                ctx.batch.end_gtid if segment.end == ctx.batch.end else None,
                ctx.batch.batch_id, gtid_set=segment.gtid_set, leader_id=ctx.batch.leader_id,
            )
            started = time.monotonic()
            applied = writer.commit(done)
            # (tables whose rows were sent during staging count follower seconds spent before the commit)
            commit_seconds = max(0.0, time.monotonic() - started - sum(seconds for _, seconds in applied.values()))
    for report in reports.values():
        report.rows_written, report.apply_seconds = applied.get(report.table, (0, 0.0))
        ctx.summary.add(report)
    for line in segment_lines(list(reports.values())):
        log.info("%s", line)
    log.info("committed segment %d up to %s (lock, checkpoint, commit: %.2f s)", segment.index, segment.end,
             commit_seconds)
    return done


# -- DDL and snapshot segments --------------------------------------------------------------------


def apply_ddl_segment(ctx: _Context, segment: DdlSegment, checkpoint: Checkpoint) -> Checkpoint:
    log.info("replaying DDL at %s: %s", segment.start, segment.statement[:200])
    return ctx.sink.replay_ddl(ctx.batch, segment, checkpoint)


def caught_up_rows(ctx: _Context, segment: SnapshotSegment) -> tuple[DataFrame | None, tuple[int, int, int]]:
    """The rows to load for a copied table: its chunks with the changes each chunk lacks folded
    in (``fold_catch_up``), so what is loaded is the table at one position; and the catch-up's
    inserted, updated and deleted keys, for the report. None: nothing to load."""
    table = segment.as_table_changes()
    spark = ctx.job.spark()
    rows = read_snapshot_rows(spark, ctx.job.storage, ctx.batch.prefix, segment) if table.files else None
    changes = segment.catch_up
    if changes is None or not changes.files:
        return rows, (0, 0, 0)
    ctx.sink.check_table(changes)
    # the whole before-image: an update that moved a row between chunks is split into a delete of
    # its before-image and an insert (``after_copies``)
    changed = read_changes(spark, ctx.job.storage, ctx.batch.prefix, changes, frozenset({cr.BEFORE}))
    net = net_changes(after_copies(changed, segment.split_column, segment.chunks), changes)
    ops = {r[cr.NET_OP]: r["count"] for r in net.groupBy(cr.NET_OP).count().collect()}
    if rows is None:  # an empty copy: the catch-up alone
        rows = net.where(F.lit(False))
    return fold_catch_up(rows, net, segment.key_columns), (ops.get(cr.INSERT, 0), ops.get(cr.UPDATE, 0),
                                                           ops.get(cr.DELETE, 0))


def _snapshot_done(ctx: _Context, segment: SnapshotSegment, checkpoint: Checkpoint) -> Checkpoint | None:
    """The pipeline's checkpoint once this copy is applied, if it moves it: the copy of the last
    table of a full snapshot may (``contracts.checkpoint_after_copies``)."""
    if segment.index != len(ctx.batch.segments) - 1:
        return None
    after = checkpoint_after_copies(ctx.batch, checkpoint)
    return None if after is checkpoint else after


def apply_snapshot_segment(ctx: _Context, segment: SnapshotSegment, checkpoint: Checkpoint) -> Checkpoint:
    """Put one table's copy (its chunks caught up to one position) in the table's place and
    record the table's position. The copy of the last table of a full snapshot also moves the
    pipeline's position."""
    report = TableReport(segment.qualified_name, segment.row_count, kind="snapshot")
    done = _snapshot_done(ctx, segment, checkpoint)
    copy = TableCopy(segment, segment.catch_up is not None and bool(segment.catch_up.files),
                     lambda: caught_up_rows(ctx, segment), on_driver=ctx.driver_rows > 0)
    ctx.sink.replace_table(ctx.job, copy, checkpoint, done, report)
    log.info("%s (%s, at %s)", report.describe(), plural(len(segment.chunks), "chunk"), segment.at)
    ctx.summary.add(report)
    return done or checkpoint


def apply_joined_rows(ctx: _Context, joined: JoinedRows, checkpoint: Checkpoint) -> Checkpoint:
    """Row segments in one commit (``merge.joined``): the DDL between them, on other tables, replayed
    first, leaving the checkpoint where it is; then their rows, whose commit moves it past all."""
    for segment in joined.ddl_ahead:
        log.info("replaying DDL at %s ahead of the rows before it (on other tables): %s", segment.start,
                 segment.statement[:200])
        ctx.sink.replay_ddl_ahead(ctx.batch, segment, checkpoint)
        crash_point("after_ddl")
    log.info("segments %d-%d (%s) in one commit", joined.rows.index, joined.rows.index + joined.parts - 1,
             plural(len(joined.ddl_ahead), "DDL statement"))
    return apply_row_segment(ctx, joined.rows, checkpoint)


# segment kind (the manifest's "kind", or ``JoinedRows``) -> how it is applied; every kind the
# contract knows is here
SEGMENT_APPLIERS: dict[str, Callable[[_Context, Segment | JoinedRows, Checkpoint], Checkpoint]] = {
    "ddl": apply_ddl_segment,
    "rows": apply_row_segment,
    "snapshot": apply_snapshot_segment,
    "joined_rows": apply_joined_rows,
}


class FollowerSource(Protocol):
    def sink(self, leader_flavor: str | None) -> Sink:
        """The follower's sink for a batch of this server flavor (``kinds.FollowerSpec.sink``)."""

    def state_store(self) -> StateStore:
        """The follower's state (``kinds.FollowerSpec.state_store``): where the merge starts."""


class MergeInputs(Protocol):
    """What a merge is given besides the batch: the follower (``sink``) and the batch store
    (``storage``); the job's secrets file holds both (``job_secrets.JobSecrets``)."""

    sink: FollowerSource
    storage: StorageSpec


def run_merge(spark: SparkProvider, manifest_uri: str, secrets: MergeInputs,
              driver_rows: int = netting.DRIVER_NET_ROWS) -> MergeSummary:
    """Apply the batch at ``manifest_uri``; the in-process entry point (``main`` wraps it).
    ``spark`` may be a session or a function returning one: a batch that needs no Spark work
    (a no-op replay, DDL only, only small tables) then never starts it. ``driver_rows``: tables
    with at most this many change rows are netted on the driver (0: every table through Spark)."""
    started = time.monotonic()
    get_spark = (lambda: spark) if isinstance(spark, SparkSession) else spark
    store = secrets.storage.open()
    batch = read_manifest(store, manifest_uri)
    # where the follower stands is the state store's to say; the sink only writes, and every one of
    # its commits finds the checkpoint it expects or refuses (another merge moved it meanwhile)
    state = secrets.sink.state_store()
    checkpoint = require_checkpoint(state.checkpoint(batch.pipeline), batch.pipeline)
    positions = state.table_positions(batch.pipeline)
    with secrets.sink.sink(batch.server_flavor) as sink:
        plan = plan_replay(batch, checkpoint, positions)
        summary = MergeSummary(batch.pipeline, batch.batch_id, plan.noop, str(checkpoint.position))
        if plan.noop:
            log.info("batch %s ends at %s, at or before the checkpoint %s: nothing to do",
                     batch.batch_id, batch.end, checkpoint.position)
            sink.publish(batch.pipeline)
            return summary
        ctx = _Context(BatchJob(get_spark, secrets.storage, store, batch), sink, summary, positions, driver_rows)
        items = list(join_segments(plan.segments, sink.replays_ahead))
        with _NetAhead(ctx) as ctx.ahead:
            ctx.ahead.start(_ahead_of(items, -1))
            sink.begin(ctx.job)  # leftovers of a crashed attempt
            for k, segment in enumerate(items):
                ctx.ahead.start(_ahead_of(items, k))
                checkpoint = SEGMENT_APPLIERS[segment.kind](ctx, segment, checkpoint)
                summary.segments_applied += segment.parts if isinstance(segment, JoinedRows) else 1
        if plan.end is not None and checkpoint.position < plan.end.position:
            # the batch ends with transactions that touched no captured table
            sink.advance(checkpoint, plan.end)
            checkpoint = plan.end
        sink.publish(batch.pipeline)
    summary.checkpoint = str(checkpoint.position)
    summary.seconds = round(time.monotonic() - started, 3)
    log.info("batch %s applied: checkpoint now %s (%.1f s)", batch.batch_id, checkpoint.position, summary.seconds)
    return summary


def run_merges(spark: SparkProvider, manifest_uris: list[str], secrets: MergeInputs,
               summaries: list[MergeSummary], driver_rows: int = netting.DRIVER_NET_ROWS) -> None:
    """Apply the batches in order, in one Spark application, appending each one's summary to
    ``summaries`` as it is applied (so a failure still reports the batches applied before it):
    a copy's run gives the copy and its catch-up, so that the run ends with every table at one
    position. Each batch is its own exactly-once unit: a retry after
    a crash between them finds the copy applied (a no-op) and applies the catch-up."""
    for i, manifest_uri in enumerate(manifest_uris):
        if i:
            crash_point("between_batches")
        summary = run_merge(spark, manifest_uri, secrets, driver_rows)
        log.info("merge summary %s", summary.to_json())
        summaries.append(summary)


def one_line(exc: BaseException) -> str:
    """The error as one line. A failure inside an executor arrives wrapped in Spark's report
    with the worker's traceback; its last ``SomeError: message`` line is the real error."""
    if server_error_code(exc) is not None:  # a follower's refusal: its words and its number
        return describe(exc)
    text = str(exc).strip() or type(exc).__name__
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) > 1:
        raised = [line for line in lines if line.split(":", 1)[0].rsplit(".", 1)[-1].endswith(("Error", "Exception"))]
        text = raised[-1] if raised else lines[0]
    return text
