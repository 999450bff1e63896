"""A MySQL follower's tables as the merge job sees them: their columns, names and shadows.

``FollowerColumn`` is one column as ``information_schema`` describes it (the staging DDL copies its
type, charset and collation); ``StagedTable`` one table's net rows, prepared per Spark partition.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ....contracts import SnapshotSegment, TableChanges
from .encoding import quote_ident

if TYPE_CHECKING:
    from .statements import TableStatements


def qualified(database: str, table: str) -> str:
    return f"{quote_ident(database)}.{quote_ident(table)}"


def shadow_name(table: str, role: str) -> str:
    """``__mcdc_<role>_<table>``: the snapshot's shadow of a table (role ``new``) or the table it
    replaced (``old``), in the table's own database (a rename across databases would fail for a
    table with triggers, or on another file system); hashed when too long for MySQL's 64."""
    name = f"__mcdc_{role}_{table}"
    return name if len(name) <= 64 else f"__mcdc_{role}_{hashlib.sha1(table.encode()).hexdigest()[:24]}"


def shadow_sql(segment: SnapshotSegment, role: str) -> str:
    """The SQL name of the segment's table's shadow (``shadow_name``)."""
    return qualified(segment.database, shadow_name(segment.table, role))


# -- follower tables ---------------------------------------------------------------------------

TEXT_TYPES = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set", "json"})
_INTEGER_TYPES = frozenset({"tinyint", "smallint", "mediumint", "int", "bigint"})
_SPATIAL_TYPES = frozenset({
    "geometry", "point", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon",
    "geometrycollection",
})


@dataclass(frozen=True)
class FollowerColumn:
    name: str
    data_type: str  # information_schema DATA_TYPE, e.g. 'bigint'
    column_type: str  # full type, e.g. 'bigint(20) unsigned', "enum('a','b')"
    charset: str | None
    collation: str | None
    generated: bool

    def staging_ddl(self) -> str:
        """Same type, charset and collation as the target (so the follower compares staged and
        target values alike); always NULL-able, no default, no keys."""
        text = f"{quote_ident(self.name)} {self.column_type}"
        if self.charset and self.data_type != "json":
            text += f" CHARACTER SET {self.charset} COLLATE {self.collation}"
        return text + " NULL"

    def matches(self, mysql_type: str) -> bool:
        """Whether the binlog's type (manifest ``mysql_type``) is this column's type."""
        words = mysql_type.lower().replace("(", " ").split()
        base = words[0] if words else ""
        if base == "json":  # MariaDB's JSON is LONGTEXT
            return self.data_type in ("json", "longtext")
        if base == "geometry":
            return self.data_type in _SPATIAL_TYPES
        if base != self.data_type:
            return False
        return base not in _INTEGER_TYPES or ("unsigned" in words) == ("unsigned" in self.column_type.lower())


@dataclass(frozen=True)
class StagedTable:
    """One table's net rows of a row segment, prepared per Spark partition (staging.py), or, for
    a small keyed table, as two statements (statements.py: ``statements``, and one stage row of
    counts with no staging table and no load file)."""

    changes: TableChanges
    columns: tuple[FollowerColumn, ...]  # the follower's columns, in the batch's order
    stages: tuple[dict, ...]  # staging.RESULT_SCHEMA rows: staging table, load file, per-op counts
    statements: TableStatements | None = None

    def total(self, field: str) -> int:
        return sum(s[field] for s in self.stages)
