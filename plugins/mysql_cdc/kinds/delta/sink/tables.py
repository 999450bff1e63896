"""A leader table as a Delta table, through Spark's Delta writer: its columns in Delta types, its
creation, its schema following the leader's, and the one-commit writes the sink makes.

Types (``delta_column``): what the batch's Arrow type is in Delta, exactly. Where Spark has no type
for the MySQL value, a lossless one stands in: TIME (a span of ±838 h, microseconds) is a BIGINT of
microseconds; DECIMAL above 38 digits is its exact digits as STRING (as capture already writes
it); BIGINT UNSIGNED is DECIMAL(20,0); BIT, BINARY and BLOB are BINARY (BIT as MySQL's big-endian
bytes); JSON, ENUM and SET are STRING (SET as its comma list); YEAR is SMALLINT; DATETIME is
TIMESTAMP_NTZ (a wall clock) and TIMESTAMP is TIMESTAMP (an instant).

Table features (the pipeline's ``features``, ``TABLE_FEATURES``): ``standard`` tables are created
with column mapping by name (so a column can be renamed or dropped without rewriting the table)
and deletion vectors (so a MERGE that changes a few rows of a large table writes those rows, not
every file that holds one of them); ``portable`` tables have neither, so readers without those
features (delta-rs's ``to_pyarrow_table``/``to_pandas``, Polars) open them: a rename or a drop of a
column then rewrites the table in one commit, and Spark's MERGE rewrites the files holding the rows
it changes. How a rename or a drop is made follows the table's own column mapping, so a table keeps
working whatever it was created with. Every table has Change Data Feed on. Delta's type-widening table feature is not
turned on: delta-rs (1.6) refuses to read a table that has it, and the lake must stay readable by
every Delta reader; a type change that widens exactly (INT -> BIGINT, FLOAT -> DOUBLE, a wider
DECIMAL, DATE -> TIMESTAMP_NTZ) rewrites the table with the new type in one commit instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from ....merge import history, soft_deletes
from ....merge.errors import FollowerSchemaError
from ....contracts import ColumnSpec
from ..state.tables import CHECKPOINT_INTERVAL

_EVERY_TABLE = {
    "delta.enableChangeDataFeed": "true",
    # DATETIME is TIMESTAMP_NTZ, whose table feature Delta enables by itself only when a table is
    # created with such a column: a table that gets one later (a column added, a copy with a new
    # shape) must have it already
    "delta.feature.timestampNtz": "supported",
    "delta.checkpointInterval": CHECKPOINT_INTERVAL,
}
# the pipeline's ``features`` -> the properties its tables are created with
TABLE_FEATURES = {
    "standard": {
        **_EVERY_TABLE,
        "delta.columnMapping.mode": "name",
        # a MERGE marks the rows it replaces in a deletion vector instead of rewriting their files:
        # its cost follows the change, not the table
        "delta.enableDeletionVectors": "true",
    },
    # what delta-rs's plain readers and Polars open (``docs/lakehouse.md``, "Readers")
    "portable": {**_EVERY_TABLE, "delta.enableDeletionVectors": "false"},
}
# reader features a ``portable`` table must not have (delta-rs's protocol names)
NOT_PORTABLE = frozenset({"columnMapping", "deletionVectors"})

_SIMPLE = {
    "int8": "TINYINT", "int16": "SMALLINT", "int32": "INT", "int64": "BIGINT", "float": "FLOAT",
    "double": "DOUBLE", "string": "STRING", "binary": "BINARY", "date32[day]": "DATE", "bool": "BOOLEAN",
    "timestamp[us]": "TIMESTAMP_NTZ", "timestamp[us, tz=UTC]": "TIMESTAMP", "duration[us]": "BIGINT",
}
_DECIMAL = re.compile(r"^decimal(?:128)?\((\d+), ?(\d+)\)$")
# Type changes that are exact (every old value is the same value in the new type): the table is
# rewritten with the new type; any other type change needs the table copied again.
_WIDER = {
    "TINYINT": ("SMALLINT", "INT", "BIGINT"), "SMALLINT": ("INT", "BIGINT"), "INT": ("BIGINT",),
    "FLOAT": ("DOUBLE",), "DATE": ("TIMESTAMP_NTZ",),
}


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def delta_type(column: ColumnSpec, where: str) -> str:
    """The Delta (Spark SQL) type of a batch column."""
    if column.arrow_type in _SIMPLE:
        return _SIMPLE[column.arrow_type]
    match = _DECIMAL.match(column.arrow_type)
    if match:
        return f"DECIMAL({match[1]},{match[2]})"
    raise FollowerSchemaError(f"{where}.{column.name}: the batch's Arrow type {column.arrow_type!r} has no Delta type here")


def delta_value(value: Column, column: ColumnSpec) -> Column:
    """A value of the batch column (``value``: the column, or a field of a before-image) as its
    Delta value (a TIME's microseconds, a DATETIME's wall clock), named as the column."""
    if column.arrow_type == "duration[us]":
        # Spark reads Arrow durations as day-time intervals; their microseconds, exactly
        return F.unix_micros(F.lit("1970-01-01 00:00:00Z").cast("timestamp") + value).alias(column.name)
    if column.arrow_type == "timestamp[us]":
        return value.cast("timestamp_ntz").alias(column.name)
    return value.alias(column.name)


def delta_column(column: ColumnSpec) -> Column:
    """The batch column as its Delta value."""
    return delta_value(F.col(quote(column.name)), column)


def to_delta(df: DataFrame, columns: Sequence[ColumnSpec], extra: Sequence[str] = ()) -> DataFrame:
    """``df``'s table columns as Delta values, with the ``extra`` columns (the net op and count)."""
    return df.select(*[delta_column(c) for c in columns], *[F.col(e) for e in extra])


