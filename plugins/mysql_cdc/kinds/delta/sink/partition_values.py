"""What a partition column's values become in a Delta table, and the values that would not come back.

A partition column's values are not in the data files: each file's value is a string in the log
(Delta's partition value serialization), and readers parse it back. Some values do not survive that
as the leader wrote them, checked here rather than found by a reader:

- an empty string is a null partition value (the protocol has no other spelling for it): a row
  with ``''`` in a string partition column would read back as NULL. The merge stops before
  committing such a row, naming the table, the column and the fix (``refuse_empty_strings``).
- BINARY and DECIMAL columns are refused as partition columns before anything is written
  (``check_types``): BINARY values are escaped in the log and delta-rs 1.6 reads them back still
  escaped (``\\u0000\\u00FF`` for ``00 FF``); delta-rs 1.6 formats a negative DECIMAL with a
  fraction as ``-3.-50`` (for -3.50), which fails its own commits and its reads of a table Spark
  wrote.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

from ....contracts import ColumnSpec
from ....merge.errors import FollowerSchemaError
from .tables import DeltaTableRef, delta_type


def partition_specs(ref: DeltaTableRef, columns: Sequence[ColumnSpec]) -> list[ColumnSpec]:
    """The batch columns the table is partitioned by (a column it lacks is ``tables.partitioned_by``'s error)."""
    wanted = {c.lower() for c in ref.partition_by}
    return [c for c in columns if c.name.lower() in wanted]


# a partition column's Delta type -> why its values would not read back as the leader's
REFUSED_TYPES = {
    "BINARY": "Delta keeps its values as escaped text in the log, which delta-rs reads back escaped",
    "DECIMAL": "delta-rs cannot write or read a negative value with a fraction in a partition (-3.50 becomes "
               "'-3.-50')",
}


def check_types(ref: DeltaTableRef, types: Mapping[str, str]) -> None:
    """Refuse a partition column whose values would not read back as written (``REFUSED_TYPES``);
    ``types``: Delta types by column name (the table's, or only its partition columns')."""
    partitioned = {c.lower() for c in ref.partition_by}
    for name, sql_type in types.items():
        kind = sql_type.upper().split("(", 1)[0]
        if name.lower() in partitioned and kind in REFUSED_TYPES:
            raise FollowerSchemaError(
                f"{ref.name}: partition_by names {name}, a {kind} column in the lake; {REFUSED_TYPES[kind]}; "
                f"partition {ref.name!r} by another column in the follower's partition_by in the pipelines file, "
                "then run the pipeline again")


def partition_types(ref: DeltaTableRef, columns: Sequence[ColumnSpec]) -> dict[str, str]:
    """The Delta types of the batch columns the table is partitioned by (none for most tables)."""
    return {c.name: delta_type(c, ref.name) for c in partition_specs(ref, columns)}


def string_partitions(ref: DeltaTableRef, columns: Sequence[ColumnSpec]) -> list[str]:
    """The table's partition columns that hold strings (where ``''`` may arrive)."""
    return [name for name, sql_type in partition_types(ref, columns).items() if sql_type == "STRING"]


def refuse_empty_strings(ref: DeltaTableRef, columns: Sequence[str], has_empty: Callable[[str], bool]) -> None:
    """A ``FollowerSchemaError`` if a row to write has ``''`` in one of the string partition
    ``columns`` (``has_empty(column)`` tells): Delta would make it NULL."""
    for column in columns:
        if has_empty(column):
            raise FollowerSchemaError(
                f"{ref.name}: a row has '' in {column}, which the follower's partition_by partitions the table by; "
                "Delta writes an empty partition value as NULL, so the lake would not hold the leader's row; "
                f"partition {ref.name!r} by another column in the pipelines file (the table is rewritten with that "
                "partitioning at its next change), then run the pipeline again")
