"""Changelog tables: every change row of a table, queryable, beside the table itself.

A table the follower's ``changelog`` patterns name (``follower: {kind: delta, changelog: true}``,
or a list such as ``["shop.orders", "crm.*"]``) gets an append-only Delta table at
``<location>/_mysql_cdc/<pipeline>/changelog/<db>/<table>`` (``LakeLocation.changelog_uri``). Each
row is one change as the binlog carried it, in the table's Delta types (``tables.to_delta``):

- the table's columns: the after-image of an insert or update, the before-image of a delete;
- ``_op`` (``I``, ``U``, ``D``); ``_change_seq``: one number ordering every change of the
  pipeline, across tables and batches (binlog file sequence, event offset and row index as
  ``seq * 10^24 + offset * 10^12 + row``, a DECIMAL(38,0)); ``_binlog_file``, ``_binlog_pos``,
  ``_row_index``: where the row event is;
- ``_txn`` (``FILE:OFFSET`` where its transaction begins, on any server) and ``_gtid`` (where the
  server has GTIDs): rows of one transaction share them; ``_commit_ts``: when it was committed;
- ``_before``: the before-image of an update, a struct of the table's columns.

The append is committed with the table's MERGE, under the same idempotent transaction ids, so a
retry never writes a change twice. A reader who wants the changelog at the consistent cut keeps
the rows whose position is before the cut's (``_binlog_seq``, ``_binlog_pos`` against
``cut.position``): rows of a batch whose tables are not all committed yet are beyond it.

A copy (snapshot, resnapshot) is not a change and is not in the changelog. The changelog follows
the leader's new columns (NULL in earlier rows) and type changes (``follow``).
"""

from __future__ import annotations

from typing import Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType

from ....contracts import ColumnSpec
from ....contracts import change_row as cr
from ....merge.errors import FollowerSchemaError
from .tables import DeltaTableRef, create_table, delta_value, existing_columns, overwrite, quote, widens

CHANGE_SEQ = "_change_seq"
# the change-row metadata a changelog keeps (all of it, the whole before-image included): what the
# merge job reads for its tables
METADATA = cr.METADATA_NAMES


def change_seq() -> F.Column:
    """The change's place in the pipeline's total order, as one DECIMAL(38,0)."""
    return F.expr(f"CAST(CAST({cr.BINLOG_SEQ} AS DECIMAL(38,0)) * 1e24BD + CAST({cr.BINLOG_POS} AS DECIMAL(38,0)) "
                  f"* 1e12BD + {cr.ROW_INDEX} AS DECIMAL(38,0))")


def changelog_rows(changes: DataFrame, columns: Sequence[ColumnSpec]) -> DataFrame:
    """A table's change rows (with all their metadata) as changelog rows, in Delta types."""
    before = F.struct(*[delta_value(F.col(cr.BEFORE).getField(c.name), c) for c in columns])
    return changes.select(
        *[delta_value(F.col(quote(c.name)), c) for c in columns],
        F.col(cr.OP), change_seq().alias(CHANGE_SEQ), F.col(cr.BINLOG_FILE), F.col(cr.BINLOG_SEQ),
        F.col(cr.BINLOG_POS), F.col(cr.ROW_INDEX), F.col(cr.TXN), F.col(cr.GTID), F.col(cr.COMMIT_TS),
        F.when(F.col(cr.BEFORE).isNotNull(), before).alias(cr.BEFORE),
    )


def follow(spark: SparkSession, table: DeltaTableRef, schema: StructType) -> None:
    """The changelog table ready for rows of ``schema``: created with the lake's table properties
    on first use. New columns need nothing here (the append merges them in). A column whose type
    the leader changed keeps its earlier rows' values exactly: widened in one rewrite where the
    new type holds them all (``tables.widens``: INT to BIGINT, ...), else renamed ``<name>__<old
    type>`` in place (column mapping: no file rewritten), so the append brings the column back in
    its new type and the old values stay beside it. Each step is idempotent by the schema it leaves."""
    if existing_columns(spark, table) is None:
        create_table(spark, table, schema.toDDL())
        return
    current = spark.read.format("delta").load(table.path).schema
    renames = list(_retyped(current, schema, ""))
    for path, new_name in renames:
        spark.sql(f"ALTER TABLE {table.sql} RENAME COLUMN {path} TO {quote(new_name)}")
    rows = spark.read.format("delta").load(table.path)
    have = {f.name.lower(): f for f in rows.schema.fields}
    wanted = {f.name.lower(): f for f in schema.fields}
    changed = {name for name, f in wanted.items() if name in have and have[name].dataType != f.dataType}
    if changed:
        overwrite(spark, table, rows.select(*[
            _widened(F.col(quote(have[name].name)), have[name], wanted[name], table) if name in changed
            else F.col(quote(f.name)) for name, f in have.items()]))


def _retyped(have: StructType, want: StructType, prefix: str):
    """(column path, new name) of each column (nested in the before-image too) whose type changed
    to one that does not hold its old values exactly."""
    names = {f.name.lower() for f in have.fields}
    wanted = {f.name.lower(): f for f in want.fields}
    for field in have.fields:
        new = wanted.get(field.name.lower())
        if new is None or new.dataType == field.dataType:
            continue
        path = prefix + quote(field.name)
        if isinstance(field.dataType, StructType) and isinstance(new.dataType, StructType):
            yield from _retyped(field.dataType, new.dataType, path + ".")
        elif not widens(field.dataType.simpleString(), new.dataType.simpleString()):
            kept = f"{field.name}__{field.dataType.simpleString()}"
            while kept.lower() in names:  # changed away from this type before: a name of its own
                kept += "_"
            names.add(kept.lower())
            yield path, kept


def _widened(value: F.Column, have: StructField, want: StructField, table: DeltaTableRef) -> F.Column:
    """``value`` (a column, or the before-image struct) in ``want``'s type, field by field."""
    if isinstance(have.dataType, StructType) and isinstance(want.dataType, StructType):
        wanted = {f.name.lower(): f for f in want.dataType.fields}
        fields = F.struct(*[
            _widened(value.getField(f.name), f, wanted[f.name.lower()], table)
            if f.name.lower() in wanted and wanted[f.name.lower()].dataType != f.dataType
            else value.getField(f.name).alias(f.name)
            for f in have.dataType.fields])
        return F.when(value.isNotNull(), fields).alias(have.name)  # an insert's or delete's stays NULL
    old, new = have.dataType.simpleString(), want.dataType.simpleString()
    if not widens(old, new):  # _retyped renamed every such column first
        raise FollowerSchemaError(f"the changelog of {table.name} ({table.path}): {have.name} is {old}, the rows "
                                  f"bring {new}, which its earlier rows cannot take exactly")
    return value.cast(want.dataType).alias(have.name)


def append(table: DeltaTableRef, rows: DataFrame) -> None:
    """Append the rows, new columns merged into the table's schema; idempotent under the
    session's Delta transaction ids (``DeltaSink.idempotent``)."""
    rows.write.format("delta").mode("append").option("mergeSchema", "true").save(table.path)
