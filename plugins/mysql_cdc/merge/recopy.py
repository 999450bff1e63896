"""Which tables of a batch a lake follower must copy again instead of merging: checked on the
Airflow side when the batch is extracted, so the run copies them (and catches every table up to
the copy) instead of a merge that stops.

A lake holds a column in one type. A leader type change it can take exactly (INT -> BIGINT, a
wider DECIMAL, ...: the kind's ``LakeTypes.widens``) is made in the merge; any other (INT ->
VARCHAR, DECIMAL(10,2) -> DECIMAL(10,1), ...) would need each existing value converted, which the
lake must not guess. An ADD COLUMN whose existing rows get a value the leader computed (``DEFAULT
CURRENT_TIMESTAMP``, an expression, an implicit zero date) cannot be reproduced from the statement
either. In both cases the table is copied from the leader at its current position: its rows, in
its current types, exactly. A false alarm only costs a copy; a miss stops the merge naming the
resnapshot, as before this check.

Plain Python: each lake kind's hook reads its tables' columns with its own library (no Spark).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from ..contracts import ChangeBatch, ColumnSpec, DdlSegment, RowSegment
from .ddl_statements import added_columns, leader_computed

# a table's columns in the lake: lower-cased name -> the kind's type name, None when there is no table
LakeColumns = Callable[[str, str], Optional[dict[str, str]]]


@dataclass(frozen=True)
class LakeTypes:
    """How a lake kind types columns: the type it gives a batch column (``column_type(column,
    table name)``, spelled as its ``LakeColumns`` spell them), whether a type widens to another
    exactly, and the format's name for the reasons."""

    column_type: Callable[[ColumnSpec, str], str]
    widens: Callable[[str, str], bool]
    format: str


def _type_changes(segment: RowSegment, lake: LakeColumns, types: LakeTypes, found: dict[str, str], known: dict) -> None:
    """Each table's columns against the lake's as the batch's earlier segments leave them
    (``known``: a table's first rows create it, a new column is added in the type it comes in)."""
    for table in segment.tables:
        key = (table.database, table.table)
        if key not in known:
            known[key] = dict(lake(*key) or {})
        columns = known[key]
        for column in table.columns:
            have = columns.get(column.name.lower())
            want = types.column_type(column, table.qualified_name)
            if have is not None and have != want and not types.widens(have, want) and table.qualified_name not in found:
                found[table.qualified_name] = (f"{column.name} changed type from {have} to {want}, which "
                                               f"{types.format} cannot take exactly")
            columns[column.name.lower()] = want


def _computed_defaults(segment: DdlSegment, lake: LakeColumns, types: LakeTypes, found: dict[str, str],
                       known: dict) -> None:
    if segment.action != "alter_table":
        return
    target = segment.targets[-1]
    name = f"{target.database}.{target.table}"
    if name in found or not (known.get((target.database, target.table)) or lake(target.database, target.table)):
        return  # a table the lake does not have yet is created with its rows, in their shape
    for column in added_columns(segment.statement):
        if leader_computed(column):
            found[name] = (f"ADD COLUMN {column.name} gives the existing rows a value the leader computed, which the "
                           "statement does not carry")
            return


# segment kind -> its check (a snapshot segment is a copy already)
_CHECKS: dict[str, Callable] = {"rows": _type_changes, "ddl": _computed_defaults}


def tables_to_copy(batch: ChangeBatch, lake: LakeColumns, types: LakeTypes) -> dict[str, str]:
    """``db.table`` -> why, for each table of ``batch`` the lake must copy again."""
    found: dict[str, str] = {}
    known: dict[tuple[str, str], dict[str, str]] = {}
    for segment in batch.segments:
        check = _CHECKS.get(segment.kind)
        if check is not None:
            check(segment, lake, types, found, known)
    return found
