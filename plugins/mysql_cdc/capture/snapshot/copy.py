"""A snapshot batch, copied in chunks, in parallel, resumable after a crash.

``snapshot_tables`` copies the captured tables (or those a resnapshot names) into one snapshot
batch. The steps, each of which leaves something in the batch store that a retry reuses:

1. **Plan** (``plan.json``). The tables are listed, the leader's binlog position read, and the
   tables listed again until both lists agree: the position ``start`` then has exactly those
   tables, and the stream of the pipeline goes on from it. Each table is split into chunks by
   its first primary-key column when that is an integer (``split_bounds``: about ``split_rows``
   rows each, at even steps of a dense key, else found by walking the index); any other table is
   one chunk.
2. **Chunks** (a ``chunk-NNNNN.json`` record per chunk, written after its Parquet parts). Each
   chunk is read in its own read view (``LeaderSnapshot``) at its own binlog position ``at``, by
   a pool of worker processes. A crash loses only the chunks in flight: the retry finds the plan
   and the records, and copies the rest.
3. **Catch-up.** The chunks of a table were read at different positions. Its change rows between
   the earliest and the latest are extracted from the binlog (``extract_range``) into the batch;
   the merge applies to each chunk the ones after that chunk's own position, which brings the
   whole table to the latest (``merge.transforms.after_copies``). This is the watermark method of
   DBLog and Flink CDC, with exact positions where they use a window.
4. **Manifest**, last: the batch exists.

A table whose definition changes during its copy (DDL between its chunks, seen by the description
each chunk checks, or in its catch-up range) is planned and copied again. A table that vanishes
(dropped, or renamed away) restarts the whole copy from a new listing: the stream replays a
RENAME or a DROP only onto a follower that has the table as it was, which a copy started before
that statement cannot promise.

Why worker processes, not Airflow mapped tasks or threads: a worker also writes Parquet and
uploads it, and with ``decoder: python`` parses every row in Python holding the GIL, so threads
would not add a core;
mapped tasks would each pay a task start-up and need a second DAG shape for the same copy, while
a pool inside the extract task uses the task's cores with no new moving part in the DAG.
"""

from __future__ import annotations

import glob
import hashlib
import json
import re
import logging
import shutil
from concurrent.futures import as_completed
from dataclasses import asdict, dataclass, field, replace
from typing import Iterable, Iterator, Sequence
from urllib.parse import quote

import pymysql

from ...contracts import (
    BinlogPosition,
    ChangeBatch,
    ColumnSpec,
    PositionRange,
    RowSegment,
    SnapshotChunk,
    SnapshotSegment,
    TableChanges,
    batch_prefix,
    snapshot_batch_id,
    tables_digest,
)
from ...crash_points import crash_point
from ...mysql_server import MySQLSettings
from ...pipeline_options import SnapshotOptions
from ...storage import ObjectStore, StorageSpec, commit_batch, local_temp_dir
from ..stream.extract import PART_MANIFEST, BatchTarget, RangeRequest, extract_range
from ..filters import TableFilter
from ..leader import Leader
from .leader_snapshot import LeaderSnapshot, SnapshotError, SnapshotTableWriter, quote_name
from ..workers import worker_pool
from ..table_changes import WriterLimits

log = logging.getLogger(__name__)

# Errors that mean "the table is not what the plan saw": altered after the read view opened,
# dropped, a column dropped or renamed, its database dropped.
_TABLE_CHANGED_ERRORS = frozenset({1412, 1146, 1054, 1049})
_INTEGER_TYPES = frozenset({"tinyint", "smallint", "mediumint", "int", "bigint"})
_MAX_PLANS = 20  # a table re-planned this often keeps changing: give up with a clear error
PLAN_NAME = "plan.json"


