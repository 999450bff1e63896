"""Leader DDL replayed on a Delta Lake follower, each action idempotent by what it leaves (a retry
after a crash finds it done) or by the session's transaction ids (a ``DELETE``).

``versions`` (the state row's table -> Delta version) is updated in place: a table dropped leaves
the consistent cut, a table renamed enters it under its new name.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Callable

from ....merge.ddl_statements import (
    AddedColumn, added_columns, column_drops, column_renames, created_columns, ddl_spark_type, existing_value,
    leader_computed,
)
from ....merge import history
from ....merge.errors import FollowerSchemaError
from ....contracts import DdlSegment, DdlTarget
from .tables import create_table, drop_column, overwrite, quote, rename_column, table_exists

if TYPE_CHECKING:
    from . import DeltaSink


def _drop_table(sink: "DeltaSink", target: DdlTarget, versions: dict[str, int]) -> None:
    """The table leaves the cut; its path keeps its history (time travel to before the drop)
    and is emptied, so a plain reader of its latest version sees no rows."""
    sink.empty_table(target.database, target.table)
    versions.pop(sink.ref(target.database, target.table).name, None)


def _truncate(sink: "DeltaSink", segment: DdlSegment, versions: dict[str, int]) -> None:
    """Each table emptied; a table that keeps its deleted rows has them marked deleted by the
    statement's position instead (``merge.soft_deletes``), a history table its current versions
    closed there (``merge.history``)."""
    for target in segment.targets:
        ref = sink.ref(target.database, target.table)
        if ref.keeps_deleted:
            version = sink.mark_all_deleted(target.database, target.table, str(segment.end))
        elif ref.keeps_history:
            version = sink.close_all_versions(target.database, target.table,
                                              history.seq_number(segment.end.sequence, segment.end.offset))
        else:
            version = sink.empty_table(target.database, target.table)
        if version is not None:
            versions[ref.name] = version


def _rename_table(sink: "DeltaSink", old: DdlTarget, new: DdlTarget, versions: dict[str, int]) -> None:
    """A Delta table's path is its name: the rows move to the new path in one commit, then the old
    table is dropped. Done when the old one has left the cut and the new one is in it."""
    spark = sink.spark()
    source, target = sink.ref(old.database, old.table), sink.ref(new.database, new.table)
    if source.name not in versions and target.name in versions:
        return
    if table_exists(spark, source):
        rows = spark.read.format("delta").load(source.path)
        create_table(spark, target, ", ".join(f"{quote(f.name)} {f.dataType.simpleString()}" for f in rows.schema.fields))
        overwrite(spark, target, rows)
        versions[target.name] = sink.version(new.database, new.table)
        sink.empty_table(old.database, old.table)
    versions.pop(source.name, None)


def _alter_table(sink: "DeltaSink", segment: DdlSegment, versions: dict[str, int]) -> None:
    target = segment.targets[0]
    if len(segment.targets) > 1:  # ALTER TABLE a ... RENAME TO b
        _rename_table(sink, target, segment.targets[1], versions)
        target = segment.targets[1]
    ref = sink.ref(target.database, target.table)
    if not table_exists(sink.spark(), ref):
        return  # created with its first rows, in the shape they have
    for old, new in column_renames(segment.statement):
        rename_column(sink.spark(), ref, old, new)
    for name in column_drops(segment.statement):
        if not ref.added_columns:  # (a history mode's table keeps it: ``tables.kept_changes``)
            drop_column(sink.spark(), ref, name)
    added = added_columns(segment.statement)
    if added:
        _add_columns(sink, ref, added)
    versions[ref.name] = sink.version(target.database, target.table)


def _add_columns(sink: "DeltaSink", ref, columns: list[AddedColumn]) -> None:
    """Add the columns now, with the values the leader gave every existing row (its rows events
    only carry the rows changed later), the values in ONE UPDATE: the session's transaction ids
    make it idempotent, and a second DML commit under the same ids would be skipped. A retry after
    a crash between the ALTER and the UPDATE finds the columns and runs the UPDATE again, which
    Delta skips if it was committed."""
    spark = sink.spark()
    from .tables import existing_columns

    values = {}
    for column in columns:
        if leader_computed(column):
            raise FollowerSchemaError(
                f"{ref.name}: ADD COLUMN {column.name} ({column.mysql_type}) gives the existing rows a value this "
                f"follower cannot reproduce from the statement; copy the table again: trigger the pipeline with conf "
                f'{{"resnapshot": ["{ref.name}"]}}')
        delta_type = ddl_spark_type(column)
        value = existing_value(column, delta_type)
        if column.name.lower() not in (existing_columns(spark, ref) or {}):
            spark.sql(f"ALTER TABLE {ref.sql} ADD COLUMNS ({quote(column.name)} {delta_type})")
        if value is not None:
            values[column.name] = f"CAST({value} AS {delta_type})"
    if values:
        # (in a history mode's table, the rows the leader holds: its deleted rows and earlier versions never had them)
        where = f" WHERE {ref.held_now}" if ref.held_now else ""
        spark.sql(f"UPDATE {ref.sql} SET {', '.join(f'{quote(n)} = {v}' for n, v in values.items())}{where}")


def _drop_database(sink: "DeltaSink", segment: DdlSegment, versions: dict[str, int]) -> None:
    database = segment.targets[0].database
    for name in [n for n in versions if n.split(".", 1)[0] == database]:
        _drop_table(sink, DdlTarget(*name.split(".", 1)), versions)


def _each_table(action: Callable) -> Callable:
    def apply(sink: "DeltaSink", segment: DdlSegment, versions: dict[str, int]) -> None:
        for target in segment.targets:
            action(sink, target, versions)
    return apply


def _rename_tables(sink: "DeltaSink", segment: DdlSegment, versions: dict[str, int]) -> None:
    pairs = list(zip(segment.targets[0::2], segment.targets[1::2]))
    for old, new in pairs:
        _rename_table(sink, old, new, versions)


def _nothing(sink: "DeltaSink", segment: DdlSegment, versions: dict[str, int]) -> None:
    """Nothing to do: a database is a path prefix."""


def _empty_with(table, columns: list[tuple[str, str]]) -> bool:
    """Whether a table delta-rs opened holds no rows and exactly these (name, Delta type) columns."""
    from .tables import lake_columns, same_type

    have = lake_columns(table)
    return not table.file_uris() and len(have) == len(columns) and all(
        name.lower() in have and have[name.lower()][0] == name and same_type(have[name.lower()][1], delta_type)
        for name, delta_type in columns)


def _create_table(sink: "DeltaSink", segment: DdlSegment, versions: dict[str, int]) -> None:
    """The table, empty, in the cut from its CREATE on (a table the leader creates and leaves
    empty is in the lake too). A table of that name the lake still holds (dropped earlier: emptied,
    kept for time travel) gets the new columns in one commit."""
    columns = created_columns(segment.statement)
    if columns is None:
        return
    target = segment.targets[0]
    ref = sink.ref(target.database, target.table)
    columns = columns + list(ref.added_columns)  # a history mode's columns after the leader's
    definition = ", ".join(f"{quote(name)} {delta_type}" for name, delta_type in columns)
    spark = sink.spark()
    replacing = re.match(r"^\s*CREATE\s+OR\s+REPLACE\b", segment.statement, re.I)
    if not table_exists(spark, ref):
        create_table(spark, ref, definition)
    elif ref.name not in versions or replacing:
        # (a retry finds the commit made: Delta skips it under the session's transaction ids; or,
        # after a crash that followed the CREATE, finds the table as the statement makes it)
        if not _empty_with(sink.delta_rs(target.database, target.table), columns):
            overwrite(spark, ref, spark.createDataFrame([], definition))
    else:
        return  # CREATE TABLE IF NOT EXISTS of a table in the cut
    versions[ref.name] = sink.version(target.database, target.table)


# DdlSegment.action -> how it is replayed on Delta; an action missing here stops the merge
ACTIONS: dict[str, Callable[["DeltaSink", DdlSegment, dict[str, int]], None]] = {
    "create_table": _create_table,
    "create_database": _nothing,
    "alter_database": _nothing,
    "drop_table": _each_table(_drop_table),
    "truncate_table": _truncate,
    "rename_table": _rename_tables,
    "alter_table": _alter_table,
    "drop_database": _drop_database,
}


def replay(sink: "DeltaSink", segment: DdlSegment, versions: dict[str, int]) -> None:
    action = ACTIONS.get(segment.action)
    if action is None:
        raise FollowerSchemaError(
            f"DDL at {segment.start} ({segment.action}: {segment.statement[:200]!r}) has no replay on a Delta "
            "Lake follower; report it")
    action(sink, segment, versions)