@dataclass(frozen=True)
class DeltaTableRef:
    """One Delta table of the follower: ``path`` as Spark reaches it, ``name`` the leader's,
    ``features`` what it is created with (a key of ``TABLE_FEATURES``), ``partition_by`` the columns
    the pipelines file partitions it by (``options.LakeOptions.partition_columns``), ``keeps_deleted``
    whether it keeps the rows the leader deleted (``merge.soft_deletes``)."""

    name: str
    path: str
    features: str = "standard"
    partition_by: tuple[str, ...] = ()
    keeps_deleted: bool = False  # soft deletes: the table has ``MARK_COLUMNS`` after the leader's
    keeps_history: bool = False  # every version of each row: the table has ``HISTORY_COLUMNS`` after the leader's

    @property
    def added_columns(self) -> tuple[tuple[str, str], ...]:
        """The (name, Delta type) columns the follower adds after the leader's (a history mode's)."""
        return MARK_COLUMNS if self.keeps_deleted else HISTORY_COLUMNS if self.keeps_history else ()

    @property
    def held_now(self) -> str | None:
        """A SQL predicate of the rows the leader holds, in a table that keeps others too (deleted
        rows, earlier versions); None: every row is the leader's."""
        if self.keeps_deleted:
            return f"{quote(soft_deletes.DELETED)} IS NOT TRUE"
        return f"{quote(history.CURRENT)} IS NOT FALSE" if self.keeps_history else None

    @property
    def sql(self) -> str:
        return f"delta.{quote(self.path)}"


def existing_columns(spark: SparkSession, table: DeltaTableRef) -> dict[str, str] | None:
    """The table's columns (lower-cased name -> (name, Spark SQL type)), or None when it does not exist."""
    from pyspark.errors import AnalysisException

    try:
        fields = spark.read.format("delta").load(table.path).schema.fields
    except AnalysisException as exc:
        if "DELTA_MISSING_DELTA_TABLE" in str(exc) or "is not a Delta table" in str(exc) or "PATH_NOT_FOUND" in str(exc):
            return None
        raise
    return {f.name.lower(): (f.name, f.dataType.simpleString().upper()) for f in fields}


