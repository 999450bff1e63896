"""A Delta Lake follower: the leader's table ``db.t`` is the Delta table ``<location>/db/t``.

How a batch lands (``Sink`` methods and ``DeltaSegmentWriter``):

- rows: each table's net rows become one Delta ``MERGE`` (by primary key; a keyless table by its
  full rows as a multiset, ``merges``), committed with ``txnAppId`` = the pipeline (and leader)
  and ``txnVersion`` = the segment's end position (``state.location.position_version``). A small
  table's rows netted on the driver are merged by delta-rs from Arrow, and an empty table's
  appended, under the same transaction id and with no Spark job (``merges_in_driver``):
  Delta skips a commit it already has, so a retry after a crash at any point re-runs the segment
  and changes only the tables that were not committed yet. When every table of the segment is
  committed, the pipeline's state row moves to the segment's end with every table's Delta
  version: the consistent cut readers use (``kinds.delta.state.cut``).
- DDL (``ddl``): column renames and drops in place (column mapping by name), TRUNCATE as a
  ``DELETE`` under the same transaction ids, a dropped table emptied and left out of the cut, a
  renamed table copied to its new path; new columns and exact type widenings when the table's
  next rows arrive with them (the binlog carries a table's columns with its rows).
- a copy: the caught-up rows overwrite the table in one commit (readers see the old rows or the
  copy), and the state records the table's position.

The pipeline's state is delta-rs's (``mysql_cdc.kinds.delta.state``), written from the driver.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ....merge import history, soft_deletes
from ....merge.netting import copies_per_op
from ....merge.report import TableReport
from ....contracts import (
    DONE, ChangeBatch, Checkpoint, DdlSegment, RowSegment, TableChanges, TablePosition,
    TablePositions, require_checkpoint,
)
from ....contracts import change_row as cr
from ....crash_points import crash_point
from ....merge.errors import CheckpointError, FollowerSchemaError, TableCommitError
from ..options import LakeOptions
from ..state import same_place
from ..state.location import LakeLocation, lake_retry, position_version
from ..state.tables import StateRow, StateTables
from ....merge.sink import BatchJob, NetRows, SegmentWriter, Sink, TableCopy
from . import changelog, ddl, merges, partition_values
from .tables import (
    HISTORY_COLUMNS, MARK_COLUMNS, NOT_PORTABLE, DeltaTableRef, add_columns, create_table, follow_schema, lake_columns, leader_part,
    kept_changes, overwrite, same_columns, same_type, schema_changes, quote, schema_ddl, table_exists, to_delta,
    widens,
)

if TYPE_CHECKING:
    from deltalake import DeltaTable

log = logging.getLogger("mysql_cdc.merge")

TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"


@dataclass
class StagedRows:
    """One table's net rows for the segment's commit, in Delta values: a DataFrame for Spark's MERGE
    (``rows``), the Arrow net rows delta-rs merges (``merged``), or, for a table still empty, the
    Arrow rows delta-rs appends (``appended``)."""

    table: TableChanges
    target: DeltaTableRef
    written: int
    rows: DataFrame | None = None  # net rows in Delta values (from Spark's netting: cached for the counts and the MERGE)
    into_empty: bool = False  # ``rows`` go to a table still empty: appended by Spark, not merged
    merged: pa.Table | None = None  # the net rows (with their op and copies) of delta-rs's merge, in Delta values
    appended: pa.Table | None = None  # the rows of an empty table's append, in Delta values
    history: pa.Table | None = None  # a history table's merge source (``merges.history_source``) for delta-rs
    log: tuple[DeltaTableRef, DataFrame] | None = None  # the changelog table and its new rows


# delta-rs merges a small table in the driver when its files hold at most this many bytes:
# it rewrites each file holding a changed row (copy-on-write, 15-60 ms per MiB here), where Spark's
# MERGE marks the rows in a deletion vector but costs seconds of jobs however few the rows
# (bench_delta's growth figure: 10k spread updates into a 5M-row table of 23.8 MiB, 1.4 s by
# delta-rs, 13 s by Spark's MERGE). Above it, rewriting a table at each batch costs more writing
# than the rows (docs/performance.md, "What the measurements decided")
DRIVER_MERGE_BYTES = 32 * 1024 * 1024
_OPENING_THREADS = 8
_COMMITTING_THREADS = 8
_SCHEMA_THREADS = 4


def files_bytes(table: DeltaTable) -> int:
    """The bytes of the data files of ``table``'s version as opened (what ``DRIVER_MERGE_BYTES`` bounds)."""
    # (delta-rs gives its add actions as arro3 Arrow: pyarrow takes them through the C data interface)
    return pc.sum(pa.table(table.get_add_actions(flatten=True)).column("size_bytes")).as_py() or 0


def _spark_copies_per_op(net: DataFrame) -> dict[str, int]:
    """``netting.copies_per_op`` of net rows in Spark (one small job)."""
    return {r[cr.NET_OP]: r["n"] for r in net.groupBy(cr.NET_OP).agg(F.sum(cr.NET_COUNT).alias("n")).collect()}

