"""Leader DDL replayed on an Iceberg follower, each action idempotent by what it leaves (a retry
after a crash finds it done) or by the commit id its snapshot carries.

A replay returns the cut's changes: a table's snapshot id after the statement, or None for a
table that left (dropped, renamed away). Every action that changes a table ends with a snapshot
carrying the statement's position (``tables.mark``): the cut names it, and its schema is the table's
as of the statement.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Callable, Sequence

import pyarrow as pa

from ...contracts import DdlSegment, DdlTarget
from ...merge.ddl_statements import added_columns, column_drops, column_renames, created_columns, ddl_spark_type, \
    existing_value, leader_computed
from ...merge import history, soft_deletes
from ...merge.errors import FollowerSchemaError
from .commit import CommitId, TableCommit
from .tables import create_table, mark, retyped, schema_changes, spark_sql_arrow, table_columns
from .types import iceberg_type

if TYPE_CHECKING:
    from .sink import IcebergSink


@dataclass
class _Replay:
    """One statement's replay: the sink, the cut before it, the commit id its snapshots carry, and
    the cut's changes it makes."""

    sink: "IcebergSink"
    cut: dict[str, int]
    commit_id: CommitId
    changes: dict[str, int | None] = field(default_factory=dict)

    def load(self, target: DdlTarget):
        return self.sink.load(target.database, target.table)

    def record(self, target: DdlTarget, table) -> None:
        self.changes[f"{target.database}.{target.table}"] = table.current_snapshot().snapshot_id

    def left(self, target: DdlTarget) -> None:
        self.changes[f"{target.database}.{target.table}"] = None

    def in_cut(self, target: DdlTarget) -> bool:
        name = f"{target.database}.{target.table}"
        return self.changes.get(name, self.cut.get(name)) is not None


def _create_table(r: _Replay, segment: DdlSegment) -> None:
    """The table, empty, in the cut from its CREATE on (a table the leader creates and leaves
    empty is in the catalog too). A table of that name the catalog holds outside the cut (a crashed
    attempt's, empty with these columns, is taken as it is) or a CREATE OR REPLACE makes it anew."""
    columns = created_columns(segment.statement)
    if columns is None:
        return  # created with its first rows (or its copy), in the shape they have
    target = segment.targets[0]
    schema = pa.schema([pa.field(name, spark_sql_arrow(lake_type)) for name, lake_type in columns])
    table = r.load(target)
    replacing = re.match(r"^\s*CREATE\s+OR\s+REPLACE\b", segment.statement, re.I)
    if table is not None and r.in_cut(target) and not replacing:
        return  # CREATE TABLE IF NOT EXISTS of a table in the cut
    if table is not None and (replacing or not _empty_with(table, schema)):
        r.sink.catalog.drop_table((target.database, target.table))
        table = None
    if table is None:
        table = create_table(r.sink.catalog, target.database, target.table, schema, r.commit_id)
    r.record(target, table)


def _empty_with(table, schema: pa.Schema) -> bool:
    have = table_columns(table)
    if len(have) != len(schema) or any(f.name.lower() not in have for f in schema):
        return False
    snapshot = table.current_snapshot()
    return snapshot is None or int(snapshot.summary.additional_properties.get("total-records", "0")) == 0


def _with_columns(table, fields):
    """The table with ``fields`` (``soft_deletes``' or ``history``'s columns, added when it was made
    before it kept its deleted rows or history: its rows live or current, the columns NULL)."""
    missing = schema_changes(table, pa.schema(fields), table.name())
    if not missing:
        return table
    with table.update_schema() as update:
        for change in missing:
            change(update)
    return table.refresh()