# soft deletes' marks (``merge.soft_deletes``) as Delta columns: a TIMESTAMP is an instant (UTC)
MARK_COLUMNS = ((soft_deletes.DELETED, "BOOLEAN"), (soft_deletes.DELETED_AT, "TIMESTAMP"),
                (soft_deletes.DELETED_TXN, "STRING"))
# a history table's (``merge.history``): its versions' validity
HISTORY_COLUMNS = ((history.VALID_FROM, "TIMESTAMP"), (history.VALID_FROM_SEQ, "DECIMAL(38,0)"),
                   (history.VALID_TO, "TIMESTAMP"), (history.VALID_TO_SEQ, "DECIMAL(38,0)"), (history.CURRENT, "BOOLEAN"))


def leader_part(existing: dict[str, tuple[str, str]], table: DeltaTableRef) -> tuple[dict[str, tuple[str, str]], bool]:
    """A table's columns (``existing_columns``'s, ``lake_columns``'s) without those a history mode adds
    (``DeltaTableRef.added_columns``), and whether it lacks some of them (made before it kept them)."""
    added = {name for name, _ in table.added_columns}
    return {k: v for k, v in existing.items() if k not in added}, not added <= set(existing)


def schema_ddl(columns: Sequence[ColumnSpec], where: str) -> str:
    """The columns as a Spark SQL column list, in Delta types."""
    return ", ".join(f"{quote(c.name)} {delta_type(c, where)}" for c in columns)


def create_table(spark: SparkSession, table: DeltaTableRef, columns: Sequence[ColumnSpec] | str) -> None:
    """The table with ``columns`` (batch columns, or a Spark SQL column list), partitioned as the
    pipelines file says, with the properties every table of the lake has, unless it exists."""
    from .partition_values import check_types

    definition = columns if isinstance(columns, str) else schema_ddl(columns, table.name)
    # (a column list of the lake's, a renamed table's, has them already; every list here quotes its names)
    if table.added_columns and f"{quote(table.added_columns[0][0])} " not in definition:
        definition = ", ".join([definition, *(f"{quote(name)} {kind}" for name, kind in table.added_columns)])
    # (a column list's names and types are Spark's to parse; batch columns say theirs)
    types = ({f.name: f.dataType.simpleString() for f in spark.createDataFrame([], definition).schema.fields}
             if isinstance(columns, str) else {c.name: delta_type(c, table.name) for c in columns})
    partitioning = partitioned_by(table, list(types))
    check_types(table, types)
    partitioned = f" PARTITIONED BY ({', '.join(quote(c) for c in partitioning)})" if partitioning else ""
    properties = ", ".join(f"'{k}' = '{v}'" for k, v in TABLE_FEATURES[table.features].items())
    spark.sql(f"CREATE TABLE IF NOT EXISTS {table.sql} ({definition}) USING delta{partitioned} "
              f"TBLPROPERTIES ({properties})")


def partitioned_by(table: DeltaTableRef, names: Sequence[str]) -> tuple[str, ...]:
    """The table's partition columns spelled as its columns ``names`` spell them (MySQL's column
    names are case-insensitive). A column the table does not have raises ``FollowerSchemaError``
    naming the setting to fix: the merge stops before it writes anything."""
    spelled = {n.lower(): n for n in names}
    missing = [c for c in table.partition_by if c.lower() not in spelled]
    if missing:
        raise FollowerSchemaError(
            f"{table.name}: partition_by names the column(s) {', '.join(missing)}, which the table does not have "
            f"(its columns: {', '.join(names)}); name its columns in the follower's partition_by for "
            f"{table.name!r} in the pipelines file, then run the pipeline again")
    return tuple(spelled[c.lower()] for c in table.partition_by)


