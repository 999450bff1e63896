"""The merge job's steps: apply one change batch to the follower, exactly once.

Per segment of the batch, in binlog order, through ``SEGMENT_APPLIERS`` (dispatch by the
manifest's segment kind, so a new kind of segment is a new function, not a branch):

- ``ddl``: replayed on the follower, crash-safe through the checkpoint's pending-DDL marker.
- ``rows``: for each table, executors read its Parquet files (``read_changes``), keep the rows
  after the checkpoint, net them (``transforms``) and prepare them in parallel (``stage``:
  removals into staging tables in the follower, final rows into load files); then the driver
  applies all tables of the segment and moves the checkpoint in ONE follower transaction
  (``mysql_cdc.apply.follower``), which LOADs the files straight into the tables.
- ``snapshot``: one table's copy, its chunks caught up to one position; the executors load it
  into a shadow table in parallel, and the driver renames it into the table's place and records
  the table's position, crash-safe through the position's ``swapping`` state.

``run_merge`` is the in-process entry point; ``spark_jobs/merge_batch.py`` only wires it.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import partial
from typing import Callable, Union

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ..failures import describe, server_error_code
from ..faults import crash_point
from ..contracts import change_row as cr
from ..apply.follower import Follower, FollowerColumn, StagedTable
from ..apply.report import MergeSummary, TableReport, plural
from ..apply.reader import change_schema, read_plan, read_units, snapshot_schema
from ..apply.staging import (
    COUNT, OP, PARTITION, RESULT_SCHEMA, StagePlan, prepare_partitions, prepare_read_units, scratch_prefix,
    scratch_segment_prefix, staging_prefix, staging_segment_prefix, staging_table_prefix,
)
from ..contracts import (
    SWAPPING, ChangeBatch, Checkpoint, DdlSegment, RowSegment, Segment, SnapshotSegment, TableChanges,
    TablePositions, checkpoint_after_copies, plan_replay, table_position,
)
from ..settings import JobSecrets
from ..storage import ObjectStore, StorageSpec, read_manifest
from .transforms import after_checkpoint, after_copies, fold_catch_up, net_changes

log = logging.getLogger("mysql_cdc.merge")


# -- reading and staging --------------------------------------------------------------------------


def _spark_schema(arrow_schema):
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(arrow_schema)


def unit_indexes(spark: SparkSession, table: TableChanges) -> tuple[list[tuple[str, int, int]], DataFrame]:
    """The table's read units (``reader.read_plan``) and a DataFrame of their indexes, one per
    partition, for a ``mapInArrow`` over them."""
    units = read_plan(table, spark.sparkContext.defaultParallelism)
    return units, spark.range(0, len(units), 1, numPartitions=max(1, len(units)))


def read_changes(spark: SparkSession, storage: StorageSpec, batch_prefix: str, table: TableChanges) -> DataFrame:
    """The table's change rows, read by the executors through mysql_cdc.storage (see reader)."""
    schema = change_schema(table)
    units, indexes = unit_indexes(spark, table)
    return indexes.mapInArrow(partial(read_units, storage, batch_prefix, schema, units), _spark_schema(schema))


def stage(net: DataFrame, plan: StagePlan) -> list[dict]:
    """Prepare the net rows for the follower transaction from the executors, in parallel: each
    partition's removals into a staging table, its final rows into a load file; returns one
    result per non-empty partition (staging table, load file, per-op counts)."""
    tagged = net.withColumn(PARTITION, F.spark_partition_id())
    results = tagged.mapInArrow(partial(prepare_partitions, plan), _spark_schema(RESULT_SCHEMA)).collect()
    return [r.asDict() for r in results]


# -- the job ---------------------------------------------------------------------------------------


SparkProvider = Union[SparkSession, Callable[[], SparkSession]]
_STAGING_THREADS = 4


@dataclass
class _Context:
    spark: Callable[[], SparkSession]
    secrets: JobSecrets
    store: ObjectStore
    batch: ChangeBatch
    follower: Follower
    summary: MergeSummary
    positions: TablePositions


def _stage_plan(ctx: _Context, segment: RowSegment, index: int, table: TableChanges,
                columns: tuple[FollowerColumn, ...]) -> StagePlan:
    # (batch column, follower column) pairs; a keyed table's deletes need only its key, a keyless
    # row is named by all its values. Batch names address the Arrow data, follower columns give
    # the staging DDL (names compare case-insensitively in MySQL).
    pairs = list(zip(table.columns, columns))
    keys = {k.lower() for k in table.key_columns}
    removal = [p for p in pairs if p[0].name.lower() in keys] if keys else pairs
    return StagePlan(
        follower=ctx.secrets.follower,
        storage=ctx.secrets.storage,
        table_prefix=staging_table_prefix(ctx.batch.pipeline, segment.index, index),
        scratch_dir=f"{scratch_segment_prefix(ctx.batch.pipeline, segment.index)}{index:03d}",
        keyed=bool(keys),
        columns=tuple(c.name for c in table.columns),
        mysql_types=tuple(c.mysql_type for c in table.columns),
        insert_columns=tuple(c.name for c, f in pairs if not f.generated),
        removal_columns=tuple(c.name for c, _ in removal),
        removal_ddl=tuple(f.staging_ddl() for _, f in removal),
    )