# -- the plan ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TablePlan:
    """One table of the copy: its definition when planned (what every chunk must find) and its
    chunks' key ranges."""

    index: int
    database: str
    table: str
    fingerprint: str
    split_column: str | None
    bounds: tuple[tuple[int | None, int | None], ...]  # [lo, hi) per chunk; None is unbounded
    columns: tuple[ColumnSpec, ...] = ()
    key_columns: tuple[str, ...] = ()
    create_database: str = ""
    create_table: str = ""

    @property
    def qualified_name(self) -> str:
        return f"{self.database}.{self.table}"

    @property
    def rel_dir(self) -> str:
        return f"snap-{self.index:05d}"

    def to_json(self) -> dict:
        body = asdict(self)
        body["bounds"] = [list(b) for b in self.bounds]
        return body

    @classmethod
    def from_json(cls, data: dict) -> "TablePlan":
        return cls(**{**data, "bounds": tuple((lo, hi) for lo, hi in data["bounds"]),
                      "columns": tuple(ColumnSpec(**c) for c in data["columns"]),
                      "key_columns": tuple(data["key_columns"])})


@dataclass
class SnapshotPlan:
    pipeline: str
    batch_id: str
    start: BinlogPosition  # the tables below are exactly those the leader had here
    full: bool  # every table of the pipeline: the stream goes on from ``start``
    start_gtid_set: str | None  # the leader's executed GTID set at ``start``
    leader_id: str
    tables: list[TablePlan] = field(default_factory=list)

    @property
    def prefix(self) -> str:
        return batch_prefix(self.pipeline, self.batch_id)

    def save(self, store: ObjectStore) -> None:
        body = {"batch_id": self.batch_id, "start": str(self.start), "full": self.full,
                "start_gtid_set": self.start_gtid_set, "leader_id": self.leader_id,
                "tables": [t.to_json() for t in self.tables]}
        store.put_bytes(f"{self.prefix}/{PLAN_NAME}", json.dumps(body, indent=1).encode())

    @classmethod
    def load(cls, store: ObjectStore, pipeline: str, batch_id: str) -> "SnapshotPlan":
        body = json.loads(store.get_bytes(f"{batch_prefix(pipeline, batch_id)}/{PLAN_NAME}"))
        return cls(pipeline, body["batch_id"], BinlogPosition.parse(body["start"]), body["full"],
                   body["start_gtid_set"], body["leader_id"], [TablePlan.from_json(t) for t in body["tables"]])


def _in_progress_key(pipeline: str, digest: str) -> str:
    """Where an unfinished copy of these tables names its batch, so a retry finds it."""
    return f"{pipeline}/snapshots-in-progress/{digest}"


def fingerprint(definition: tuple) -> str:
    """What must not change between a table's chunks: key, database and table definitions (less
    the AUTO_INCREMENT counter, which moves with inserts, not with DDL)."""
    _, keys, create_database, create_table = definition
    text = "\n".join([",".join(keys), create_database, re.sub(r" AUTO_INCREMENT=\d+", "", create_table)])
    return hashlib.sha1(text.encode()).hexdigest()


def split_column(snapshot: LeaderSnapshot, database: str, table: str, keys: Sequence[str]) -> str | None:
    """The first primary-key column when it is an integer: chunks are ranges of it. (Text keys
    would need the server's collation to place a changed row in its chunk; they stay one chunk.)"""
    if not keys:
        return None
    return keys[0] if snapshot.data_type(database, table, keys[0]) in _INTEGER_TYPES else None


def split_bounds(snapshot: LeaderSnapshot, database: str, table: str, column: str | None, split_rows: int,
                 unique: bool) -> tuple[tuple[int | None, int | None], ...]:
    """Key ranges of about ``split_rows`` rows each (``unique``: the column is the whole primary
    key). The ranges cover every value, so a row inserted later still falls into one: the first
    starts and the last ends unbounded. How many rows a range holds matters for the copy's
    parallelism and for what a crash costs, never for its correctness."""
    if column is None:
        return ((None, None),)
    cuts = _even_cuts(snapshot, database, table, column, split_rows) if unique else None
    if cuts is None:
        cuts = _index_cuts(snapshot, database, table, column, split_rows)
    edges = [None, *cuts, None]
    return tuple(zip(edges[:-1], edges[1:]))


_DENSE = 2.0  # key values per row up to which a key is split by arithmetic


