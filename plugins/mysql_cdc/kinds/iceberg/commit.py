"""One Iceberg table's commit of a row segment's net rows (``TableCommit``).

The commit API, as Iceberg's own (``Transaction``, a snapshot producer): the table is read at its
current snapshot, what changes is staged (data files to remove, rows to add), and the commit is one
``overwrite`` snapshot that the catalog accepts only while that snapshot is still the table's
current one (pyiceberg asserts the branch's snapshot id): a reader sees the table before the
segment or after it, never half of it.

Exactly once: the snapshot summary carries the pipeline's app id (pipeline and leader) and the
binlog position the commit brings the table to (``CommitId``), as Flink's Iceberg committer carries
its checkpoint id. A retry after a crash finds the app's last position in the table's history
(``committed_position``) and skips a table that already holds the segment.

A keyed table's changed rows leave their files through position delete files when the table
merges on read (``write.merge.mode``, what the follower creates its tables with: ``row_delta``):
only the key columns of the files that may hold a key are read. Every other change (a keyless
table's multiset, a history or soft-delete table's closed or marked rows, a filled column, a
compaction) rewrites the files holding the rows it changes (copy-on-write), their position deletes
applied.
"""

from __future__ import annotations

import itertools
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from ...contracts import BinlogPosition
from ...contracts import change_row as cr
from ...merge import history, soft_deletes
from ...merge.multiset import COPIES, SIDE, keyless_rewrite

if TYPE_CHECKING:
    from pyiceberg.manifest import DataFile
    from ...merge.history import SegmentVersions
    from pyiceberg.table import Table

SUMMARY_APP = "mysql-cdc.app"
SUMMARY_POSITION = "mysql-cdc.position"


def snapshot_total(table, name: str) -> int | None:
    """A total the table's current snapshot summary keeps (``total-data-files``,
    ``total-delete-files``, ...): 0 for a table without snapshots, None when the summary lacks it."""
    snapshot = table.current_snapshot()
    if snapshot is None:
        return 0
    value = snapshot.summary.get(name) if snapshot.summary is not None else None
    return None if value is None else int(value)


@dataclass(frozen=True)
class CommitId:
    """What a table's commit carries in its snapshot summary: the app (``mysql-cdc/<pipeline>/<leader>``:
    positions of two leaders do not compare) and the binlog position the commit brings the table to."""

    app: str
    position: BinlogPosition

    def summary(self) -> dict[str, str]:
        return {SUMMARY_APP: self.app, SUMMARY_POSITION: str(self.position)}


def committed_position(table: "Table", app: str) -> BinlogPosition | None:
    """The position of ``app``'s latest commit in the table's history: the current snapshot's
    summary, else its ancestors' (a compaction or another writer may have committed since); None
    when the app never committed to it."""
    from pyiceberg.table.snapshots import ancestors_of

    for snapshot in ancestors_of(table.current_snapshot(), table.metadata):
        properties = snapshot.summary.additional_properties if snapshot.summary else {}
        if properties.get(SUMMARY_APP) == app:
            return BinlogPosition.parse(properties[SUMMARY_POSITION])
    return None


