"""The leader's columns as Iceberg columns: the batch's Arrow types (``capture.types``) mapped to the
Iceberg type that holds every value exactly, and the Arrow values cast to what that type writes:

| batch (Arrow)            | Iceberg       | why                                                     |
|--------------------------|---------------|---------------------------------------------------------|
| int8, int16, int32       | int           | Iceberg's smallest integer                              |
| int64                    | long          |                                                         |
| decimal128(p, s)         | decimal(p, s) | BIGINT UNSIGNED is decimal(20, 0) already in the batch  |
| float, double            | float, double |                                                         |
| string, binary           | string, binary|                                                         |
| bool                     | boolean       |                                                         |
| date32[day]              | date          |                                                         |
| timestamp[us]            | timestamp     | DATETIME: the leader's wall clock, no zone              |
| timestamp[us, tz=UTC]    | timestamptz   | TIMESTAMP                                               |
| duration[us]             | long          | TIME in microseconds: MySQL's spans +-838 hours, Iceberg's ``time`` one day |
"""

from __future__ import annotations

import re
from typing import Sequence

import pyarrow as pa

from ...contracts import ColumnSpec
from ...merge.errors import FollowerSchemaError

_SIMPLE: dict[str, pa.DataType] = {
    "int8": pa.int32(), "int16": pa.int32(), "int32": pa.int32(), "int64": pa.int64(),
    "float": pa.float32(), "double": pa.float64(), "string": pa.large_string(), "binary": pa.large_binary(),
    "bool": pa.bool_(), "date32[day]": pa.date32(), "timestamp[us]": pa.timestamp("us"),
    "timestamp[us, tz=UTC]": pa.timestamp("us", tz="UTC"), "duration[us]": pa.int64(),
}
_DECIMAL = re.compile(r"^decimal(?:128)?\((\d+), ?(\d+)\)$")


def iceberg_arrow_type(column: ColumnSpec, where: str) -> pa.DataType:
    """The Arrow type whose Iceberg type holds the batch column's values exactly (pyiceberg maps
    it: int32 to int, large_string to string, ...)."""
    if column.arrow_type in _SIMPLE:
        return _SIMPLE[column.arrow_type]
    match = _DECIMAL.match(column.arrow_type)
    if match and int(match[1]) <= 38:
        return pa.decimal128(int(match[1]), int(match[2]))
    raise FollowerSchemaError(f"{where}.{column.name}: the batch's Arrow type {column.arrow_type!r} has no exact "
                              "Iceberg type (the table in mysql_cdc.kinds.iceberg.types)")


def iceberg_type(arrow_type: pa.DataType):
    """The Iceberg type of a column written from ``arrow_type`` (``iceberg_arrow_type``'s, or ``tables.spark_sql_arrow``'s)."""
    from pyiceberg import types as t

    if pa.types.is_decimal(arrow_type):
        return t.DecimalType(arrow_type.precision, arrow_type.scale)
    if pa.types.is_timestamp(arrow_type):
        return t.TimestamptzType() if arrow_type.tz else t.TimestampType()
    return {pa.int32(): t.IntegerType(), pa.int64(): t.LongType(), pa.float32(): t.FloatType(),
            pa.float64(): t.DoubleType(), pa.large_string(): t.StringType(), pa.string(): t.StringType(),
            pa.large_binary(): t.BinaryType(), pa.binary(): t.BinaryType(), pa.bool_(): t.BooleanType(),
            pa.date32(): t.DateType()}[arrow_type]


def iceberg_schema(columns: Sequence[ColumnSpec], where: str) -> pa.Schema:
    """The Arrow schema an Iceberg table of these columns is created from: every column optional
    (Iceberg makes a required column optional, never the reverse; the leader enforces its NOT NULL)."""
    return pa.schema([pa.field(c.name, iceberg_arrow_type(c, where)) for c in columns])


def to_iceberg(rows: pa.Table, columns: Sequence[ColumnSpec], where: str) -> pa.Table:
    """The table columns of ``rows`` (change rows or net rows) as Iceberg writes them: integers
    widened, a TIME's microseconds (``duration[us]`` cast to int64 is its microseconds, exactly)."""
    arrays = [rows.column(c.name).cast(iceberg_arrow_type(c, where)) for c in columns]
    return pa.Table.from_arrays(arrays, schema=iceberg_schema(columns, where))
