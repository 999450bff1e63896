"""The follower's Iceberg tables: the leader's ``db.t`` is ``db.t`` in the catalog (namespace ``db``),
created from the batch's columns or a CREATE TABLE's, and their columns kept the leader's with
Iceberg's own schema evolution.

Every column is optional (nullable): Iceberg can make a required column optional but not the
reverse, and the leader's NOT NULL is the leader's to enforce. Every table is created with a first,
empty snapshot, and every DDL ends with one (``mark``): the consistent cut always names a
snapshot, and a snapshot's schema is the table's as of the position it carries.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pyarrow as pa

from ...merge.errors import FollowerSchemaError
from .commit import CommitId
from .types import iceberg_type

if TYPE_CHECKING:
    from pyiceberg.table import Table

# every table's properties: row-level changes are position deletes (merge-on-read), whatever
# engine makes them: an update of a row costs its key's lookup, not its file's rewrite
# (``row_delta``); the maintenance job's compaction folds them into the data files. Format version
# 2: version 3's deletion vectors are not written by pyiceberg.
TABLE_PROPERTIES = {
    "format-version": "2",
    "write.delete.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
    "write.merge.mode": "merge-on-read",
    # every commit writes a metadata file: the ten latest are kept, older ones deleted by the commit
    "write.metadata.delete-after-commit.enabled": "true",
    "write.metadata.previous-versions-max": "10",
}

# a lake (Spark SQL) type of a DDL statement (``merge.ddl_statements``) -> the Arrow type its Iceberg
# column is written from (the one ``types.iceberg_arrow_type`` gives the batch's column)
_SPARK_SQL = {
    "TINYINT": pa.int32(), "SMALLINT": pa.int32(), "INT": pa.int32(), "BIGINT": pa.int64(),
    "FLOAT": pa.float32(), "DOUBLE": pa.float64(), "STRING": pa.large_string(), "BINARY": pa.large_binary(),
    "BOOLEAN": pa.bool_(), "DATE": pa.date32(), "TIMESTAMP_NTZ": pa.timestamp("us"),
    "TIMESTAMP": pa.timestamp("us", tz="UTC"),
}
_DECIMAL = re.compile(r"^DECIMAL\((\d+),\s*(\d+)\)$")


def spark_sql_arrow(lake_type: str) -> pa.DataType:
    match = _DECIMAL.match(lake_type)
    return pa.decimal128(int(match[1]), int(match[2])) if match else _SPARK_SQL[lake_type]


def identifier(database: str, table: str) -> tuple[str, str]:
    return (database, table)


def create_table(catalog, database: str, table: str, schema: pa.Schema, commit_id: CommitId | None) -> "Table":
    """The table, created empty (its namespace too) with a first snapshot carrying ``commit_id``
    (None: no position; a table created for its first rows, whose commit carries theirs)."""
    from pyiceberg.exceptions import NamespaceAlreadyExistsError
    from pyiceberg.table import Table

    try:
        catalog.create_namespace(database)
    except NamespaceAlreadyExistsError:
        pass
    # the table and its first snapshot in one commit: one metadata file and one catalog row, and no
    # moment when the table exists without the position
    tx = catalog.create_table_transaction(identifier(database, table), schema=schema, properties=TABLE_PROPERTIES)
    with tx.update_snapshot(snapshot_properties=commit_id.summary() if commit_id else {}).fast_append():
        pass
    staged = tx.commit_transaction()
    # (what the transaction returns is the staged table, which refuses scans: the table as committed)
    return Table(staged.name(), staged.metadata, staged.metadata_location, staged.io, staged.catalog)


def mark(table: "Table", commit_id: CommitId | None, schema_change=None) -> "Table":
    """A snapshot of no data carrying ``commit_id`` (after ``schema_change(update_schema)``, in the
    same commit): the table's history records the position, and the snapshot has the table's
    schema as of it."""
    tx = table.transaction()
    if schema_change is not None:
        with tx.update_schema() as update:
            schema_change(update)
    with tx.update_snapshot(snapshot_properties=commit_id.summary() if commit_id else {}).fast_append():
        pass
    return tx.commit_transaction()


def table_columns(table: "Table") -> dict[str, tuple[str, pa.DataType]]:
    """The table's columns: lower-cased name -> (its spelling, the Arrow type pyiceberg reads it as)."""
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    return {f.name.lower(): (f.name, f.type) for f in schema_to_pyarrow(table.schema(), include_field_ids=False)}


def _wider(have: pa.DataType, want: pa.DataType) -> bool:
    """Whether Iceberg widens ``have`` to ``want`` in place, every old value the same new value."""
    if pa.types.is_int32(have) and pa.types.is_int64(want):
        return True
    if pa.types.is_float32(have) and pa.types.is_float64(want):
        return True
    return (pa.types.is_decimal(have) and pa.types.is_decimal(want) and have.scale == want.scale
            and want.precision > have.precision)


def _same(have: pa.DataType, want: pa.DataType) -> bool:
    plain = {pa.large_string(): pa.string(), pa.large_binary(): pa.binary()}
    return plain.get(have, have) == plain.get(want, want)


def retyped(table: "Table", schema: pa.Schema) -> list[tuple[str, pa.DataType, pa.DataType]]:
    """The table's columns whose type ``schema`` changes in a way Iceberg cannot make in place:
    (the table's name of it, its type, the new type)."""
    have = table_columns(table)
    return [(found[0], found[1], field.type) for field in schema
            if (found := have.get(field.name.lower())) is not None
            and not _same(found[1], field.type) and not _wider(found[1], field.type)]


def schema_changes(table: "Table", schema: pa.Schema, name: str) -> list:
    """What ``update_schema`` must do for the table to take rows of ``schema``: columns added, types
    widened (a list of callables); a ``FollowerSchemaError`` naming the column and the repair for a
    change Iceberg cannot make in place."""
    have = table_columns(table)
    changes = []
    for field in schema:
        found = have.get(field.name.lower())
        if found is None:
            changes.append(lambda u, f=field: u.add_column(f.name, iceberg_type(f.type)))
        elif _same(found[1], field.type):
            continue
        elif _wider(found[1], field.type):
            changes.append(lambda u, n=found[0], f=field: u.update_column(n, field_type=iceberg_type(f.type)))
        else:
            raise FollowerSchemaError(
                f"{name}.{field.name}: the follower's Iceberg column is {found[1]}, the batch's is {field.type}, and "
                "Iceberg cannot change one into the other in place; copy the table again: trigger the pipeline with "
                f'conf {{"resnapshot": ["{name}"]}}',
                problem=f"{name}.{field.name}: {found[1]} in the follower, {field.type} in the batch")
    return changes