def partition_columns(spark: SparkSession, table: DeltaTableRef) -> list[str]:
    """The columns the table is partitioned by now (its log's, whatever the pipelines file says)."""
    return list(spark.sql(f"DESCRIBE DETAIL {table.sql}").first()["partitionColumns"])


def same_columns(a: Sequence[str], b: Sequence[str]) -> bool:
    return [c.lower() for c in a] == [c.lower() for c in b]


def _normal(spark_type: str) -> str:
    return {"BYTE": "TINYINT", "SHORT": "SMALLINT", "INTEGER": "INT",
            "LONG": "BIGINT"}.get(spark_type, spark_type).replace(" ", "")


def same_type(a: str, b: str) -> bool:
    """Whether two Spark SQL type names (Spark's or delta-rs's spelling) are one type."""
    return _normal(a.upper()) == _normal(b.upper())


def lake_columns(table) -> dict[str, tuple[str, str]]:
    """``existing_columns``'s answer for a table delta-rs opened (``deltalake.DeltaTable``): read from
    the log delta-rs already holds, where Spark would run a job to resolve the table."""
    columns = {}
    for field in table.schema().fields:
        kind = field.type.type if hasattr(field.type, "type") else str(field.type)
        columns[field.name.lower()] = (field.name, _normal(kind.upper()))
    return columns


@dataclass(frozen=True)
class SchemaChanges:
    """What makes a table's columns the batch's: columns to add, to drop, and to widen exactly."""

    added: tuple[ColumnSpec, ...] = ()
    dropped: tuple[str, ...] = ()
    widened: tuple[tuple[str, str], ...] = ()  # (the table's column, its new Spark SQL type)

    def __bool__(self) -> bool:
        return bool(self.added or self.dropped or self.widened)


def schema_changes(existing: dict[str, tuple[str, str]], columns: Sequence[ColumnSpec], where: str) -> SchemaChanges:
    """The changes that make ``existing`` (``existing_columns``) the batch's ``columns``. A type change
    that is not an exact widening raises ``FollowerSchemaError`` naming the re-copy that repairs it."""
    wanted = {c.name.lower(): c for c in columns}
    widened = []
    for name, column in wanted.items():
        if name not in existing:
            continue
        have, want = _normal(existing[name][1]), _normal(delta_type(column, where))
        if have == want:
            continue
        if not widens(have, want):
            raise FollowerSchemaError(
                f"{where}.{column.name} changed type from {have} to {want} on the leader, which Delta cannot "
                f"widen exactly; copy the table again: trigger the pipeline with conf {{\"resnapshot\": [\"{where}\"]}}")
        widened.append((existing[name][0], want))
    return SchemaChanges(tuple(c for name, c in wanted.items() if name not in existing),
                         tuple(existing[name][0] for name in existing if name not in wanted), tuple(widened))


def follow_schema(spark: SparkSession, table: DeltaTableRef, columns: Sequence[ColumnSpec]) -> None:
    """Make the table's columns the batch's and its partitioning the pipelines file's: create it;
    add the leader's new columns and drop the ones it dropped in its metadata; and where that
    cannot be (an exact type widening, a partitioning that changed, a partition column dropped)
    rewrite its rows in one commit with all of it (``schema_changes``). Each step is a Delta commit
    idempotent by the schema and the partitioning it leaves (a retry finds it done)."""
    existing = existing_columns(spark, table)
    if existing is None:
        create_table(spark, table, columns)
        return
    existing, lacks_added = leader_part(existing, table)
    if lacks_added:
        add_columns(spark, table)
    changes = kept_changes(schema_changes(existing, columns, table.name), table)
    partitioning = partition_columns(spark, table)
    if (changes.widened or not same_columns(partitioning, table.partition_by)
            or {c.lower() for c in changes.dropped} & {c.lower() for c in partitioning}):
        _rewrite(spark, table, changes)
        return
    if changes.dropped:
        _drop_columns(spark, table, changes.dropped)
    if changes.added:
        definition = ", ".join(f"{quote(c.name)} {delta_type(c, table.name)}" for c in changes.added)
        spark.sql(f"ALTER TABLE {table.sql} ADD COLUMNS ({definition})")