@dataclass
class TableCommit:
    """A commit of one table in the making: ``table`` as loaded (its current snapshot is the state
    the commit expects), the ``commit_id`` it will carry. ``upsert`` and ``rewrite_multiset`` stage
    net rows (already in Iceberg values, ``types.to_iceberg``, with the net op and copies);
    ``commit`` makes them one snapshot."""

    table: "Table"
    commit_id: CommitId | None  # None: a commit that brings no change of the leader (a compaction)
    _removed: list["DataFile"] = field(default_factory=list)
    _rewritten: list[pa.Table] = field(default_factory=list)  # the removed files' rows that stay
    _added: list[pa.Table] = field(default_factory=list)
    _schema_change: object = None  # update_schema -> None, applied in the commit (``replace``)
    _deleted_positions: list[tuple["DataFile", pa.Array]] = field(default_factory=list)  # merge-on-read
    _drop_delete_files: bool = False  # a compaction that rewrote every file a delete file applies to

    @property
    def done(self) -> bool:
        """Whether the table holds this commit already (a retry's)."""
        assert self.commit_id is not None, "only a commit carrying a position can be done already"
        last = committed_position(self.table, self.commit_id.app)
        return last is not None and not last < self.commit_id.position

    def _has_files(self) -> bool:
        """Whether the table's current snapshot has data files (its summary counts them; a summary
        without the count may have some)."""
        total = snapshot_total(self.table, "total-data-files")
        return total is None or total > 0

    def _holding(self, row_filter) -> list:
        """The scan tasks of the files that may hold rows matching ``row_filter`` (by their column
        statistics), and the rows of all of them. A table without data files (just created, or
        emptied) holds none: nothing is planned or read."""
        tasks = self._planned(row_filter)
        return tasks, self._rows(tasks)

    def _rows(self, tasks: list) -> pa.Table | None:
        """The rows of these scan tasks' files, their position deletes applied (the tasks carry
        them); None: no task."""
        from pyiceberg.io.pyarrow import ArrowScan
        from pyiceberg.expressions import AlwaysTrue

        if not tasks:
            return None
        return ArrowScan(self.table.metadata, self.table.io, self.table.schema(), AlwaysTrue()).to_table(tasks)

    def _planned(self, row_filter) -> list:
        """The scan tasks of the files that may hold rows matching ``row_filter``, each with the
        delete files that apply to it."""
        from .row_delta import has_equality_deletes

        if not self._has_files():
            return []
        tasks = list(self.table.scan(row_filter=row_filter).plan_files())
        if has_equality_deletes(tasks):
            # another engine's equality deletes: which rows they delete is known only by reading them all
            raise RuntimeError(f"{'.'.join(self.table.name())}: has equality delete files (written by another engine); "
                               "rewrite its data files (Spark: CALL system.rewrite_data_files) and keep other "
                               "writers to position deletes")
        return tasks

    def upsert(self, net: pa.Table, keys: Sequence[str], keep_deleted: bool = False) -> None:
        """Stage a keyed table's net rows: the rows of their keys leave the files holding them, and
        every net row but a delete is added (an update is its key's row replaced; a key change is
        a delete of the old key and an insert of the new). ``keep_deleted`` (soft deletes: the net
        rows carry ``merge.soft_deletes.with_marks``'s columns): a deleted key's row stays, marked
        with its delete's time and transaction.

        In a table that merges on read, a file of ``row_delta.min_file_bytes`` or more (1 MiB unless
        the table's properties say otherwise) keeps its rows and gets a position delete file naming
        the replaced ones; a smaller file is rewritten. (Measured,
        ``docs/performance.md``: rewriting a file that small costs what its delete file costs, and a
        delete file adds a manifest to every later commit's planning until the maintenance job folds
        it in; the recent, small files are where most updates land.)"""
        if not net.num_rows:
            return
        from .row_delta import merges_on_read, min_file_bytes, positions_of

        keys = list(keys)
        deletes = pc.equal(net.column(cr.NET_OP), cr.DELETE)
        # the files whose statistics may hold one of the keys, by the first key column (a superset
        # for a composite key); the rows themselves are matched on every key column below
        tasks = self._planned(_may_hold(net.column(keys[0]), keys[0]))
        if not keep_deleted and merges_on_read(self.table):
            smallest = min_file_bytes(self.table)
            for task in tasks:
                if task.file.file_size_in_bytes >= smallest:
                    positions = positions_of(self.table, task, net.select(keys))
                    if len(positions):
                        self._deleted_positions.append((task.file, positions))
            tasks = [task for task in tasks if task.file.file_size_in_bytes < smallest]
        held = self._rows(tasks)
        if held is not None:
            # rows of other keys stay; the rows of the net rows' keys are replaced by them
            self._removed += [task.file for task in tasks]
            self._rewritten.append(held.join(net.select(keys), keys=keys, join_type="left anti")
                                   .select(held.column_names))
            if keep_deleted:
                self._rewritten.append(_marked_deleted(held, net.filter(deletes), keys))
        columns = [n for n in net.column_names if not n.startswith(cr.RESERVED_PREFIX)]
        # (a filter copies every row: 7-48 ms for 800k rows, where a table's first rows have no delete)
        self._added.append((net.filter(pc.invert(deletes)) if pc.any(deletes).as_py() else net).select(columns))

    def apply_history(self, versions: "SegmentVersions", keys: Sequence[str]) -> None:
        """Stage a history table's versions of the segment (``merge.history.segment_versions``, in the
        table's values and spelling): the current version of each key it touches closed, the files
        holding one rewritten, and its versions added."""
        keys = list(keys)
        closing = versions.closing
        if closing.num_rows:
            tasks, held = self._holding(_may_hold(closing.column(keys[0]), keys[0]))
            if held is not None:
                self._removed += [task.file for task in tasks]
                self._rewritten.append(history.closed(held, closing, keys))
        self._added.append(versions.added)

    def close_all(self, seq: int) -> None:
        """Stage every current version of a history table closed at ``seq`` (a TRUNCATE's position;
        no time: the binlog gives none for it)."""
        from pyiceberg.expressions import AlwaysTrue

        tasks, held = self._holding(AlwaysTrue())
        if held is None:
            return
        self._removed += [task.file for task in tasks]
        self._rewritten.append(history.closed_all(held, seq))

    def mark_all_deleted(self, txn: str) -> None:
        """Stage every live row marked deleted by ``txn`` (a TRUNCATE of a table keeping its deleted
        rows: ``merge.soft_deletes``); rows deleted before keep their marks."""
        from pyiceberg.expressions import AlwaysTrue

        tasks, held = self._holding(AlwaysTrue())
        if held is None:
            return
        self._removed += [task.file for task in tasks]
        self._rewritten.append(soft_deletes.marked_removed(held, None, txn))

    def rewrite_multiset(self, net: pa.Table, names: Sequence[str]) -> None:
        """Stage a keyless table's net rows: its rows as a multiset, each row value held as many
        times as the leader holds it (``merge.multiset.keyless_rewrite``); the files holding a
        touched row value are rewritten."""
        from pyiceberg.expressions import AlwaysTrue

        if not net.num_rows:
            return
        names = list(names)
        # no column to prune files by: a keyless table (small by nature of the driver's path) is read whole
        tasks, held = self._holding(AlwaysTrue())
        if held is None:
            held = pa.Table.from_pylist([], schema=net.select(names).schema)
        grouped = held.select(names).group_by(names, use_threads=False).aggregate([([], "count_all")])
        counts = pa.table([*grouped.select(names).columns, grouped.column("count_all")], names=[*names, COPIES])
        plan = keyless_rewrite(net, counts, names)
        if not plan.num_rows:
            return  # the batch's inserts and deletes of each value cancel out
        removed = plan.filter(pc.equal(plan.column(SIDE), "del")).select(names)
        if tasks:
            self._removed += [task.file for task in tasks]
            # NULLs equal, as the leader's equal rows are equal: a join would not match them
            self._rewritten.append(_without_values(held.select(names), removed))
        self._added.append(plan.filter(pc.equal(plan.column(SIDE), "ins")).select(names))

    def remove_all(self) -> None:
        """Stage every row's removal (a TRUNCATE): the table's files leave it, none is rewritten."""
        from pyiceberg.expressions import AlwaysTrue

        if self.table.current_snapshot() is not None:
            self._removed += [task.file for task in self.table.scan(row_filter=AlwaysTrue()).plan_files()]

    def fill(self, column: str, value: pa.Scalar, held_now=None) -> None:
        """Stage every row rewritten with ``value`` in ``column`` (an added column's value in the rows
        the leader held when it added it); ``held_now`` (rows -> a mask): in a history mode's table,
        the rows the leader holds (its deleted rows and earlier versions never had the column)."""
        from pyiceberg.expressions import AlwaysTrue

        tasks, held = self._holding(AlwaysTrue())
        if held is None:
            return
        self._removed += [task.file for task in tasks]
        index = held.column_names.index(column)
        filled = pa.array([value.as_py()] * held.num_rows, held.schema.field(index).type)
        if held_now is not None:
            filled = pc.if_else(held_now(held), filled, held.column(index))
        self._rewritten.append(held.set_column(index, column, filled))

    def rewrite(self, tasks: list, drop_delete_files: bool = False) -> None:
        """Stage the rows of these scan tasks' files written again, their position deletes applied
        (a compaction: the same rows, in files of the table's target size); ``drop_delete_files``:
        every file a delete file applies to is among them, so the table's delete files go."""
        self._removed += [task.file for task in tasks]
        rows = self._rows(tasks)
        if rows is not None:
            self._rewritten.append(rows)
        self._drop_delete_files = drop_delete_files

    def replace(self, rows: pa.Table, schema_change=None) -> None:
        """Stage the table's rows replaced by ``rows`` (a copy), and ``schema_change(update_schema)``
        applied in the same commit: readers see the old table or the copy, never a part of it."""
        self.remove_all()
        self._added.append(rows)
        self._schema_change = schema_change

    def commit(self) -> int | None:
        """Commit what was staged as one snapshot carrying the commit id; returns its id (None:
        nothing staged). The catalog refuses it (pyiceberg's ``CommitFailedException``) when the
        table's current snapshot is no longer the one it was loaded at."""
        from pyiceberg.io.pyarrow import _dataframe_to_data_files
        from .row_delta import RowDelta, write_position_deletes

        if (not self._removed and not any(t.num_rows for t in self._added) and self._schema_change is None
                and not self._deleted_positions and not self._drop_delete_files):
            return None
        # a file both rewritten and deleted from by position would have its replaced rows written
        # back with the rewrite: one commit stages one of the two per file (each operation above
        # plans the table as loaded, so two of them in one commit are not meant to meet)
        assert not {f.file_path for f in self._removed} & {f.file_path for f, _ in self._deleted_positions}
        tx = _without_retries(self.table).transaction()
        if self._schema_change is not None:
            with tx.update_schema() as update:
                self._schema_change(update)
        write_uuid, counter = uuid.uuid4(), itertools.count(0)
        schema = tx.table_metadata.schema()
        rows = [conform(t, schema) for t in (*self._rewritten, *self._added) if t.num_rows]
        summary = self.commit_id.summary() if self.commit_id is not None else {}
        delete_files = [write_position_deletes(self.table, data_file, positions, write_uuid, number)
                        for number, (data_file, positions) in enumerate(self._deleted_positions)]
        with RowDelta(tx, self.table.io, summary, write_uuid, delete_files, self._drop_delete_files) as overwrite:
            for data_file in self._removed:
                overwrite.delete_data_file(data_file)
            if rows:
                for data_file in _dataframe_to_data_files(tx.table_metadata, pa.concat_tables(rows), self.table.io,
                                                          write_uuid=write_uuid, counter=counter):
                    overwrite.append_data_file(data_file)
        self.table = tx.commit_transaction()
        return self.table.current_snapshot().snapshot_id