def _stage_table(ctx: _Context, segment: RowSegment, index: int, table: TableChanges,
                 columns: tuple[FollowerColumn, ...], checkpoint: Checkpoint, report: TableReport) -> StagedTable:
    started = time.monotonic()
    spark = ctx.spark()
    changes = read_changes(spark, ctx.secrets.storage, ctx.batch.prefix, table)
    # a table copied by a snapshot after the checkpoint has its changes up to the copy already
    position = table_position(checkpoint, ctx.positions, table.database, table.table)
    net = net_changes(after_checkpoint(changes, position), table)
    plan = _stage_plan(ctx, segment, index, table, columns)
    staged = StagedTable(table, columns, tuple(stage(net, plan)))
    report.inserted, report.updated, report.deleted = counts(staged)
    report.stage_seconds = time.monotonic() - started
    return staged


def counts(staged: StagedTable) -> tuple[int, int, int]:
    """Rows inserted, updated and deleted by applying a staged table."""
    return staged.total("inserts"), staged.total("upserts"), staged.total("deletes")


def _drop_prepared(ctx: _Context, segment: RowSegment) -> None:
    ctx.follower.drop_staging(staging_segment_prefix(ctx.batch.pipeline, segment.index))
    ctx.store.delete_prefix(scratch_segment_prefix(ctx.batch.pipeline, segment.index))


def apply_row_segment(ctx: _Context, segment: RowSegment, checkpoint: Checkpoint) -> Checkpoint:
    """Stage every table of the segment, then apply them all and move the checkpoint to the
    segment's end in one follower transaction."""
    # a table copied by a snapshot at or after the segment's end already holds all of its changes
    # here (the follower may not even have it: it was dropped before its copy's position)
    live = [i for i, t in enumerate(segment.tables)
            if table_position(checkpoint, ctx.positions, t.database, t.table) < segment.end]
    reports = {i: TableReport(segment.tables[i].qualified_name, segment.tables[i].row_count) for i in live}
    # every table is checked before anything is staged: a bad table leaves the follower untouched
    columns = {i: ctx.follower.check_table(segment.tables[i]) for i in live}
    try:
        ctx.spark()  # start Spark (if this is its first use) before the threads below share it
        # The tables' Spark jobs run concurrently: a small table's job is mostly latency (task
        # scheduling, Python workers, follower round trips), which overlaps well.
        with ThreadPoolExecutor(max_workers=_STAGING_THREADS) as pool:
            futures = [
                pool.submit(_stage_table, ctx, segment, i, segment.tables[i], columns[i], checkpoint, reports[i])
                for i in live
                if segment.tables[i].files
            ]
            staged = [f.result() for f in futures]
        crash_point("after_staging")
        done = Checkpoint(
            ctx.batch.pipeline, segment.end,
            # a segment's last GTID is only known when it ends the batch
            ctx.batch.end_gtid if segment.end == ctx.batch.end else None,
            ctx.batch.batch_id, gtid_set=segment.gtid_set, leader_id=ctx.batch.leader_id,
        )
        started = time.monotonic()
        applied = ctx.follower.apply_rows(checkpoint, [s for s in staged if s.stages], ctx.store, done)
        commit_seconds = time.monotonic() - started - sum(seconds for _, seconds in applied.values())
    except BaseException:
        try:
            _drop_prepared(ctx, segment)
        except Exception:  # noqa: BLE001 - the next attempt drops them; keep the real error
            log.warning("could not drop the staging tables and load files of segment %d", segment.index,
                        exc_info=True)
        raise
    _drop_prepared(ctx, segment)
    for report in reports.values():
        report.rows_written, report.apply_seconds = applied.get(report.table, (0, 0.0))
        log.info("merged %s (stage %.2f s, apply %.2f s)", report.describe(), report.stage_seconds,
                 report.apply_seconds)
    log.info("committed segment %d up to %s (lock, checkpoint, commit: %.2f s)", segment.index, segment.end,
             commit_seconds)
    for report in reports.values():
        ctx.summary.add(report)
    return done


def apply_ddl_segment(ctx: _Context, segment: DdlSegment, checkpoint: Checkpoint) -> Checkpoint:
    log.info("replaying DDL at %s: %s", segment.start, segment.statement[:200])
    return ctx.follower.replay_ddl(ctx.batch, segment, checkpoint)