def _even_cuts(snapshot: LeaderSnapshot, database: str, table: str, column: str, split_rows: int) -> list[int] | None:
    """Cuts at even steps between the key's least and greatest value, when the key is dense
    (at most ``_DENSE`` values per row by the server's row estimate): two index lookups, where
    walking the index reads every entry, 0.9 s of 5M rows before the first chunk starts. As
    Flink CDC does, with the same fall-back (None) for a sparse key or a missing estimate."""
    target, key = f"{quote_name(database)}.{quote_name(table)}", quote_name(column)
    with snapshot.conn.cursor() as cur:
        cur.execute(f"SELECT MIN({key}), MAX({key}) FROM {target}")
        low, high = cur.fetchone()
        cur.execute("SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
                    (database, table))
        estimate = int((cur.fetchone() or (0,))[0] or 0)
    if low is None:
        return []  # empty: one chunk
    span = int(high) - int(low) + 1
    if estimate < 1 or span > _DENSE * estimate:
        return None
    chunks = -(-estimate // split_rows)
    step = -(-span // chunks)
    return [int(low) + step * i for i in range(1, chunks)]


def _index_cuts(snapshot: LeaderSnapshot, database: str, table: str, column: str, split_rows: int) -> list[int]:
    """Cuts ``split_rows`` index entries apart, found by walking the key's index (``LIMIT 1
    OFFSET n``: the server counts index entries, no rows come back)."""
    target, key = f"{quote_name(database)}.{quote_name(table)}", quote_name(column)
    cuts: list[int] = []
    with snapshot.conn.cursor() as cur:
        while True:
            where = f"WHERE {key} >= %s " if cuts else ""
            cur.execute(f"SELECT {key} FROM {target} {where}ORDER BY {key} LIMIT 1 OFFSET {int(split_rows)}",
                        (cuts[-1],) if cuts else None)
            row = cur.fetchone()
            if row is None:
                break
            cut = int(row[0])
            if cuts and cut <= cuts[-1]:  # more than split_rows rows share the value (a composite key)
                cur.execute(f"SELECT MIN({key}) FROM {target} WHERE {key} > %s", (cuts[-1],))
                following = cur.fetchone()[0]
                if following is None:
                    break
                cut = int(following)
            cuts.append(cut)
    return cuts


# -- one chunk, in a worker ----------------------------------------------------------------------


@dataclass(frozen=True)
class ChunkTask:
    """Everything a worker process needs to copy one chunk (plain values: it is pickled)."""

    settings: MySQLSettings
    storage: StorageSpec
    flavor: str
    prefix: str
    table: TablePlan
    chunk: int
    limits: WriterLimits
    decoder: str  # SnapshotOptions.decoder

    @property
    def record_key(self) -> str:
        return chunk_record_key(self.prefix, self.table, self.chunk)


def chunk_record_key(prefix: str, table: TablePlan, chunk: int) -> str:
    return f"{prefix}/{table.rel_dir}/chunk-{chunk:05d}.json"


@dataclass(frozen=True)
class ChunkRecord:
    """A copied chunk (written last, after its files), or the news that the table changed."""

    at: BinlogPosition | None = None
    row_count: int = 0
    files: tuple[str, ...] = ()
    changed: bool = False  # the table is not the one planned: plan it again

    def to_json(self) -> bytes:
        return json.dumps({"at": str(self.at), "row_count": self.row_count, "files": list(self.files)}).encode()

    @classmethod
    def from_json(cls, data: bytes) -> "ChunkRecord":
        body = json.loads(data)
        return cls(BinlogPosition.parse(body["at"]), int(body["row_count"]), tuple(body["files"]))


def _chunk_filter(column: str | None, lo: int | None, hi: int | None) -> tuple[str, tuple]:
    conditions, args = [], []
    if lo is not None:
        conditions.append(f"{quote_name(column)} >= %s")
        args.append(lo)
    if hi is not None:
        conditions.append(f"{quote_name(column)} < %s")
        args.append(hi)
    return " AND ".join(conditions), tuple(args)


def copy_chunk(task: ChunkTask) -> ChunkRecord:
    """Read one chunk in a read view of its own and write its Parquet parts, then its record.

    The table is described before the view opens and again after the read: information_schema
    and SHOW CREATE are not part of the view and an instant ALTER does not stop a consistent
    read, so only "the planned definition before and after" proves the rows have that shape."""
    plan, store = task.table, task.storage.open()
    lo, hi = plan.bounds[task.chunk]
    rel_dir = f"{plan.rel_dir}/{quote(plan.database, safe='')}.{quote(plan.table, safe='')}/chunk-{task.chunk:05d}"
    store.delete_prefix(f"{task.prefix}/{rel_dir}/")  # a crashed attempt's parts of this chunk
    tmp_dir = local_temp_dir()
    try:
        with LeaderSnapshot(task.settings, task.flavor) as snapshot:
            definition = snapshot.describe(plan.database, plan.table)
            if not definition[0] or fingerprint(definition) != plan.fingerprint:
                return ChunkRecord(changed=True)
            at = snapshot.open_read_view()
            writer = SnapshotTableWriter(store, task.prefix, rel_dir, definition[0], tmp_dir, task.limits)
            try:
                where, args = _chunk_filter(plan.split_column, lo, hi)
                snapshot.copy(plan.database, plan.table, definition[0], writer, task.limits, where, args,
                              task.decoder)
                files, rows = writer.finish()
            except BaseException:
                writer.discard()
                raise
            if fingerprint(snapshot.describe(plan.database, plan.table)) != plan.fingerprint:
                return ChunkRecord(changed=True)
    except pymysql.err.MySQLError as exc:
        if exc.args and exc.args[0] in _TABLE_CHANGED_ERRORS:
            return ChunkRecord(changed=True)
        raise
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)
    record = ChunkRecord(at, rows, files)
    store.put_bytes(task.record_key, record.to_json())
    return record


# -- the copy ------------------------------------------------------------------------------------


class _Copy:
    """One snapshot batch being made: plan, chunks, catch-ups, manifest."""

    def __init__(self, settings: MySQLSettings, storage: StorageSpec, store: ObjectStore, flavor: str,
                 pipeline: str, table_filter: TableFilter, only: Sequence[str] | None, limits: WriterLimits,
                 options: SnapshotOptions):
        self.settings, self.storage, self.store, self.flavor = settings, storage, store, flavor
        self.pipeline, self.table_filter, self.only = pipeline, table_filter, only
        self.limits, self.options = limits, options
        self.digest = tables_digest(list(only) if only is not None else ["*"])
        self.plans_made: dict[int, int] = {}

    # plan

    def _listing(self) -> tuple[list[tuple[str, str]], BinlogPosition, bool, str | None, str]:
        """The tables at one binlog position: listed before and after reading it, until equal;
        with the GTID set at that position and the leader's id."""
        with LeaderSnapshot(self.settings, self.flavor) as snapshot, Leader(self.settings) as leader:
            for _ in range(_MAX_PLANS):
                listed = snapshot.tables(self.table_filter, self.only)
                start = leader.current_position()
                if snapshot.tables(self.table_filter, self.only) == listed:
                    break
            else:
                raise SnapshotError("the leader's tables kept being created or dropped while the copy was planned; "
                                    "retry the run when fewer schema changes are running")
            if self.only is not None and not listed:
                raise SnapshotError(
                    f"no captured table matches {sorted(self.only)}: name tables as db.table (globs allowed) "
                    "among the pipeline's include globs"
                )
            full = self.only is None or set(listed) == set(snapshot.tables(self.table_filter))
            return listed, start, full, leader.gtid_set_at(start), leader.leader_id

    def plan_table(self, index: int, database: str, table: str) -> TablePlan:
        """The table's chunks as it is now (``_Vanished`` when it no longer exists)."""
        with LeaderSnapshot(self.settings, self.flavor) as snapshot:
            try:
                definition = snapshot.describe(database, table)
                if not definition[0]:
                    raise _Vanished()
                column = split_column(snapshot, database, table, definition[1])
                bounds = split_bounds(snapshot, database, table, column, self.options.split_rows,
                                      unique=len(definition[1]) == 1)
            except pymysql.err.MySQLError as exc:
                if exc.args and exc.args[0] in _TABLE_CHANGED_ERRORS:
                    raise _Vanished() from None
                raise
        columns, keys, create_database, create_table = definition
        return TablePlan(index, database, table, fingerprint(definition), column, bounds,
                         tuple(c.spec for c in columns), keys, create_database, create_table)

    def plan(self, resume: bool = True) -> SnapshotPlan:
        """The unfinished copy of the same tables, if a crash left one; else a new plan."""
        pointer = _in_progress_key(self.pipeline, self.digest)
        if resume and self.store.exists(pointer):
            batch_id = self.store.get_bytes(pointer).decode()
            if self.store.exists(f"{batch_prefix(self.pipeline, batch_id)}/{PLAN_NAME}"):
                log.info("snapshot %s: resuming the unfinished copy %s", self.pipeline, batch_id)
                return SnapshotPlan.load(self.store, self.pipeline, batch_id)
        listed, start, full, start_gtid_set, leader_id = self._listing()
        batch_id = snapshot_batch_id(start, list(self.only) if self.only is not None else ["*"])
        plan = SnapshotPlan(self.pipeline, batch_id, start, full, start_gtid_set, leader_id)
        self.store.delete_prefix(f"{plan.prefix}/")
        plan.tables = [self.plan_table(index, database, table) for index, (database, table) in enumerate(listed)]
        plan.save(self.store)
        self.store.put_bytes(pointer, batch_id.encode())
        crash_point("copy_planned")
        return plan

    # chunks

    def records(self, plan: SnapshotPlan, table: TablePlan) -> dict[int, ChunkRecord]:
        found = {}
        for chunk in range(len(table.bounds)):
            key = chunk_record_key(plan.prefix, table, chunk)
            if self.store.exists(key):
                found[chunk] = ChunkRecord.from_json(self.store.get_bytes(key))
        return found

    def copy_chunks(self, tasks: list[ChunkTask]) -> Iterator[tuple[ChunkTask, ChunkRecord]]:
        """Each task's record as its chunk is copied."""
        if len(tasks) <= 1 or self.options.workers == 1:
            for task in tasks:
                yield task, copy_chunk(task)
                crash_point("copy_after_chunk")
            return
        with worker_pool(min(self.options.workers, len(tasks))) as pool:
            futures = {pool.submit(copy_chunk, task): task for task in tasks}
            for future in as_completed(futures):
                yield futures[future], future.result()
                crash_point("copy_after_chunk")

    def replan(self, plan: SnapshotPlan, table: TablePlan) -> None:
        """The table changed during its copy: drop its chunks and plan it again."""
        made = self.plans_made[table.index] = self.plans_made.get(table.index, 0) + 1
        if made >= _MAX_PLANS:
            raise SnapshotError(
                f"{table.qualified_name} kept changing definition during its copy ({made} plans); retry the run "
                "when fewer schema changes are running"
            )
        log.info("snapshot %s: %s changed during its copy; copying it again", self.pipeline, table.qualified_name)
        self.store.delete_prefix(f"{plan.prefix}/{table.rel_dir}/")
        plan.tables[table.index] = self.plan_table(table.index, table.database, table.table)
        plan.save(self.store)

    # segments

    def catch_up(self, plan: SnapshotPlan, table: TablePlan, chunks: Sequence[SnapshotChunk]) -> TableChanges | None:
        """The table's change rows between its earliest and latest chunk; raises _Changed when
        that range holds DDL on the table (its chunks do not all have one shape)."""
        first, last = min(c.at for c in chunks), max(c.at for c in chunks)
        if first == last:
            return None
        rel = f"{table.rel_dir}/catch-up"
        request = RangeRequest(self.pipeline, PositionRange(first, last),
                               TableFilter((glob.escape(table.qualified_name),)), track_gtids=False)
        batch = extract_range(self.settings, request, BatchTarget(self.store, prefix=f"{plan.prefix}/{rel}",
                                                                  manifest_name=PART_MANIFEST),
                              limits=self.limits)
        if batch is None:
            return None
        if any(not isinstance(s, RowSegment) for s in batch.segments) or len(batch.segments) > 1:
            raise _Changed()
        if not batch.segments:
            return None
        (changes,) = batch.segments[0].tables
        return replace(changes, files=tuple(f"{rel}/{f}" for f in changes.files))

    def segment(self, plan: SnapshotPlan, table: TablePlan, records: dict[int, ChunkRecord]) -> SnapshotSegment:
        chunks = tuple(SnapshotChunk(i, lo, hi, records[i].at, records[i].row_count)
                       for i, (lo, hi) in enumerate(table.bounds))
        return SnapshotSegment(
            index=table.index, at=max(c.at for c in chunks), database=table.database, table=table.table,
            create_database=table.create_database, create_table=table.create_table, columns=table.columns,
            key_columns=table.key_columns, files=tuple(f for i in range(len(chunks)) for f in records[i].files),
            row_count=sum(c.row_count for c in chunks), full=plan.full, split_column=table.split_column,
            chunks=chunks, catch_up=self.catch_up(plan, table, chunks),
        )

    # the whole copy

    def copy(self, plan: SnapshotPlan) -> list[SnapshotSegment]:
        """Every table's segment: its missing chunks copied, tables that changed copied again."""
        segments: dict[int, SnapshotSegment] = {}
        while len(segments) < len(plan.tables):
            pending = [t for t in plan.tables if t.index not in segments]
            done = {t.index: self.records(plan, t) for t in pending}
            tasks = [ChunkTask(self.settings, self.storage, self.flavor, plan.prefix, t, c, self.limits,
                               self.options.decoder)
                     for t in pending for c in range(len(t.bounds)) if c not in done[t.index]]
            changed = set()
            for task, record in self.copy_chunks(tasks):
                if record.changed:
                    changed.add(task.table.index)
                else:
                    done[task.table.index][task.chunk] = record
            for table in pending:
                try:
                    if table.index not in changed:
                        segments[table.index] = self.segment(plan, table, done[table.index])
                        continue
                except _Changed:
                    pass
                self.replan(plan, table)
        return [segments[i] for i in range(len(plan.tables))]

    def run(self) -> ChangeBatch:
        for attempt in range(_MAX_PLANS):
            try:
                # a new listing after a table vanished (its chunks of other tables are from a
                # plan whose tables are not the leader's any more)
                plan = self.plan(resume=attempt == 0)
                segments = self.copy(plan)
                break
            except _Vanished:
                log.info("snapshot %s: a table being copied was dropped or renamed; the copy starts over",
                         self.pipeline)
        else:
            raise SnapshotError(f"tables kept being dropped or renamed during the copy ({_MAX_PLANS} listings); "
                                "retry the run when fewer schema changes are running")
        crash_point("copy_before_manifest")
        for s in segments:
            log.info("snapshot %s: %s, %d rows in %d chunk%s, at %s", self.pipeline, s.qualified_name, s.row_count,
                     len(s.chunks), "" if len(s.chunks) == 1 else "s", s.at)
        batch = ChangeBatch(
            pipeline=self.pipeline, batch_id=plan.batch_id, start=plan.start,
            end=max([plan.start, *(s.at for s in segments)]), segments=tuple(segments), server_flavor=self.flavor,
            row_count=sum(s.row_count for s in segments), start_gtid_set=plan.start_gtid_set,
            leader_id=plan.leader_id,
        )
        commit_batch(self.store, plan.prefix, batch)
        self.store.delete_prefix(_in_progress_key(self.pipeline, self.digest))
        return batch


class _Vanished(Exception):
    """A table of the plan no longer exists (dropped, or renamed away)."""


class _Changed(Exception):
    """The table's definition changed during its copy."""


def snapshot_tables(settings: MySQLSettings, storage: StorageSpec, pipeline: str, table_filter: TableFilter,
                    only: Iterable[str] | None = None, limits: WriterLimits = WriterLimits(),
                    options: SnapshotOptions = SnapshotOptions(), store: ObjectStore | None = None) -> ChangeBatch:
    """Copy the captured tables (all of them, or those matching the globs ``only``) into one
    snapshot batch whose manifest is written last; a retry after a crash resumes the same copy.
    ``store``: the already open ``storage`` (the worker processes open their own)."""
    with Leader(settings) as leader:
        leader.check_settings()
        flavor = leader.flavor
    only = sorted(only) if only is not None else None
    copy = _Copy(settings, storage, store or storage.open(), flavor, pipeline, table_filter, only, limits, options)
    return copy.run()