# up to this many net rows, files are pruned by their keys themselves (``In``); beyond it by the
# keys' range: pyiceberg builds and binds one literal per value of an ``In`` (about 0.25 ms each,
# 40 s of a 160k-key merge), and a file's min/max statistics rarely tell the two apart when the
# keys are that many. (Counted in rows, not distinct keys: a keyed table's net rows hold each key
# once, and finding the distinct values of a million keys alone costs 0.14 s.)
IN_PRUNING_KEYS = 1_000


def _may_hold(keys: pa.ChunkedArray, name: str):
    """A row filter that every row of ``keys`` matches, for pruning files by their statistics."""
    from pyiceberg.expressions import And, GreaterThanOrEqual, In, LessThanOrEqual

    if len(keys) <= IN_PRUNING_KEYS:
        return In(name, pc.unique(keys).to_pylist())
    bounds = pc.min_max(keys)
    return And(GreaterThanOrEqual(name, bounds["min"].as_py()), LessThanOrEqual(name, bounds["max"].as_py()))


def _marked_deleted(held: pa.Table, deleted: pa.Table, keys: list[str]) -> pa.Table:
    """The rows of ``held`` whose key a net delete of ``deleted`` (with its marks) deletes, marked
    as it says: the row's values as they were, ``_deleted`` true, its time and transaction."""
    marks = soft_deletes.COLUMNS
    kept = held.select([n for n in held.column_names if n not in marks])
    gone = kept.join(deleted.select([*keys, *marks]), keys=keys, join_type="inner", use_threads=False)
    return gone.select(held.column_names)