@dataclass
class _Committed:
    """The tables of a segment committed so far (from several threads): each one's Delta version,
    and its rows written and seconds."""

    versions: dict[str, int]
    applied: dict[str, tuple[int, float]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, staged: StagedRows, version: int, seconds: float) -> None:
        with self.lock:
            self.versions[staged.target.name] = version
            self.applied[staged.table.qualified_name] = (staged.written, seconds)


class DeltaSink(Sink[DeltaTableRef]):
    def __init__(self, location: LakeLocation, options: LakeOptions = LakeOptions()):
        self.location = location
        self.options = options  # what the tables are: changelog, features, partition columns
        self.state = StateTables(location)
        self.job: BatchJob | None = None
        self._session: Callable[[], SparkSession] | None = None
        self._txn: merges.Txn | None = None  # inside idempotent()
        self._opened: dict[str, Any] = {}  # qualified table name -> delta-rs's table (None: missing), this segment
        # the cut's versions as DDL replayed ahead of rows left them, for the rows' commit to record
        # (``replay_ddl_ahead``); None: no DDL waits for its commit
        self._versions_ahead: dict[str, int] | None = None

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any], leader_flavor: str | None) -> "DeltaSink":
        return cls(LakeLocation.from_json(settings["location"], "follower location"), LakeOptions.from_json(settings))

    # -- Spark and names --------------------------------------------------------------------------

    def attach(self, session: Callable[[], SparkSession]) -> None:
        """The Spark session this sink writes with (a function: started on first use)."""
        self._session = session

    def spark(self) -> SparkSession:
        """The job's session with this location's S3A settings, set here at run time (from the
        secrets file) so no credential is ever on the spark-submit command line."""
        spark = self._session()
        conf = self.location.hadoop_conf()
        hadoop = spark.sparkContext._jsc.hadoopConfiguration()
        for key, value in conf.items():
            hadoop.set(key, value)
            spark.conf.set(key, value)  # copied into each write's Hadoop configuration (executors)
        return spark

    def ref(self, database: str, table: str) -> DeltaTableRef:
        return DeltaTableRef(f"{database}.{table}", self.location.spark_path(self.location.table_uri(database, table)),
                             self.options.features, self.options.partition_columns(database, table),
                             self.options.keeps_deleted(database, table), self.options.keeps_history(database, table))

    def app_id(self, batch: ChangeBatch) -> str:
        # positions of two leaders do not compare: after a failover the versions start afresh
        return f"mysql-cdc/{batch.pipeline}/{batch.leader_id or 'leader'}"

    def delta_rs(self, database: str, table: str):
        """The table as delta-rs opens it (its latest version). Raises delta-rs's
        ``TableNotFoundError`` for a table not created yet."""
        from deltalake import DeltaTable

        uri = self.location.table_uri(database, table)
        return lake_retry(f"open {uri}", lambda: DeltaTable(uri, storage_options=self.location.storage_options()))

    def version(self, database: str, table: str) -> int:
        return self.delta_rs(database, table).version()

    @contextmanager
    def idempotent(self, app_id: str, version: int) -> Iterator[None]:
        """Session settings under which each Delta DML commit is skipped if the table already has
        a commit of ``app_id`` at ``version`` or later (Delta's idempotent DML)."""
        spark = self.spark()
        spark.conf.set(TXN_APP_ID, app_id)
        spark.conf.set(TXN_VERSION, str(version))
        self._txn = merges.Txn(app_id, version)
        try:
            yield
        finally:
            self._txn = None
            spark.conf.unset(TXN_APP_ID)
            spark.conf.unset(TXN_VERSION)

    def empty_table(self, database: str, table: str) -> int | None:
        """Delete every row of the table (a TRUNCATE, or a DROP that keeps its history for time
        travel) by delta-rs, under the DDL's transaction id (``idempotent``): its files are removed,
        none rewritten, and no Spark job runs. Returns the table's version after it; None: no such
        table."""
        from deltalake.exceptions import TableNotFoundError

        assert self._txn is not None, "empty_table runs inside idempotent()"
        try:
            opened = self.delta_rs(database, table)
        except TableNotFoundError:
            return None
        if not merges.done(opened, self._txn):
            opened.delete(commit_properties=merges.commit_properties(self._txn))
        return opened.version()

    def _with_added_columns(self, database: str, table: str):
        """The table as delta-rs opens it for a DDL's commit (``idempotent``), with the columns of its
        history mode (added to a table made before the mode named it); None: no such table, or one
        that has the DDL's commit already (a retry's)."""
        from deltalake.exceptions import TableNotFoundError

        assert self._txn is not None, "a DDL's commit runs inside idempotent()"
        try:
            opened = self.delta_rs(database, table)
        except TableNotFoundError:
            return None
        if merges.done(opened, self._txn):
            return None
        ref = self.ref(database, table)
        if leader_part(lake_columns(opened), ref)[1]:
            add_columns(self.spark(), ref)
            opened = self.delta_rs(database, table)
        return opened

    def close_all_versions(self, database: str, table: str, seq: int) -> int | None:
        """Close every current version of a history table at ``seq`` (a TRUNCATE's position; no time),
        by delta-rs, under the DDL's transaction id. Returns the table's version after it; None: no
        such table."""
        opened = self._with_added_columns(database, table)
        if opened is not None:
            current, ends = (merges.sql_name(c) for c in (history.CURRENT, history.VALID_TO_SEQ))
            opened.update(updates={current: "false", ends: f"CAST({seq} AS DECIMAL(38,0))"},
                          predicate=f"{current} IS NOT FALSE", commit_properties=merges.commit_properties(self._txn))
        return self._version_if_any(database, table)

    def mark_all_deleted(self, database: str, table: str, txn: str) -> int | None:
        """Mark every live row of a table that keeps its deleted rows deleted by ``txn`` (a TRUNCATE's
        position), by delta-rs, under the DDL's transaction id; rows deleted before keep their marks.
        Returns the table's version after it; None: no such table."""
        opened = self._with_added_columns(database, table)
        if opened is not None:
            deleted, by = (merges.sql_name(c) for c in (soft_deletes.DELETED, soft_deletes.DELETED_TXN))
            opened.update(updates={deleted: "true", by: "'" + txn.replace("'", "''") + "'"},
                          predicate=f"{deleted} IS NOT TRUE", commit_properties=merges.commit_properties(self._txn))
        return self._version_if_any(database, table)

    def _version_if_any(self, database: str, table: str) -> int | None:
        from deltalake.exceptions import TableNotFoundError

        try:
            return self.version(database, table)
        except TableNotFoundError:
            return None

    # -- state --------------------------------------------------------------------------------------

    def _state(self, pipeline: str) -> StateRow:
        row = self.state.read_state(pipeline)
        require_checkpoint(row.checkpoint if row is not None else None, pipeline)
        return row

    def _expect(self, expected: Checkpoint) -> StateRow:
        row = self._state(expected.pipeline)
        if not same_place(row.checkpoint, expected):
            raise CheckpointError(
                f"the checkpoint of pipeline {expected.pipeline!r} moved from {expected.position} to "
                f"{row.checkpoint.position} during this merge (another merge of the pipeline?); the retry applies "
                "what is left")
        return row

    def begin(self, job: BatchJob) -> None:
        self.job = job  # nothing is left behind by a crashed attempt: Delta commits are atomic
        self.attach(job.spark)

    def advance(self, expected: Checkpoint, done: Checkpoint) -> None:
        row = self._expect(expected)
        self.state.write_state(replace(row, checkpoint=done))

    def publish(self, pipeline: str) -> None:
        """The catalog's entries of this pipeline made the cut's tables (``kinds.delta.catalog``)."""
        if self.options.catalog is None:
            return
        from ..catalog import HiveMetastore, sync

        row = self.state.read_state(pipeline)
        tables = {} if row is None else {
            name: self.location.spark_path(self.location.table_uri(*name.split(".", 1))) for name in row.versions}
        crash_point("before_catalog_sync")
        with HiveMetastore(self.options.catalog) as metastore:
            sync(metastore, pipeline, tables)

    # -- rows -------------------------------------------------------------------------------------

    def check_table(self, changes: TableChanges) -> DeltaTableRef:
        self._opened.pop(changes.qualified_name, None)  # read afresh: a DDL or a copy may have changed it
        self._check_partition_types(changes)
        self._check_features(changes)
        self._check_history_modes(changes)
        if self._needs_schema_change(changes):
            self._follow_schema(changes)
        return self.ref(changes.database, changes.table)

    def check_tables(self, tables: list[TableChanges]) -> list[DeltaTableRef]:
        # each table's log is read once per segment (what an earlier segment opened may have changed
        # since: a DDL, a copy); on object storage a read is mostly waiting for requests, so the
        # tables of a segment are opened together first
        self._opened.clear()
        with ThreadPoolExecutor(_OPENING_THREADS, thread_name_prefix="mysql-cdc delta open") as pool:
            list(pool.map(self._open, tables))
        for t in tables:
            self._check_partition_types(t)
            self._check_features(t)
            self._check_history_modes(t)
        changing = [t for t in tables if self._needs_schema_change(t)]
        if changing:
            # Spark's statements (a CREATE TABLE: ~0.7 s, mostly its commit's round trips) run a few
            # at a time, on the one session, started here before the threads share it
            self.spark()
            with ThreadPoolExecutor(_SCHEMA_THREADS, thread_name_prefix="mysql-cdc delta schema") as pool:
                list(pool.map(self._follow_schema, changing))
        return [self.ref(t.database, t.table) for t in tables]

    def _needs_schema_change(self, changes: TableChanges) -> bool:
        """Whether the table is to be created, its columns changed or its partitioning made the
        pipelines file's, judged from delta-rs's read of its log (a ``FollowerSchemaError`` for a
        change Delta cannot make): only then does Spark run anything for it."""
        opened = self._open(changes)
        if opened is None:
            return True
        ref = self.ref(changes.database, changes.table)
        if not same_columns(opened.metadata().partition_columns, ref.partition_by):
            return True
        existing, lacks_added = leader_part(lake_columns(opened), ref)
        return lacks_added or bool(kept_changes(schema_changes(existing, changes.columns, changes.qualified_name), ref))

    def _check_partition_types(self, changes: TableChanges) -> None:
        ref = self.ref(changes.database, changes.table)
        partition_values.check_types(ref, partition_values.partition_types(ref, changes.columns))

    def _check_history_modes(self, changes: TableChanges) -> None:
        """A table a history mode names must be able to keep what it keeps (``history.check_table``)."""
        history.check_table(changes.qualified_name, changes.key_columns, [c.name for c in changes.columns],
                            self.options.keeps_deleted(changes.database, changes.table),
                            self.options.keeps_history(changes.database, changes.table))

    def _check_features(self, changes: TableChanges) -> None:
        """A ``portable`` pipeline's table must be one its readers open: a table created before the
        pipeline chose ``portable`` keeps column mapping and deletion vectors, which no commit removes."""
        opened = self._open(changes)
        if self.options.features != "portable" or opened is None:
            return
        found = sorted(NOT_PORTABLE & set(opened.protocol().reader_features or ()))
        if found:
            uri = self.location.table_uri(changes.database, changes.table)
            raise FollowerSchemaError(
                f"{changes.qualified_name} at {uri} has the table features {', '.join(found)}, which the "
                "pipeline's 'features: portable' promises its readers it has not (the table was created before "
                "that choice); copy it again as a portable table: remove the directory " + uri + " and trigger "
                f"the pipeline with conf {{\"resnapshot\": [\"{changes.qualified_name}\"]}}")

    def _follow_schema(self, changes: TableChanges) -> None:
        follow_schema(self.spark(), self.ref(changes.database, changes.table), changes.columns)
        self._opened.pop(changes.qualified_name, None)  # opened again when next asked

    def change_metadata(self, table: TableChanges) -> frozenset[str]:
        logged = changelog.METADATA if self.options.logs(table.database, table.table) else frozenset()
        marked = soft_deletes.METADATA if self.options.keeps_deleted(table.database, table.table) else frozenset()
        kept = history.METADATA if self.options.keeps_history(table.database, table.table) else frozenset()
        return logged | marked | kept

    def changelog_ref(self, pipeline: str, database: str, table: str) -> DeltaTableRef:
        return DeltaTableRef(f"{database}.{table}",
                             self.location.spark_path(self.location.changelog_uri(pipeline, database, table)))

    def _open(self, table: TableChanges):
        """The table as delta-rs opens it (None: not created yet), once per table and row segment
        (checking, staging and the commit all read it; ``check_tables`` and the segment's end
        forget them, and a schema change here reopens it)."""
        from deltalake.exceptions import TableNotFoundError

        name = table.qualified_name
        if name not in self._opened:
            try:
                self._opened[name] = self.delta_rs(table.database, table.table)
            except TableNotFoundError:
                self._opened[name] = None
        return self._opened[name]

    def _is_empty(self, table: TableChanges) -> bool:
        """No data file (delta-rs's view of the table as the segment opened it): a table just created
        or emptied, whose net rows are all appended. False for a table that does not exist yet."""
        opened = self._open(table)
        return opened is not None and not opened.file_uris()

    def merges_in_driver(self, table: TableChanges) -> bool:
        """Whether delta-rs merges the table's net rows netted on the driver, with no Spark job: a
        table whose files hold at most ``DRIVER_MERGE_BYTES`` (keyed, or keyless: its rewrite counts
        the copies the table holds, a query over all of it)."""
        opened = self._open(table)
        return opened is not None and files_bytes(opened) <= DRIVER_MERGE_BYTES

    def segment(self, job: BatchJob, segment: RowSegment, expected: Checkpoint) -> "DeltaSegmentWriter":
        return DeltaSegmentWriter(self, job, segment, expected)

    def commit_table(self, s: StagedRows, txn: merges.Txn) -> int:
        """One table's commit under the segment's transaction id (Delta skips one it has); returns
        the table's version after it. Spark's commits run in ``idempotent``."""
        if s.log is not None:
            changelog.append(*s.log)
        if s.appended is not None or s.merged is not None or s.history is not None:
            opened = self._open(s.table)
            if s.history is not None:
                merges.merge_history_arrow(opened, s.table, s.history, txn)
            elif s.appended is not None:
                merges.append_arrow(opened, s.appended, txn)
            elif s.table.key_columns:
                merges.merge_arrow(opened, s.table, s.merged, txn, s.target.keeps_deleted)
            else:
                merges.merge_arrow_keyless(opened, s.table, s.merged, txn)
            return opened.version()
        if s.target.keeps_history:
            merges.merge_history(self.spark(), s.target, s.table, s.rows)
        elif s.into_empty:
            merges.append_rows(s.target, s.table, s.rows)
        else:
            merges.merge_rows(self.spark(), s.target, s.table, s.rows)
        return self.version(s.table.database, s.table.table)

    # -- DDL --------------------------------------------------------------------------------------

    def replay_ddl(self, batch: ChangeBatch, segment: DdlSegment, checkpoint: Checkpoint) -> Checkpoint:
        row = self._expect(checkpoint)
        versions = dict(row.versions)
        with self.idempotent(self.app_id(batch), position_version(segment.end)):
            ddl.replay(self, segment, versions)
        crash_point("before_checkpoint")
        done = Checkpoint(batch.pipeline, segment.end, segment.gtid or checkpoint.gtid, batch.batch_id,
                          gtid_set=segment.gtid_set, leader_id=batch.leader_id)
        self.state.write_state(replace(row, checkpoint=done, versions=versions))
        return done

    def replays_ahead(self, segment: DdlSegment) -> bool:
        # Every replay in ``ddl.ACTIONS`` is harmless done again after later rows of its tables
        # were committed: what it creates, renames, drops or adds is found done, and what it
        # writes (an emptied table, an added column's values, a renamed table's rows) is a DML
        # commit under the statement's transaction id, which Delta skips in a table holding the
        # later rows' greater one.
        return segment.action in ddl.ACTIONS

    def replay_ddl_ahead(self, batch: ChangeBatch, segment: DdlSegment, expected: Checkpoint) -> None:
        if self._versions_ahead is None:
            self._versions_ahead = dict(self._expect(expected).versions)
        with self.idempotent(self.app_id(batch), position_version(segment.end)):
            ddl.replay(self, segment, self._versions_ahead)

    def versions_at(self, row: StateRow) -> dict[str, int]:
        """The cut's table versions a commit starts from: the state row's, as the DDL replayed
        ahead of the commit's rows left them (``replay_ddl_ahead``)."""
        return dict(row.versions if self._versions_ahead is None else self._versions_ahead)

    # -- copies -----------------------------------------------------------------------------------

    def replace_table(self, job: BatchJob, copy: TableCopy, checkpoint: Checkpoint, done: Checkpoint | None,
                      report: TableReport) -> None:
        segment = copy.segment
        row = self._expect(checkpoint)
        started = time.monotonic()
        spark = self.spark()
        target = self.ref(segment.database, segment.table)
        rows, (report.inserted, report.updated, report.deleted) = copy.rows()
        if rows is not None:
            _refuse_empty_partition_strings(target, segment.columns, rows)
        if not table_exists(spark, target):
            create_table(spark, target, segment.columns)
        report.stage_seconds = time.monotonic() - started
        applied = time.monotonic()
        data = (spark.createDataFrame([], schema_ddl(segment.columns, target.name)) if rows is None
                else to_delta(rows, segment.columns))
        if target.added_columns:
            _refuse_retyped(spark, target, data)
        if target.keeps_deleted:
            data = _with_rows_gone(spark, target, data, segment.key_columns, str(segment.at))
        elif target.keeps_history:
            data = _with_versions(spark, target, data, segment.key_columns,
                                  history.seq_number(segment.at.sequence, segment.at.offset))
        # One commit replaces the rows (and the columns): readers see the old table or the copy.
        # Its transaction id is the batch's own: a retry of this batch skips it, but a later copy
        # (a resnapshot repairing drift) is applied even at the same leader position, which it
        # is when the drift was written outside the binlog and nothing was written since.
        overwrite(spark, target, data, (f"{self.app_id(job.batch)}/copy/{job.batch.batch_id}",
                                        position_version(segment.at)))
        report.rows_written = merges.rows_written(self.location.table_uri(segment.database, segment.table),
                                                  self.location.storage_options())
        report.apply_seconds = time.monotonic() - applied
        crash_point("before_checkpoint")
        positions = dict(row.positions.by_table)
        positions[(segment.database, segment.table)] = TablePosition(
            segment.database, segment.table, segment.at, job.batch.batch_id, DONE)
        versions = {**row.versions, target.name: self.version(segment.database, segment.table)}
        self.state.write_state(StateRow(done or row.checkpoint, TablePositions(positions), versions))