def read_snapshot_rows(spark: SparkSession, storage: StorageSpec, batch_prefix: str,
                       segment: SnapshotSegment) -> DataFrame:
    """A snapshot table's rows, read by the executors, as inserts for the staging step."""
    table = segment.as_table_changes()
    schema = snapshot_schema(table)
    units, indexes = unit_indexes(spark, table)
    rows = indexes.mapInArrow(partial(read_units, storage, batch_prefix, schema, units), _spark_schema(schema))
    return rows.select("*", F.lit(cr.INSERT).alias(OP), F.lit(1).cast("long").alias(COUNT))


def caught_up_rows(ctx: _Context, segment: SnapshotSegment) -> tuple[DataFrame | None, tuple[int, int, int]]:
    """The rows to load for a copied table: its chunks with the changes each chunk lacks folded
    in (``fold_catch_up``), so what is loaded is the table at one position; and the catch-up's
    inserted, updated and deleted keys, for the report. None: nothing to load."""
    table = segment.as_table_changes()
    rows = read_snapshot_rows(ctx.spark(), ctx.secrets.storage, ctx.batch.prefix, segment) if table.files else None
    changes = segment.catch_up
    if changes is None or not changes.files:
        return rows, (0, 0, 0)
    ctx.follower.check_table(changes)
    changed = read_changes(ctx.spark(), ctx.secrets.storage, ctx.batch.prefix, changes)
    net = net_changes(after_copies(changed, segment.split_column, segment.chunks), changes)
    ops = {r[OP]: r["count"] for r in net.groupBy(OP).count().collect()}
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


def _swap_started(ctx: _Context, segment: SnapshotSegment) -> bool:
    """Whether an earlier attempt had this copy complete in its shadow table and began to swap
    it in (then crashed): the retry only finishes the swap."""
    position = ctx.positions.of(segment.database, segment.table)
    return (position is not None and position.state == SWAPPING and position.batch_id == ctx.batch.batch_id
            and position.position == segment.at)


def load_copy(ctx: _Context, segment: SnapshotSegment, plan: StagePlan) -> list[dict]:
    """A copy with no catch-up (nothing changed in the table during it) goes from its Parquet
    files into ``plan.load_into`` in the tasks that read them: no transform, so no row needs to
    cross into Spark's JVM and back. Returns one stage result per task."""
    table = segment.as_table_changes()
    units, indexes = unit_indexes(ctx.spark(), table)
    if not units:
        return []
    load = partial(prepare_read_units, plan, ctx.secrets.storage, ctx.batch.prefix, snapshot_schema(table), units)
    return [r.asDict() for r in indexes.mapInArrow(load, _spark_schema(RESULT_SCHEMA)).collect()]


def apply_snapshot_segment(ctx: _Context, segment: SnapshotSegment, checkpoint: Checkpoint) -> Checkpoint:
    """Replace one follower table's rows with its copy (its chunks caught up to one position) and
    record the table's position (the table is created first from the leader's definition if it
    is missing or different). Readers see the old rows until the copy is complete. The copy of
    the last table of a full snapshot also moves the pipeline's position."""
    report = TableReport(segment.qualified_name, segment.row_count, kind="snapshot")
    done = _snapshot_done(ctx, segment, checkpoint)
    if _swap_started(ctx, segment):
        log.info("%s: finishing the swap of its copy that a crash interrupted", segment.qualified_name)
        ctx.follower.finish_swap(checkpoint, segment, ctx.batch.batch_id, done)
    else:
        columns = ctx.follower.prepare_snapshot_table(segment)
        refused = ctx.follower.swap_refused(segment.database, segment.table)
        if refused:
            log.info("%s: the copy is loaded in one stream inside the commit's transaction, not through a shadow "
                     "table: %s", segment.qualified_name, refused)
        try:
            _load_snapshot(ctx, segment, checkpoint, columns, done, report, shadow=not refused)
        finally:
            _drop_prepared(ctx, segment)
    log.info("%s (%s, at %s)", report.describe(), plural(len(segment.chunks), "chunk"), segment.at)
    ctx.summary.add(report)
    return done or checkpoint