def _without_retries(table: "Table") -> "Table":
    """``table`` as loaded, for a transaction that pyiceberg does not retry. pyiceberg retries a
    refused commit on the table's new state (its ``commit.retry.num-retries``, 4 by default), but
    what this commit removes and adds was planned from the state it was loaded at: a retry re-plans
    from the segment's start instead (the merge job's). The property is changed on this copy only
    (the catalog applies the commit's updates to its own metadata), not on the table, whose other
    writers keep their retries."""
    from pyiceberg.table import Table, TableProperties

    metadata = table.metadata.model_copy(
        update={"properties": {**table.metadata.properties, TableProperties.COMMIT_NUM_RETRIES: "0"}})
    return Table(table._identifier, metadata, table.metadata_location, table.io, table.catalog)


def conform(rows: pa.Table, iceberg_schema) -> pa.Table:
    """``rows`` with the columns of ``iceberg_schema`` (a table's), spelled and typed as the table has
    them (matched without case, as MySQL's names are): a column the rows lack (one added since the
    rows' batch) is NULL."""
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    schema = schema_to_pyarrow(iceberg_schema, include_field_ids=False)
    by_name = {n.lower(): n for n in rows.column_names}
    arrays = [rows.column(by_name[f.name.lower()]).cast(f.type) if f.name.lower() in by_name
              else pa.nulls(rows.num_rows, f.type) for f in schema]
    return pa.Table.from_arrays(arrays, schema=schema)