def _refuse_retyped(spark: SparkSession, target: DeltaTableRef, copied: DataFrame) -> None:
    """A copy of a table that keeps its deleted rows or versions stops (``history.retyped_error``)
    when it changes a column's type in a way the kept rows cannot take exactly."""
    if not table_exists(spark, target):
        return
    have = {f.name.lower(): f for f in spark.read.format("delta").load(target.path).schema.fields}
    for column in copied.schema.fields:
        held = have.get(column.name.lower())
        if held is None:
            continue
        old, new = held.dataType.simpleString(), column.dataType.simpleString()
        if not same_type(old, new) and not widens(old, new):
            raise history.retyped_error(target.name, held.name, old.upper(), new.upper(), target.keeps_deleted)


def _with_rows_gone(spark: SparkSession, target: DeltaTableRef, copied: DataFrame, keys, txn: str) -> DataFrame:
    """A copy's rows (live: ``soft_deletes`` marks added) and the table's rows whose keys they lack,
    marked deleted by ``txn`` (the copy's position), in the copy's columns (a column the table's
    rows lack is NULL in them); rows deleted before keep their marks."""
    deleted, at, by = soft_deletes.COLUMNS
    types = dict(MARK_COLUMNS)
    live = copied.select("*", *[(F.lit(False) if m == deleted else F.lit(None)).cast(types[m]).alias(m) for m in types])
    if not table_exists(spark, target):
        return live
    held = spark.read.format("delta").load(target.path)
    have = {f.name.lower() for f in held.schema.fields}
    if any(k.lower() not in have for k in keys):
        return live  # (a key new to the table: none of its rows can be told apart from the copy's)
    for m in types:
        if m not in have:  # a table made before it kept its deleted rows: its rows are live
            held = held.withColumn(m, F.lit(None).cast(types[m]))
    gone = held.join(copied.select(*[quote(k) for k in keys]), list(keys), "left_anti")
    was_live = ~F.coalesce(F.col(deleted), F.lit(False))
    return live.unionByName(gone.select(
        *_copy_columns(held, copied, types),
        F.lit(True).alias(deleted), F.when(was_live, F.lit(None).cast("timestamp")).otherwise(F.col(at)).alias(at),
        F.when(was_live, F.lit(txn)).otherwise(F.col(by)).alias(by)), allowMissingColumns=True)


