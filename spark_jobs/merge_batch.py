"""The merge job: apply one change batch to the follower tables, exactly once.

    spark-submit --master local[2] --py-files mysql_cdc.zip spark_jobs/merge_batch.py \\
        --manifest-uri s3://bucket/root/<pipeline>/batches/<batch id>/manifest.json

Secrets (follower credentials, S3 settings) come from the JSON file named by
``MYSQL_CDC_SECRETS_FILE`` (``mysql_cdc.settings.JobSecrets``), never from argv. The pipeline
comes from the manifest. Exit 0 on success, no-op replays included; otherwise 1 with a one-line
error on stderr (which spark-submit passes on to its stdout, like all of the Python driver's
output). ``MYSQL_CDC_CRASH_AT`` is a test hook (``mysql_cdc.apply.faults``). See README.md.

What happens, per segment of the batch in binlog order (``run_merge``):

- DDL segment: replayed on the follower, crash-safe through the checkpoint's pending-DDL marker.
- row segment: for each table, executors read its Parquet files (``read_changes``), keep the rows
  after the checkpoint (``after_checkpoint``), net them (``net_keyed_changes`` /
  ``net_keyless_changes``) and prepare them in parallel (``stage``: removals into staging tables
  in the follower, final rows into load files); then the driver applies all tables of the segment
  and moves the checkpoint in ONE follower transaction (``mysql_cdc.apply.follower``), which
  LOADs the files straight into the tables.

The transforms are pure functions of DataFrames; ``main`` only wires steps.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Callable, Sequence, Union

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from mysql_cdc.apply.errors import MergeError
from mysql_cdc.apply.faults import crash_point
from mysql_cdc.apply.follower import Follower, FollowerColumn, StagedTable
from mysql_cdc.apply.reader import change_schema, read_plan, read_units
from mysql_cdc.apply.replay import plan_replay
from mysql_cdc.apply.staging import (
    COUNT, OP, PARTITION, RESULT_SCHEMA, StagePlan, prepare_partitions, scratch_prefix, scratch_segment_prefix,
    staging_prefix, staging_segment_prefix, staging_table_prefix,
)
from mysql_cdc.contracts import BinlogPosition, ChangeBatch, Checkpoint, DdlSegment, RowSegment, TableChanges
from mysql_cdc.contracts import change_row as cr
from mysql_cdc.settings import JobSecrets
from mysql_cdc.storage import ObjectStore, S3Settings, open_store, read_batch, split_manifest_uri

log = logging.getLogger("mysql_cdc.merge")

# working columns of the transforms: the change-row contract reserves _op etc., and the merge job
# refuses tables with columns starting with __mcdc_ (Follower.check_table)
_IMAGE, _KIND, _ORDER, _CREATES, _DELTA = "__mcdc_image", "__mcdc_kind", "__mcdc_order", "__mcdc_creates", "__mcdc_delta"


def col(name: str) -> Column:
    """A top-level column by its exact name (dots, backticks and spaces included)."""
    return F.col("`" + name.replace("`", "``") + "`")


def table_columns(df: DataFrame) -> list[str]:
    """The leader table's own columns of a change-row DataFrame (everything but the metadata)."""
    return [c for c in df.columns if c not in cr.METADATA_NAMES]


# -- transforms -----------------------------------------------------------------------------------


def after_checkpoint(df: DataFrame, position: BinlogPosition) -> DataFrame:
    """The change rows whose event lies at or after ``position``: the ones the follower lacks.
    (A checkpoint is a transaction boundary, so no transaction is ever split by this.)"""
    seq, pos = col(cr.BINLOG_SEQ), col(cr.BINLOG_POS)
    return df.where((seq > position.sequence) | ((seq == position.sequence) & (pos >= position.offset)))


def _order(sub: int) -> Column:
    """The total order of changes; ``sub`` orders the two halves of a key-changing update."""
    return F.struct(col(cr.BINLOG_SEQ), col(cr.BINLOG_POS), col(cr.ROW_INDEX), F.lit(sub).alias("sub"))