def kept_changes(changes: "SchemaChanges", table: DeltaTableRef) -> "SchemaChanges":
    """``changes`` as a table of a history mode takes them: a column the leader dropped stays (the
    deleted rows' or earlier versions' values of it with it; the leader's rows have it NULL)."""
    from dataclasses import replace

    return replace(changes, dropped=()) if table.added_columns else changes


def add_columns(spark: SparkSession, table: DeltaTableRef) -> None:
    """The columns of the table's history mode (``added_columns``), added to a table made before it
    kept them (its rows live, or current versions: NULL reads so). Idempotent: a column it has is
    not added again."""
    have = {f.name.lower() for f in spark.read.format("delta").load(table.path).schema.fields}
    missing = ", ".join(f"{quote(name)} {kind}" for name, kind in table.added_columns if name not in have)
    if missing:
        spark.sql(f"ALTER TABLE {table.sql} ADD COLUMNS ({missing})")


def _rewrite(spark: SparkSession, table: DeltaTableRef, changes: SchemaChanges) -> None:
    """The table's rows rewritten in one commit with ``changes`` made (new columns NULL, at the end
    as ``ADD COLUMNS`` puts them) and partitioned as the pipelines file says (``overwrite``)."""
    widened = dict(changes.widened)
    rows = spark.read.format("delta").load(table.path).drop(*changes.dropped)
    overwrite(spark, table, rows.select(
        *[F.col(quote(f)).cast(widened[f]).alias(f) if f in widened else F.col(quote(f)) for f in rows.columns],
        *[F.lit(None).cast(delta_type(c, table.name)).alias(c.name) for c in changes.added]))


def widens(have: str, want: str) -> bool:
    """Whether every value of Spark SQL type ``have`` is the same value in ``want``."""
    have, want = _normal(have.upper()), _normal(want.upper())
    return want in _WIDER.get(have, ()) or _decimal_widens(have, want)


def _decimal_widens(have: str, want: str) -> bool:
    a, b = _DECIMAL_SQL.match(have), _DECIMAL_SQL.match(want)
    if not (a and b):
        return False
    (p1, s1), (p2, s2) = (int(a[1]), int(a[2])), (int(b[1]), int(b[2]))
    return s2 >= s1 and p2 - s2 >= p1 - s1  # no digit lost on either side of the point


_DECIMAL_SQL = re.compile(r"^DECIMAL\((\d+),(\d+)\)$")


def maps_columns(spark: SparkSession, table: DeltaTableRef) -> bool:
    """Whether the table maps its columns by name (a ``standard`` table): a rename or a drop is then
    a change of its metadata; without it, a rewrite of its rows."""
    mode = spark.sql(f"SHOW TBLPROPERTIES {table.sql} ('delta.columnMapping.mode')").first()[1]
    return mode in ("name", "id")


def rename_column(spark: SparkSession, table: DeltaTableRef, old: str, new: str) -> None:
    """``old`` renamed ``new``, unless a retry finds it done (or the table never had it). A column
    the pipelines file partitions the table by is not renamed until the file names the new one."""
    existing = existing_columns(spark, table) or {}
    if old.lower() not in existing or new.lower() in existing:
        return
    _not_partitioned_by(table, old, f"the leader renamed {table.name}.{old} to {new}", f"name {new!r} instead")
    if maps_columns(spark, table):
        spark.sql(f"ALTER TABLE {table.sql} RENAME COLUMN {quote(existing[old.lower()][0])} TO {quote(new)}")
    else:
        rows = spark.read.format("delta").load(table.path)
        overwrite(spark, table, rows.withColumnRenamed(existing[old.lower()][0], new))