def _copy_columns(held: DataFrame, copied: DataFrame, added: dict) -> list:
    """The table's rows (``held``) in the copy's columns (a column they lack NULL), then the columns
    the leader dropped that a history mode's table keeps (``tables.kept_changes``), as they are."""
    have = {f.name.lower() for f in held.schema.fields}
    names = {f.name.lower() for f in copied.schema.fields}
    return [*((F.col(quote(f.name)) if f.name.lower() in have else F.lit(None)).cast(f.dataType).alias(f.name)
              for f in copied.schema.fields),
            *(F.col(quote(f.name)) for f in held.schema.fields if f.name.lower() not in names and f.name not in added)]


def _with_versions(spark: SparkSession, target: DeltaTableRef, copied: DataFrame, keys, seq: int) -> DataFrame:
    """A copy of a history table (``history.copy_versions``, in Spark): the table's versions, those the
    copy no longer has or has with other values closed at ``seq`` (the copy's position, no time),
    and the copy's rows that are new or changed as versions opened there, in the copy's columns."""
    from_seq = F.expr(f"CAST({seq}BD AS DECIMAL(38,0))")
    types = dict(HISTORY_COLUMNS)

    def opened(rows: DataFrame) -> DataFrame:
        return rows.select("*", F.lit(None).cast("timestamp").alias(history.VALID_FROM), from_seq.alias(history.VALID_FROM_SEQ),
                           F.lit(None).cast("timestamp").alias(history.VALID_TO),
                           F.lit(None).cast(types[history.VALID_TO_SEQ]).alias(history.VALID_TO_SEQ),
                           F.lit(True).alias(history.CURRENT))

    if not table_exists(spark, target):
        return opened(copied)
    held = spark.read.format("delta").load(target.path)
    have = {f.name.lower() for f in held.schema.fields}
    for name, kind in HISTORY_COLUMNS:
        if name not in have:  # a table made before it kept its history: its rows are current
            held = held.withColumn(name, F.lit(None).cast(kind))
    is_current = F.coalesce(F.col(history.CURRENT), F.lit(True))
    if any(c.lower() not in have for c in copied.columns):  # (another shape: every row a new version)
        same = copied.select(*[quote(k) for k in keys]).limit(0)
    else:  # the keys whose current version has exactly the copy's values (NULL equal to NULL)
        now = held.where(is_current).select(*[F.col(quote(c)).alias(f"h_{i}") for i, c in enumerate(copied.columns)])
        pairs = now.join(copied, [F.col(f"h_{copied.columns.index(k)}") == F.col(quote(k)) for k in keys])
        equal = F.lit(True)
        for i, c in enumerate(copied.columns):
            equal = equal & F.col(f"h_{i}").eqNullSafe(F.col(quote(c)))
        same = pairs.where(equal).select(*[F.col(quote(k)) for k in keys])
    kept_keys = same.select(*[F.col(quote(k)).alias(f"k_{i}") for i, k in enumerate(keys)]).withColumn("__same", F.lit(True))
    marked = held.join(kept_keys, [F.col(quote(k)) == F.col(f"k_{i}") for i, k in enumerate(keys)], "left")
    gone = is_current & F.col("__same").isNull()
    versions = marked.select(
        *_copy_columns(held, copied, types),
        F.col(history.VALID_FROM), F.col(history.VALID_FROM_SEQ), F.col(history.VALID_TO),
        F.when(gone, from_seq).otherwise(F.col(history.VALID_TO_SEQ)).alias(history.VALID_TO_SEQ),
        (is_current & ~gone).alias(history.CURRENT))
    return versions.unionByName(opened(copied.join(same, list(keys), "left_anti")), allowMissingColumns=True)