def _key_changed(key_columns: Sequence[str]) -> Column:
    same = [F.col(cr.BEFORE).getField(k).eqNullSafe(col(k)) for k in key_columns]
    unchanged = same[0]
    for condition in same[1:]:
        unchanged = unchanged & condition
    return (col(cr.OP) == "U") & ~unchanged


def _events(df: DataFrame, cases: Sequence[tuple[Column, Sequence[Column]]]) -> DataFrame:
    """One pass over the change rows: each row becomes the events of the first case it matches
    (``explode`` of an array of event structs), so the Parquet files are read once, not once per
    kind of event as a union of filtered copies would."""
    chosen = F.when(cases[0][0], F.array(*cases[0][1]))
    for condition, events in cases[1:]:
        chosen = chosen.when(condition, F.array(*events))
    return df.select(F.explode(chosen).alias("event")).select("event.*")


def net_keyed_changes(df: DataFrame, key_columns: Sequence[str]) -> DataFrame:
    """One row per key touched: the table's columns (the last image), ``__mcdc_op`` and
    ``__mcdc_n`` (=1).

    Every change becomes events on keys: an insert or update upserts its after-image; a delete
    deletes; an update that changes the key first deletes the old key (from ``_before``). Per key
    the last event wins. ``__mcdc_op`` is ``U`` (the key existed before the batch: replace it),
    ``I`` (the key's first event created it, so the follower cannot have it: insert only) or ``D``
    (delete). A key created and deleted inside the batch disappears."""
    columns = table_columns(df)
    op = col(cr.OP)
    after = F.struct(*[col(c) for c in columns])
    before = F.struct(*[F.col(cr.BEFORE).getField(c).alias(c) for c in columns])
    key_changed = _key_changed(key_columns)

    def event(image: Column, kind: str, sub: int, creates: Column) -> Column:
        return F.struct(image.alias(_IMAGE), F.lit(kind).alias(_KIND), _order(sub).alias(_ORDER),
                        creates.alias(_CREATES))

    events = _events(df, [
        (op == "D", [event(after, "D", 1, F.lit(False))]),
        (key_changed, [event(before, "D", 0, F.lit(False)), event(after, "U", 1, F.lit(True))]),
        (op.isin("I", "U"), [event(after, "U", 1, op == "I")]),
    ])
    keys = [f"__mcdc_key{i}" for i in range(len(key_columns))]
    events = events.select("*", *[F.col(_IMAGE).getField(k).alias(n) for k, n in zip(key_columns, keys)])
    last = F.col("last")
    # Shuffle by key first: the aggregation then runs entirely after the exchange, sorting the
    # rows once, instead of sorting them map-side for a partial aggregation that cannot shrink
    # them (most keys change once) and sorting them again after the exchange.
    net = events.repartition(*keys).groupBy(*keys).agg(
        F.max_by(F.struct(_KIND, _IMAGE), _ORDER).alias("last"),
        F.min_by(_CREATES, _ORDER).alias("first_creates"),
    )
    net = net.where(~((last.getField(_KIND) == "D") & F.col("first_creates")))
    # Rows leave in key order within each partition (the aggregation's own order, so this sort
    # costs nothing): the follower then inserts them in key order, appending to its index.
    net = net.sortWithinPartitions(*keys)
    net_op = F.when(last.getField(_KIND) == "D", "D").when(F.col("first_creates"), "I").otherwise("U")
    return net.select(
        *[last.getField(_IMAGE).getField(c).alias(c) for c in columns],
        net_op.alias(OP),
        F.lit(1).cast("long").alias(COUNT),
    )