def _with_rows_gone(table, rows: pa.Table, keys: list[str], txn: str) -> pa.Table:
    """A copy's ``rows`` (live: ``soft_deletes`` marks added) and the ``table``'s rows whose keys they
    lack, marked deleted by ``txn``, in the copy's columns (matched without case; a column the
    table's rows lack is NULL in them)."""
    live = pa.table([*rows.columns, pa.array([False] * rows.num_rows),
                     pa.nulls(rows.num_rows, soft_deletes.FIELDS[1].type), pa.nulls(rows.num_rows, soft_deletes.FIELDS[2].type)],
                    schema=pa.schema([*rows.schema, *soft_deletes.FIELDS]))
    if not table.current_snapshot():
        return live
    held = table.scan().to_arrow()
    spelled = {n.lower(): n for n in held.column_names}
    if not held.num_rows or any(k.lower() not in spelled for k in keys):
        return live  # (a table whose key is new: none of its rows can be told apart from the copy's)
    if soft_deletes.DELETED not in held.column_names:  # a table made before it kept its deleted rows
        held = pa.table([*held.columns, *(pa.nulls(held.num_rows, f.type) for f in soft_deletes.FIELDS)],
                        names=[*held.column_names, *soft_deletes.COLUMNS])
    held = held.rename_columns([n if n in soft_deletes.COLUMNS else n.lower() for n in held.column_names])
    copy_keys = pa.table([rows.column(k).cast(held.schema.field(k.lower()).type) for k in keys],
                         names=[k.lower() for k in keys])
    gone = soft_deletes.marked_removed(held.join(copy_keys, keys=[k.lower() for k in keys], join_type="left anti",
                                                 use_threads=False), None, txn)
    columns = [gone.column(f.name.lower()).cast(f.type) if f.name.lower() in gone.column_names
               else pa.nulls(gone.num_rows, f.type) for f in rows.schema]
    marks = [gone.column(f.name).cast(f.type) for f in soft_deletes.FIELDS]
    # the columns the leader dropped that the table keeps (its deleted rows' values), as they are
    copied = {f.name.lower() for f in rows.schema} | set(soft_deletes.COLUMNS)
    kept = [(spelled[n], gone.column(n)) for n in gone.column_names if n not in copied]
    gone_rows = pa.table([*columns, *marks, *(v for _, v in kept)],
                         names=[*live.schema.names, *(name for name, _ in kept)])
    return pa.concat_tables([live, gone_rows], promote_options="default")


def _drop_table(r: _Replay, target: DdlTarget) -> None:
    """The table leaves the catalog and the cut (its files stay until the maintenance job's orphan
    removal: a reader holding the cut's snapshot ids can still read it meanwhile)."""
    if r.load(target) is not None:
        r.sink.catalog.drop_table((target.database, target.table))
    r.left(target)


def _truncate(r: _Replay, target: DdlTarget) -> None:
    table = r.load(target)
    if table is None:
        return
    keep, kept = (r.sink.keeps_deleted(target.database, target.table),
                  r.sink.keeps_history(target.database, target.table))
    if (keep or kept) and not TableCommit(table, r.commit_id).done:
        table = _with_columns(table, soft_deletes.FIELDS if keep else history.FIELDS)
    change = TableCommit(table, r.commit_id)
    if not change.done:
        position = r.commit_id.position  # its statement's (its transaction's)
        if keep:
            change.mark_all_deleted(str(position))
        elif kept:
            change.close_all(history.seq_number(position.sequence, position.offset))
        else:
            change.remove_all()
        table = change.table if change.commit() is not None else mark(table, r.commit_id)
    r.record(target, table)


def _rename_table(r: _Replay, old: DdlTarget, new: DdlTarget) -> None:
    """The catalog renames the table in one commit of its database. Done when the old name is gone
    and the new one is there."""
    from pyiceberg.exceptions import NamespaceAlreadyExistsError

    table = r.load(old)
    if table is not None:
        if r.load(new) is not None:  # a stale table of the new name (the leader had none)
            r.sink.catalog.drop_table((new.database, new.table))
        try:
            r.sink.catalog.create_namespace(new.database)
        except NamespaceAlreadyExistsError:
            pass
        r.sink.catalog.rename_table((old.database, old.table), (new.database, new.table))
    r.left(old)
    moved = r.load(new)
    if moved is not None:
        r.record(new, mark(moved, r.commit_id))


