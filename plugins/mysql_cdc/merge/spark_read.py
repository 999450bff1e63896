"""A batch's Parquet files as Spark DataFrames, read by the executors through ``mysql_cdc.storage``
(``merge.reader``), so a batch on S3 or a local path reads the same, with the batch's own
credentials and no Hadoop filesystem setup."""

from __future__ import annotations

from functools import partial

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from .reader import ReadUnit, change_schema, read_plan, read_units, snapshot_schema
from ..contracts import SnapshotSegment, TableChanges
from ..contracts import change_row as cr
from ..storage import StorageSpec


def spark_schema(arrow_schema):
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(arrow_schema)


def unit_indexes(spark: SparkSession, table: TableChanges) -> tuple[list[ReadUnit], DataFrame]:
    """The table's read units (``reader.read_plan``) and a DataFrame of their indexes, one per
    partition, for a ``mapInArrow`` over them."""
    units = read_plan(table, spark.sparkContext.defaultParallelism)
    return units, spark.range(0, len(units), 1, numPartitions=max(1, len(units)))


def read_changes(spark: SparkSession, storage: StorageSpec, batch_prefix: str, table: TableChanges,
                 metadata: frozenset[str] = frozenset()) -> DataFrame:
    """The table's change rows, with the merge's metadata and ``metadata`` (more of it)."""
    schema = change_schema(table, metadata)
    units, indexes = unit_indexes(spark, table)
    return indexes.mapInArrow(partial(read_units, storage, batch_prefix, schema, units), spark_schema(schema))


def read_snapshot_rows(spark: SparkSession, storage: StorageSpec, batch_prefix: str,
                       segment: SnapshotSegment) -> DataFrame:
    """A copied table's rows, as inserts (the shape ``transforms.net_changes`` gives)."""
    table = segment.as_table_changes()
    schema = snapshot_schema(table)
    units, indexes = unit_indexes(spark, table)
    rows = indexes.mapInArrow(partial(read_units, storage, batch_prefix, schema, units), spark_schema(schema))
    return rows.select("*", F.lit(cr.INSERT).alias(cr.NET_OP), F.lit(1).cast("long").alias(cr.NET_COUNT))