def net_keyless_changes(df: DataFrame, columns: Sequence[str]) -> DataFrame:
    """The net multiset delta of a table without a primary key: one row per distinct full row
    whose count changed, with ``__mcdc_op`` ``I`` (add ``__mcdc_n`` copies) or ``D`` (remove
    ``__mcdc_n`` copies). Inserts and update after-images count +1, deletes and update
    before-images -1; NULLs compare equal. Order does not matter for a multiset."""
    op = col(cr.OP)
    after = F.struct(*[col(c) for c in columns])
    before = F.struct(*[F.col(cr.BEFORE).getField(c).alias(c) for c in columns])

    def event(image: Column, delta: int) -> Column:
        return F.struct(image.alias(_IMAGE), F.lit(delta).alias(_DELTA))

    events = _events(df, [
        (op == "I", [event(after, 1)]),
        (op == "D", [event(after, -1)]),
        (op == "U", [event(before, -1), event(after, 1)]),
    ])
    net = events.groupBy(_IMAGE).agg(F.sum(_DELTA).alias(_DELTA)).where(F.col(_DELTA) != 0)
    return net.select(
        *[F.col(_IMAGE).getField(c).alias(c) for c in columns],
        F.when(F.col(_DELTA) > 0, "I").otherwise("D").alias(OP),
        F.abs(F.col(_DELTA)).cast("long").alias(COUNT),
    )


def expand_copies(net: DataFrame) -> DataFrame:
    """Keyless ``I`` rows as ``__mcdc_n`` separate rows (the follower inserts staged rows as they
    are); ``D`` rows stay single, their count is the ``LIMIT`` of their delete."""
    inserting = col(OP) == "I"
    copies = F.when(inserting, F.sequence(F.lit(1).cast("long"), col(COUNT))).otherwise(F.array(F.lit(1).cast("long")))
    return (
        net.withColumn("__mcdc_copy", F.explode(copies))
        .drop("__mcdc_copy")
        .withColumn(COUNT, F.when(inserting, F.lit(1).cast("long")).otherwise(col(COUNT)))
    )


# -- reading and staging --------------------------------------------------------------------------


def _spark_schema(arrow_schema):
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(arrow_schema)


def read_changes(spark: SparkSession, store_uri: str, s3: S3Settings | None, batch_prefix: str,
                 table: TableChanges) -> DataFrame:
    """The table's change rows, read by the executors through mysql_cdc.storage (see reader)."""
    schema = change_schema(table)
    units = read_plan(table, spark.sparkContext.defaultParallelism)
    indexes = spark.range(0, len(units), 1, numPartitions=max(1, len(units)))
    return indexes.mapInArrow(partial(read_units, store_uri, s3, batch_prefix, schema, units), _spark_schema(schema))


def net_changes(changes: DataFrame, table: TableChanges) -> DataFrame:
    if table.key_columns:
        return net_keyed_changes(changes, table.key_columns)
    return expand_copies(net_keyless_changes(changes, [c.name for c in table.columns]))


def stage(net: DataFrame, plan: StagePlan) -> list[dict]:
    """Prepare the net rows for the follower transaction from the executors, in parallel: each
    partition's removals into a staging table, its final rows into a load file; returns one
    result per non-empty partition (staging table, load file, per-op counts)."""
    tagged = net.withColumn(PARTITION, F.spark_partition_id())
    results = tagged.mapInArrow(partial(prepare_partitions, plan), _spark_schema(RESULT_SCHEMA)).collect()
    return [r.asDict() for r in results]


# -- the job ---------------------------------------------------------------------------------------


@dataclass
class TableReport:
    table: str
    rows_in: int  # change rows of the table in the segment
    net_rows: int = 0  # rows staged after netting
    rows_written: int = 0  # rows deleted + inserted in the follower table
    stage_seconds: float = 0.0  # read, net and load into staging (executors)
    apply_seconds: float = 0.0  # the table's statements in the follower transaction

    @property
    def seconds(self) -> float:
        return self.stage_seconds + self.apply_seconds

    @property
    def rows_per_second(self) -> float:
        return self.rows_in / self.seconds if self.seconds else 0.0


@dataclass
class MergeSummary:
    pipeline: str
    batch_id: str
    noop: bool
    checkpoint: str
    segments_applied: int = 0
    seconds: float = 0.0
    tables: list[TableReport] = field(default_factory=list)

    def to_json(self) -> str:
        body = asdict(self)
        for report, data in zip(self.tables, body["tables"]):
            data["seconds"] = round(report.seconds, 3)
            data["rows_per_second"] = round(report.rows_per_second, 1)
        return json.dumps(body, sort_keys=True)