def _rename_tables(r: _Replay, segment: DdlSegment) -> None:
    for old, new in zip(segment.targets[0::2], segment.targets[1::2]):
        _rename_table(r, old, new)


def _each_table(action: Callable[[_Replay, DdlTarget], None]) -> Callable[[_Replay, DdlSegment], None]:
    def apply(r: _Replay, segment: DdlSegment) -> None:
        for target in segment.targets:
            action(r, target)
    return apply


def _alter_table(r: _Replay, segment: DdlSegment) -> None:
    """Renames, drops and additions of columns with Iceberg's schema evolution (by field id: a
    renamed column keeps its values), in one commit; an added column's value in the existing rows
    written after it. Other changes (a type) arrive with the table's next rows (``check_table``)."""
    target = segment.targets[0]
    if len(segment.targets) > 1:  # ALTER TABLE a ... RENAME TO b
        _rename_table(r, target, segment.targets[1])
        target = segment.targets[1]
    table = r.load(target)
    if table is None:
        return  # created with its first rows, in the shape they have
    name = f"{target.database}.{target.table}"
    added = added_columns(segment.statement)
    for column in added:
        if leader_computed(column):
            raise FollowerSchemaError(
                f"{name}: ADD COLUMN {column.name} ({column.mysql_type}) gives the existing rows a value this "
                f"follower cannot reproduce from the statement; copy the table again: trigger the pipeline with conf "
                f'{{"resnapshot": ["{name}"]}}')
    have = table_columns(table)
    updates = []
    for old, new in column_renames(segment.statement):
        if old.lower() in have and new.lower() not in have:
            updates.append(lambda u, o=have[old.lower()][0], n=new: u.rename_column(o, n))
    kept = r.sink.keeps_deleted(target.database, target.table) or r.sink.keeps_history(target.database, target.table)
    for dropped in column_drops(segment.statement):
        if dropped.lower() in have and not kept:  # a history mode's table keeps it, its earlier values with it
            updates.append(lambda u, d=have[dropped.lower()][0]: u.delete_column(d))
    for column in added:
        if column.name.lower() not in have:
            arrow_type = spark_sql_arrow(ddl_spark_type(column))
            updates.append(lambda u, c=column.name, t=arrow_type: u.add_column(c, iceberg_type(t)))
    if updates:
        with table.update_schema() as update:
            for change in updates:
                change(update)
        table = r.load(target)
    _fill_added(r, target, table, added)


def _fill_added(r: _Replay, target: DdlTarget, table, added) -> None:
    """The added columns' value in the rows the table held (MySQL's DEFAULT, or NOT NULL's implicit
    zero), in one snapshot carrying the statement's position; a retry that finds it skips it."""
    change = TableCommit(table, r.commit_id)
    if change.done:
        r.record(target, table)
        return
    have = table_columns(table)
    held_now = r.sink.held_now(target.database, target.table)
    for column in added:
        value = existing_value(column, ddl_spark_type(column))
        if value is not None:
            spelled, arrow_type = have[column.name.lower()]
            change.fill(spelled, _literal(value, arrow_type), held_now)
    r.record(target, change.table if change.commit() is not None else mark(table, r.commit_id))


def _literal(text: str, arrow_type: pa.DataType) -> pa.Scalar:
    """A DDL literal (``'text'``, ``12.5``) as a value of the column's type."""
    if text.startswith("'"):
        return pa.scalar(text[1:-1].replace("''", "'")).cast(arrow_type)
    return pa.scalar(Decimal(text)).cast(arrow_type)


def _drop_database(r: _Replay, segment: DdlSegment) -> None:
    database = segment.targets[0].database
    for name in [n for n in r.cut if n.split(".", 1)[0] == database]:
        _drop_table(r, DdlTarget(*name.split(".", 1)))


def _nothing(r: _Replay, segment: DdlSegment) -> None:
    """Nothing to do: a namespace is created with its first table."""