def _load_snapshot(ctx: _Context, segment: SnapshotSegment, checkpoint: Checkpoint,
                   columns: tuple[FollowerColumn, ...], done: Checkpoint | None, report: TableReport,
                   shadow: bool) -> None:
    """Stage the caught-up copy and apply it. Through a shadow table (``shadow``), the Spark
    tasks load their partitions into it in parallel and the driver swaps it in; otherwise the
    driver loads the load files in the transaction that records the table's position."""
    started = time.monotonic()
    table = segment.as_table_changes()
    plan = _stage_plan(ctx, segment, 0, table, columns)
    if shadow:
        plan = replace(plan, load_into=ctx.follower.create_shadow(segment))
    swapping = False  # once True, a shadow left behind may be the copy a retry swaps in
    caught_up = segment.catch_up is not None and bool(segment.catch_up.files)
    try:
        if shadow and not caught_up:
            staged = StagedTable(table, columns, tuple(load_copy(ctx, segment, plan)))
        else:
            rows, (report.inserted, report.updated, report.deleted) = caught_up_rows(ctx, segment)
            staged = StagedTable(table, columns, tuple(stage(rows, plan)) if rows is not None else ())
        crash_point("after_staging")
        report.stage_seconds = time.monotonic() - started
        applied = time.monotonic()
        # without a catch-up the load must hold exactly the rows copied; with one, what was staged
        if shadow:
            expected = staged.total("loaded") if caught_up else segment.row_count
            swapping = True
            report.rows_written = ctx.follower.swap_in(checkpoint, segment, ctx.batch.batch_id, done, expected)
        else:
            report.rows_written = ctx.follower.apply_snapshot(checkpoint, segment, staged, ctx.store,
                                                              ctx.batch.batch_id, done,
                                                              None if caught_up else segment.row_count)
        report.apply_seconds = time.monotonic() - applied
    except BaseException:
        if shadow and not swapping:
            try:
                ctx.follower.drop_shadow(segment)
            except Exception:  # noqa: BLE001 - the retry drops it; keep the real error
                log.warning("could not drop the shadow table of %s", segment.qualified_name, exc_info=True)
        raise


# segment kind (the manifest's "kind") -> how it is applied; every kind the contract knows is here
SEGMENT_APPLIERS: dict[str, Callable[[_Context, Segment, Checkpoint], Checkpoint]] = {
    "ddl": apply_ddl_segment,
    "rows": apply_row_segment,
    "snapshot": apply_snapshot_segment,
}


def run_merge(spark: SparkProvider, manifest_uri: str, secrets: JobSecrets) -> MergeSummary:
    """Apply the batch at ``manifest_uri``; the in-process entry point (``main`` wraps it).
    ``spark`` may be a session or a function returning one: a batch that needs no Spark work
    (a no-op replay, DDL only) then never starts it."""
    started = time.monotonic()
    get_spark = (lambda: spark) if isinstance(spark, SparkSession) else spark
    store = secrets.storage.open()
    batch = read_manifest(store, manifest_uri)
    with Follower(secrets.follower, batch.server_flavor) as follower:
        checkpoint = follower.checkpoint(batch.pipeline)
        positions = follower.table_positions(batch.pipeline)
        plan = plan_replay(batch, checkpoint, positions)
        summary = MergeSummary(batch.pipeline, batch.batch_id, plan.noop, str(checkpoint.position))
        if plan.noop:
            log.info("batch %s ends at %s, at or before the checkpoint %s: nothing to do",
                     batch.batch_id, batch.end, checkpoint.position)
            return summary
        ctx = _Context(get_spark, secrets, store, batch, follower, summary, positions)
        # leftovers of a crashed attempt
        follower.drop_staging(staging_prefix(batch.pipeline))
        store.delete_prefix(scratch_prefix(batch.pipeline))
        for segment in plan.segments:
            checkpoint = SEGMENT_APPLIERS[segment.kind](ctx, segment, checkpoint)
            summary.segments_applied += 1
        if checkpoint.position < batch.end and not batch.is_snapshot:
            # the batch ends with transactions that touched no captured table
            done = Checkpoint(batch.pipeline, batch.end, batch.end_gtid, batch.batch_id,
                              gtid_set=batch.end_gtid_set, leader_id=batch.leader_id)
            follower.advance(checkpoint, done)
            checkpoint = done
    summary.checkpoint = str(checkpoint.position)
    summary.seconds = round(time.monotonic() - started, 3)
    log.info("batch %s applied: checkpoint now %s (%.1f s)", batch.batch_id, checkpoint.position, summary.seconds)
    return summary


def run_merges(spark: SparkProvider, manifest_uris: list[str], secrets: JobSecrets,
               summaries: list[MergeSummary]) -> None:
    """Apply the batches in order, in one Spark application, appending each one's summary to
    ``summaries`` as it is applied (so a failure still reports the batches applied before it): a copy's run gives the copy and its catch-up, so that the run
    ends with every table at one position. Each batch is its own exactly-once unit: a retry after
    a crash between them finds the copy applied (a no-op) and applies the catch-up."""
    for i, manifest_uri in enumerate(manifest_uris):
        if i:
            crash_point("between_batches")
        summary = run_merge(spark, manifest_uri, secrets)
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