def spelling(table: "Table"):
    """A column name as the table spells it (MySQL's names ignore case, and a rename that changed
    only a column's case left the table's as it was); a name it lacks as it is."""
    names = {f.name.lower(): f.name for f in table.schema().fields}
    return lambda name: names.get(name.lower(), name)


def _without_values(rows: pa.Table, values: pa.Table) -> pa.Table:
    """``rows`` but those equal to one of ``values`` (same columns), NULL equal to NULL."""
    if not values.num_rows or not rows.num_rows:
        return rows
    names = rows.column_names
    marked = pa.table([*values.columns, pa.array([True] * values.num_rows)], names=[*names, SIDE])
    # group both sides by value, NULLs in one group each, and keep the rows whose group is unmarked
    index = pa.array(range(rows.num_rows), pa.int64())
    tagged = pa.concat_tables([
        pa.table([*rows.columns, index, pa.array([False] * rows.num_rows)], names=[*names, "__row", SIDE]),
        pa.table([*marked.select(names).columns, pa.array([-1] * values.num_rows, pa.int64()),
                  marked.column(SIDE)], names=[*names, "__row", SIDE]),
    ])
    groups = tagged.group_by(names, use_threads=False).aggregate([(SIDE, "max"), ("__row", "list")])
    keep = groups.filter(pc.invert(groups.column(f"{SIDE}_max")))
    kept = pc.list_flatten(keep.column("__row_list"))
    return rows.take(kept)