def drop_column(spark: SparkSession, table: DeltaTableRef, name: str) -> None:
    existing = existing_columns(spark, table) or {}
    if name.lower() in existing and len(existing) > 1:
        _not_partitioned_by(table, name, f"the leader dropped {table.name}.{name}", "remove it")
        _drop_columns(spark, table, (existing[name.lower()][0],))


def _not_partitioned_by(table: DeltaTableRef, column: str, what: str, fix: str) -> None:
    """Raise ``FollowerSchemaError`` if the pipelines file partitions ``table`` by ``column``, whose
    DDL (``what``) would leave the table without it: the merge stops, nothing written, until the
    file says how the table is partitioned after it (``fix``)."""
    if column.lower() in {c.lower() for c in table.partition_by}:
        raise FollowerSchemaError(
            f"{what}, which the follower's partition_by in the pipelines file partitions it by "
            f"({', '.join(table.partition_by)}); {fix} in partition_by for {table.name!r}, then run the pipeline "
            "again: the retry makes the DDL's change and the file's partitioning together")


def _drop_columns(spark: SparkSession, table: DeltaTableRef, names: Sequence[str]) -> None:
    """The columns (as the table spells them) dropped: in its metadata, or by a rewrite of its rows
    in one commit when it does not map its columns (``maps_columns``) or is partitioned by one of
    them (Delta drops no partition column: the rewrite partitions it as the pipelines file says)."""
    dropping = {n.lower() for n in names}
    if maps_columns(spark, table) and not dropping & {c.lower() for c in partition_columns(spark, table)}:
        spark.sql(f"ALTER TABLE {table.sql} DROP COLUMNS ({', '.join(quote(n) for n in names)})")
    else:
        overwrite(spark, table, spark.read.format("delta").load(table.path).drop(*names))


def table_exists(spark: SparkSession, table: DeltaTableRef) -> bool:
    return existing_columns(spark, table) is not None


def _set_change_feed(spark: SparkSession, table: DeltaTableRef, on: bool) -> None:
    spark.sql(f"ALTER TABLE {table.sql} SET TBLPROPERTIES ('delta.enableChangeDataFeed' = '{str(on).lower()}')")


def overwrite(spark: SparkSession, table: DeltaTableRef, rows: DataFrame, txn: tuple[str, int] | None = None) -> None:
    """Replace the table's rows (and, when they differ, its columns and its partitioning: the
    pipelines file's, ``partitioned_by``) in one commit; ``txn`` (app id, version) makes the commit
    idempotent.

    Delta refuses a commit that writes rows and drops or retypes a column at once on a table with
    Change Data Feed and column mapping (``DELTA_BLOCK_COLUMN_MAPPING_AND_CDC_OPERATION``): for a
    new shape the feed is turned off around that one commit (the feed has no changes for it: a
    reader of the feed starts again after it) and on again; a retry after a crash in between finds
    it off and turns it on."""
    current = spark.read.format("delta").load(table.path).schema
    partitioning = partitioned_by(table, rows.columns)
    reshaped = [(f.name.lower(), f.dataType) for f in current.fields] != [
        (f.name.lower(), f.dataType) for f in rows.schema.fields] or not same_columns(
        partition_columns(spark, table), partitioning)
    writer = rows.write.format("delta").mode("overwrite").partitionBy(*partitioning)
    if txn is not None:
        writer = writer.option("txnAppId", txn[0]).option("txnVersion", txn[1])
    if reshaped:
        # a table created before timestampNtz was one of the lake's properties may need it now
        spark.sql(f"ALTER TABLE {table.sql} SET TBLPROPERTIES ('delta.feature.timestampNtz' = 'supported')")
        _set_change_feed(spark, table, False)
        writer.option("overwriteSchema", "true").save(table.path)
    else:
        writer.save(table.path)
    if reshaped or spark.sql(f"SHOW TBLPROPERTIES {table.sql} ('delta.enableChangeDataFeed')").first()[1] != "true":
        _set_change_feed(spark, table, True)