def _refuse_empty_partition_strings(ref: DeltaTableRef, columns, rows: DataFrame) -> None:
    """``partition_values.refuse_empty_strings`` of rows to write (net rows: not their deletes),
    asked of Spark (a job, only for a table partitioned by a string column)."""
    strings = partition_values.string_partitions(ref, columns)
    if not strings:
        return
    written = F.col(cr.NET_OP) != cr.DELETE if cr.NET_OP in rows.columns else F.lit(True)
    partition_values.refuse_empty_strings(
        ref, strings, lambda column: bool(rows.where(written & (F.col(quote(column)) == "")).limit(1).count()))


class DeltaSegmentWriter(SegmentWriter[DeltaTableRef]):
    """One row segment into the lake: each table's net rows staged in the form its commit takes
    (``StagedRows``), then each table committed under the segment's transaction id, and the state
    row moved once all are."""

    def __init__(self, sink: DeltaSink, job: BatchJob, segment: RowSegment, expected: Checkpoint):
        super().__init__(job, segment, expected)
        self.sink = sink
        self._staged: dict[int, StagedRows] = {}  # by the table's index in the segment
        self._lock = threading.Lock()

    def apply(self, tables: list[NetRows[DeltaTableRef]]) -> None:
        for t in tables:
            if t.target.keeps_history:
                staged = self._stage_history(t)
            else:
                staged = self._stage_arrow(t) if t.on_driver() is not None else self._stage_frames(t)
            self._keep_log(staged, t)
            with self._lock:
                self._staged[t.index] = staged

    def _stage_frames(self, t: NetRows[DeltaTableRef]) -> StagedRows:
        rows = self._spark_rows(t).cache()
        _refuse_empty_partition_strings(t.target, t.table.columns, rows)  # (of the cached rows: no netting again)
        counts = _spark_copies_per_op(rows)
        # empty or not, as delta-rs read the table opening the segment: asking Spark (DESCRIBE
        # DETAIL) costs a job before the MERGE (10k updates into a 50k-row table by Spark: 4.6 s
        # with it, 3.7 s without)
        return StagedRows(t.table, t.target, t.report.count(counts), rows=rows, into_empty=self.sink._is_empty(t.table))

    def _stage_history(self, t: NetRows[DeltaTableRef]) -> StagedRows:
        """A history table's versions of the segment (``history.segment_versions``), from its change rows
        (netted by Spark: collected; every change is a version to write): appended into an empty table,
        merged by delta-rs into a small one, by Spark's MERGE into a large one. The report counts the
        net rows as for any table."""
        arrow = t.on_driver()
        changes = t.arrow_changes()
        if arrow is not None:
            counts = copies_per_op(arrow.net)
        else:
            net = t.in_spark(self.sink.spark()).net
            counts = _spark_copies_per_op(net)
        versions = history.segment_versions(changes, [c.name for c in t.table.columns], t.table.key_columns)
        staged = StagedRows(t.table, t.target, t.report.count(counts))
        if self.sink._is_empty(t.table):
            staged.appended = merges.delta_arrow(t.table, versions.added, history.COLUMNS)
        else:
            source = merges.history_source(t.table, versions)
            if self.sink.merges_in_driver(t.table):
                staged.history = source
            else:
                from ....merge.spark_read import spark_schema

                staged.rows = self.sink.spark().createDataFrame(source, schema=spark_schema(source.schema))
        return staged

    def _marks(self, t: NetRows[DeltaTableRef]) -> tuple[str, ...]:
        """The soft-delete marks the table's net rows carry (none unless it keeps its deleted rows)."""
        return soft_deletes.COLUMNS if t.target.keeps_deleted else ()

    def _deletion_marks(self, t: NetRows[DeltaTableRef]) -> pa.Table:
        """The marks of the table's deleting events (``soft_deletes.deletion_marks``)."""
        return soft_deletes.deletion_marks(t.arrow_changes(without_inserts=True),
                                           t.table.key_columns)

    def _spark_rows(self, t: NetRows[DeltaTableRef]) -> DataFrame:
        """The net rows as a DataFrame in Delta values, with the net op and count (and the marks of a
        table keeping its deleted rows: its deletes' from ``_deletion_marks``, joined by key)."""
        spark = self.sink.spark()
        net = t.in_spark(spark).net
        marks = self._marks(t)
        if marks:
            keys = list(t.table.key_columns)
            found = self._deletion_marks(t)
            found = spark.createDataFrame(found, schema=found.schema.remove_metadata()) if found.num_rows else \
                net.select(*[quote(k) for k in keys], *[F.lit(None).cast(kind).alias(m) for m, kind in MARK_COLUMNS[1:]]).limit(0)
            deleting = F.col(cr.NET_OP) == cr.DELETE
            net = net.join(found.select(*[F.col(quote(k)).cast(net.schema[k].dataType).alias(k) for k in keys],
                                        *marks[1:]), keys, "left").select(
                *[F.col(quote(c)) for c in net.columns], deleting.alias(marks[0]),
                *[F.when(deleting, F.col(m)).alias(m) for m in marks[1:]])
        return to_delta(net, t.table.columns, (cr.NET_OP, cr.NET_COUNT, *marks))

    def _stage_arrow(self, t: NetRows[DeltaTableRef]) -> StagedRows:
        """Rows netted on the driver: an empty table's appended and a small table's merged by
        delta-rs, with no Spark job; any other table's handed to Spark's MERGE."""
        net = t.on_driver().net
        marks = self._marks(t)
        if marks:
            net = soft_deletes.with_marks(net, self._deletion_marks(t), t.table.key_columns)
        written = pc.not_equal(net.column(cr.NET_OP), cr.DELETE)
        partition_values.refuse_empty_strings(
            t.target, partition_values.string_partitions(t.target, t.table.columns),
            lambda column: pc.any(pc.and_kleene(written, pc.equal(net.column(column), ""))).as_py() or False)
        staged = StagedRows(t.table, t.target, t.report.count(copies_per_op(net)))
        if self.sink._is_empty(t.table):
            staged.appended = merges.arrow_inserts(t.table, net, marks)
        elif self.sink.merges_in_driver(t.table):
            staged.merged = merges.delta_arrow(t.table, net, (cr.NET_OP, cr.NET_COUNT, *marks))
        else:
            staged.rows = self._spark_rows(t)
        return staged

    def _keep_log(self, staged: StagedRows, t: NetRows[DeltaTableRef]) -> None:
        """The table's changelog rows beside its net rows, when the table has a changelog."""
        table = t.table
        if self.sink.options.logs(table.database, table.table):
            log_rows = changelog.changelog_rows(t.in_spark(self.sink.spark()).changes, table.columns)
            log_table = self.sink.changelog_ref(self.job.batch.pipeline, table.database, table.table)
            # created here, outside the idempotent commit: only the append carries its transaction id
            changelog.follow(self.sink.spark(), log_table, log_rows.schema)
            staged.log = (log_table, log_rows)

    def commit(self, done: Checkpoint) -> dict[str, tuple[int, float]]:
        sink = self.sink
        row = sink._expect(self.expected)
        txn = merges.Txn(sink.app_id(self.job.batch), position_version(done.position))
        committed = _Committed(sink.versions_at(row))
        # Each table's commit is its own, idempotent under the segment's transaction id, and the
        # state row moves only after all of them: in what order, or how many at once, they commit
        # changes nothing a retry finds. delta-rs's commits run concurrently (on object storage a
        # commit of a few rows is mostly waiting for requests); Spark's, one after another beside
        # them, as the session's transaction id is one setting for all of them.
        by_spark, by_delta_rs = [], []
        for i in sorted(self._staged):
            s = self._staged[i]
            (by_spark if s.log is not None or s.rows is not None else by_delta_rs).append(s)
        with ThreadPoolExecutor(_COMMITTING_THREADS, thread_name_prefix="mysql-cdc delta commit") as pool:
            # (delta-rs's commits know each table's version in the cut: ``merges.done``)
            futures = [pool.submit(self._commit_one, s, replace(txn, cut_version=row.versions.get(s.target.name)),
                                   committed) for s in by_delta_rs]
            if by_spark:
                with sink.idempotent(txn.app_id, txn.version):
                    for s in by_spark:
                        self._commit_one(s, txn, committed)
            for future in futures:
                future.result()
        crash_point("before_checkpoint")
        sink.state.write_state(replace(row, checkpoint=done, versions=committed.versions))
        return committed.applied

    def _commit_one(self, s: StagedRows, txn: merges.Txn, committed: _Committed) -> None:
        started = time.monotonic()
        try:
            version = self._commit_retried(s, txn) if s.rows is None and s.log is None else self.sink.commit_table(s, txn)
        except Exception as exc:  # noqa: BLE001 - said again naming the table and the recovery
            raise TableCommitError.of(s.table.qualified_name, s.written, exc) from exc
        committed.add(s, version, time.monotonic() - started)
        crash_point("between_tables")

    def _commit_retried(self, s: StagedRows, txn: merges.Txn) -> int:
        """delta-rs's commit of one table, retried on a failure of S3 a retry may fix (``lake_retry``).
        The first try commits on the table as this segment opened it (nothing else writes it while
        the merge runs: one run of a pipeline at a time), which saves reading its log again, a
        request per commit since its last checkpoint; each retry opens the table afresh and first
        looks for its transaction id, so a commit that landed before its answer was lost is not made
        twice. (Spark's commits are retried by S3A.)"""
        tries = 0

        def attempt() -> int:
            nonlocal tries
            if tries:
                self.sink._opened.pop(s.table.qualified_name, None)
            tries += 1
            return self.sink.commit_table(s, txn)

        return lake_retry(f"commit {self.sink.location.table_uri(s.table.database, s.table.table)}", attempt)

    def discard(self) -> None:
        self.sink._opened.clear()
        self.sink._versions_ahead = None  # in the state row now, or replayed again by the retry
        with self._lock:
            staged, self._staged = list(self._staged.values()), {}
        for s in staged:
            if s.rows is not None:
                s.rows.unpersist()