SparkProvider = Union[SparkSession, Callable[[], SparkSession]]
_STAGING_THREADS = 4


@dataclass
class _Context:
    spark: Callable[[], SparkSession]
    secrets: JobSecrets
    store_root: str
    store: ObjectStore
    batch: ChangeBatch
    follower: Follower
    summary: MergeSummary


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
        store_uri=ctx.store_root,
        s3=ctx.secrets.s3,
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
    changes = read_changes(spark, ctx.store_root, ctx.secrets.s3, ctx.batch.prefix, table)
    net = net_changes(after_checkpoint(changes, checkpoint.position), table)
    plan = _stage_plan(ctx, segment, index, table, columns)
    staged = StagedTable(table, columns, tuple(stage(net, plan)))
    report.net_rows = staged.total("rows")
    report.stage_seconds = time.monotonic() - started
    return staged


def _drop_prepared(ctx: _Context, segment: RowSegment) -> None:
    ctx.follower.drop_staging(staging_segment_prefix(ctx.batch.pipeline, segment.index))
    ctx.store.delete_prefix(scratch_segment_prefix(ctx.batch.pipeline, segment.index))


def apply_row_segment(ctx: _Context, segment: RowSegment, checkpoint: Checkpoint) -> Checkpoint:
    """Stage every table of the segment, then apply them all and move the checkpoint to the
    segment's end in one follower transaction."""
    reports = [TableReport(t.qualified_name, t.row_count) for t in segment.tables]
    # every table is checked before anything is staged: a bad table leaves the follower untouched
    columns = [ctx.follower.check_table(t) for t in segment.tables]
    try:
        ctx.spark()  # start Spark (if this is its first use) before the threads below share it
        # The tables' Spark jobs run concurrently: a small table's job is mostly latency (task
        # scheduling, Python workers, follower round trips), which overlaps well.
        with ThreadPoolExecutor(max_workers=_STAGING_THREADS) as pool:
            futures = [
                pool.submit(_stage_table, ctx, segment, i, table, columns[i], checkpoint, reports[i])
                for i, table in enumerate(segment.tables)
                if table.files
            ]
            staged = [f.result() for f in futures]
        crash_point("after_staging")
        done = Checkpoint(
            ctx.batch.pipeline, segment.end,
            # a segment's last GTID is only known when it ends the batch
            ctx.batch.end_gtid if segment.end == ctx.batch.end else None,
            ctx.batch.batch_id,
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
    for report in reports:
        report.rows_written, report.apply_seconds = applied.get(report.table, (0, 0.0))
        log.info(
            "merged %s: %d change rows in, %d net rows, %d rows written, %.2f s (stage %.2f s, apply %.2f s), "
            "%.0f rows/s",
            report.table, report.rows_in, report.net_rows, report.rows_written, report.seconds,
            report.stage_seconds, report.apply_seconds, report.rows_per_second,
        )
    log.info("committed segment %d up to %s (lock, checkpoint, commit: %.2f s)", segment.index, segment.end,
             commit_seconds)
    ctx.summary.tables.extend(reports)
    return done


def run_merge(spark: SparkProvider, manifest_uri: str, secrets: JobSecrets) -> MergeSummary:
    """Apply the batch at ``manifest_uri``; the in-process entry point (``main`` wraps it).
    ``spark`` may be a session or a function returning one: a batch that needs no Spark work
    (a no-op replay, DDL only) then never starts it."""
    started = time.monotonic()
    get_spark = (lambda: spark) if isinstance(spark, SparkSession) else spark
    root, prefix = split_manifest_uri(manifest_uri)
    store = open_store(root, secrets.s3)
    batch = read_batch(store, prefix)
    if batch is None:
        raise MergeError(
            f"no batch at {manifest_uri}: its manifest.json does not exist (the extraction did not "
            "finish, or the URI is wrong); re-extract the range"
        )
    with Follower(secrets.follower) as follower:
        checkpoint = follower.checkpoint(batch.pipeline)
        plan = plan_replay(batch, checkpoint)
        summary = MergeSummary(batch.pipeline, batch.batch_id, plan.noop, str(checkpoint.position))
        if plan.noop:
            log.info("batch %s ends at %s, at or before the checkpoint %s: nothing to do",
                     batch.batch_id, batch.end, checkpoint.position)
            return summary
        ctx = _Context(get_spark, secrets, root, store, batch, follower, summary)
        # leftovers of a crashed attempt
        follower.drop_staging(staging_prefix(batch.pipeline))
        store.delete_prefix(scratch_prefix(batch.pipeline))
        for segment in plan.segments:
            if isinstance(segment, DdlSegment):
                log.info("replaying DDL at %s: %s", segment.start, segment.statement[:200])
                checkpoint = follower.replay_ddl(batch, segment, checkpoint)
            else:
                checkpoint = apply_row_segment(ctx, segment, checkpoint)
            summary.segments_applied += 1
        if checkpoint.position < batch.end:
            # the batch ends with transactions that touched no captured table
            done = Checkpoint(batch.pipeline, batch.end, batch.end_gtid, batch.batch_id)
            follower.advance(checkpoint, done)
            checkpoint = done
    summary.checkpoint = str(checkpoint.position)
    summary.seconds = round(time.monotonic() - started, 3)
    log.info("batch %s applied: checkpoint now %s (%.1f s)", batch.batch_id, checkpoint.position, summary.seconds)
    return summary


# -- command line -----------------------------------------------------------------------------------

_PANDAS_WARNING = "PySpark does not yet fully support pandas"


def build_spark_session(app_name: str) -> SparkSession:
    # Executors on this machine run the driver's interpreter unless told otherwise: the one that
    # has pyarrow and pymysql. A cluster sets PYSPARK_PYTHON itself.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYTHONWARNINGS", f"ignore:{_PANDAS_WARNING}:FutureWarning")
    spark = (
        SparkSession.builder.appName(app_name)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    return spark


def _import_pandas() -> None:
    import pandas  # noqa: F401 - pyspark's mapInArrow imports it on the driver; this is earlier


def start_spark(app_name: str) -> SparkSession:
    """The job's session. pandas is imported in the background meanwhile: the JVM takes seconds
    to start the session, and the driver's first ``mapInArrow`` would otherwise import pandas
    (~0.7 s) on the critical path."""
    threading.Thread(target=_import_pandas, name="import-pandas", daemon=True).start()
    return build_spark_session(app_name)


def one_line(exc: BaseException) -> str:
    """The error as one line. A failure inside an executor arrives wrapped in Spark's report
    with the worker's traceback; its last ``SomeError: message`` line is the real error."""
    text = str(exc).strip() or type(exc).__name__
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) > 1:
        raised = [line for line in lines if line.split(":", 1)[0].rsplit(".", 1)[-1].endswith(("Error", "Exception"))]
        text = raised[-1] if raised else lines[0]
    return text


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="merge_batch.py",
        description="Apply one mysql-cdc change batch to the follower (secrets via $MYSQL_CDC_SECRETS_FILE).",
    )
    parser.add_argument("--manifest-uri", required=True, help="s3://... or file://.../manifest.json of the batch")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    warnings.filterwarnings("ignore", message=_PANDAS_WARNING, category=FutureWarning)
    session: SparkSession | None = None

    def get_spark() -> SparkSession:
        nonlocal session
        if session is None:
            session = start_spark("mysql-cdc merge")
        return session

    try:
        summary = run_merge(get_spark, args.manifest_uri, JobSecrets.from_env())
        log.info("merge summary %s", summary.to_json())
        return 0
    except Exception as exc:  # noqa: BLE001 - every failure becomes the one-line error below
        if not isinstance(exc, (MergeError, ValueError)):
            log.error("merge failed", exc_info=True)  # unexpected: keep the traceback above the line
        print(f"merge_batch: error: {one_line(exc)}", file=sys.stderr)
        return 1
    finally:
        if session is not None:
            session.stop()


if __name__ == "__main__":
    sys.exit(main())