# DdlSegment.action -> how it is replayed on Iceberg; an action missing here stops the merge
ACTIONS: dict[str, Callable[[_Replay, DdlSegment], None]] = {
    "create_table": _create_table,
    "create_database": _nothing,
    "alter_database": _nothing,
    "drop_table": _each_table(_drop_table),
    "truncate_table": _each_table(_truncate),
    "rename_table": _rename_tables,
    "alter_table": _alter_table,
    "drop_database": _drop_database,
}


def replay(sink: "IcebergSink", segment: DdlSegment, cut: dict[str, int], commit_id: CommitId) -> dict[str, int | None]:
    """Replay the statement; returns the cut's changes."""
    action = ACTIONS.get(segment.action)
    if action is None:
        raise FollowerSchemaError(
            f"DDL at {segment.start} ({segment.action}: {segment.statement[:200]!r}) has no replay on an Iceberg "
            "follower; report it")
    r = _Replay(sink, cut, commit_id)
    action(r, segment)
    return r.changes


def replace_rows(sink: "IcebergSink", database: str, table_name: str, schema: pa.Schema, rows: pa.Table,
                 commit_id: CommitId, keys_of_kept: Sequence[str] | None = None,
                 keys_of_versions: Sequence[str] | None = None) -> int:
    """A copy's rows in the table's place, its columns the copy's, in one snapshot carrying
    ``commit_id`` (a retry finds it and skips it); returns the snapshot id. A column whose type
    Iceberg cannot change in place makes the table anew (dropped, created): a reader of the
    catalog sees no table for that moment, a reader of the cut the old one until the state moves.
    ``keys_of_kept``: the key of a table that keeps its deleted rows (``merge.soft_deletes``): the
    copy's rows are live, and the table's rows whose keys the copy lacks stay, marked deleted by
    the copy's position (rows deleted before keep their marks). ``keys_of_versions``: the key of a
    table that keeps its history (``merge.history.copy_versions``): its versions stay, those the
    copy no longer has (or has changed) closed at its position, and the copy's new ones added."""
    name = f"{database}.{table_name}"
    table = sink.load(database, table_name)
    if table is None:
        table = create_table(sink.catalog, database, table_name, schema, None)
    change = TableCommit(table, commit_id)
    if change.done:
        return table.current_snapshot().snapshot_id
    if keys_of_kept is not None or keys_of_versions is not None:
        # a table made anew (below) would drop what it keeps, and its kept rows cannot take the new type
        for column, have, want in retyped(table, schema):
            raise history.retyped_error(name, column, str(iceberg_type(have)), str(iceberg_type(want)),
                                        keys_of_kept is not None)
    if keys_of_kept is not None:
        rows = _with_rows_gone(table, rows, list(keys_of_kept), str(commit_id.position))
    elif keys_of_versions is not None:
        position = commit_id.position
        held, opened = history.copy_versions(table.scan().to_arrow() if table.current_snapshot() else None, rows,
                                             keys_of_versions, history.seq_number(position.sequence, position.offset))
        if held is not None:  # (the copy's names as the table spells them, so the two line up)
            spelled = {n.lower(): n for n in held.column_names}
            opened = opened.rename_columns([spelled.get(n.lower(), n) for n in opened.column_names])
        rows = opened if held is None else pa.concat_tables([held, opened], promote_options="permissive")
    try:
        updates = schema_changes(table, schema, name)
    except FollowerSchemaError:
        sink.catalog.drop_table((database, table_name))
        table, updates = create_table(sink.catalog, database, table_name, schema, None), []
        change = TableCommit(table, commit_id)
    wanted = {f.name.lower() for f in schema}
    kept = keys_of_kept is not None or keys_of_versions is not None  # (a history mode's table keeps them)
    dropped = [] if kept else [spelled for lower, (spelled, _) in table_columns(table).items() if lower not in wanted]

    def reshape(update) -> None:
        for column in dropped:
            update.delete_column(column)
        for apply in updates:
            apply(update)

    change.replace(rows, reshape if dropped or updates else None)
    if change.commit() is None:  # an empty copy of an empty table: still a snapshot for the cut
        return mark(table, commit_id).current_snapshot().snapshot_id
    return change.table.current_snapshot().snapshot_id
