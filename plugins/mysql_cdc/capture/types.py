"""MySQL column types as the binlog describes them -> exact Arrow types and value converters.

Every choice here is about exact round-trips, not convenience:

- unsigned integers widen to the next signed type (Spark has no unsigned types); BIGINT UNSIGNED
  becomes decimal(20,0) so 2^64-1 survives.
- DECIMAL up to 38 digits is decimal128(p,s); wider (MySQL allows 65) is kept as its exact text,
  because neither Spark nor most readers handle decimal256.
- TIME is a duration: MySQL TIME spans -838:59:59.999999..838:59:59.999999, not a time of day.
- TIMESTAMP is a UTC instant; DATETIME is a naive wall-clock value.
- BIT(n) is the big-endian bytes MySQL returns for it; SET is its comma-joined text (what MySQL
  accepts back); JSON is its text.

Dispatch is a table keyed by the binlog field type (see ``_BUILDERS``). Each builder also says
what the compiled decoder (``native``) makes of the column: a ``NativePlan`` naming the same Arrow
type, or None where only this reference path decodes it exactly (text in a character set other
than UTF-8); a table with such a column is decoded here.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Callable

import pyarrow as pa
from pymysqlreplication.constants import FIELD_TYPE

from .rows import JSON_NULL
from ..errors import PermanentError

Converter = Callable[[Any], Any]

# (kind, number, names, unsigned): what mysql_cdc.capture.native hands the compiled decoder for one
# column (native/src/plan.rs reads it); ``number`` is a decimal's precision*100+scale or a
# BINARY(n)'s width, ``names`` an ENUM's or SET's values as mysql-replication lists them
NativePlan = tuple[str, int, tuple[str, ...], bool]


def _plan(kind: str, number: int = 0, names=(), unsigned: bool = False) -> NativePlan:
    return (kind, number, tuple(names or ()), unsigned)


@dataclass(frozen=True)
class ColumnType:
    mysql_type: str
    arrow_type: pa.DataType
    convert: Converter | None = None  # applied to non-NULL values before building Arrow arrays
    native: NativePlan | None = None  # the compiled decoder's plan (None: reference path only)


class UnsupportedColumnType(ValueError, PermanentError):
    pass


def _int(name: str, signed: pa.DataType, unsigned: pa.DataType):
    def build(col) -> ColumnType:
        arrow_type = unsigned if col.unsigned else signed
        plan = _plan(str(arrow_type), unsigned=bool(col.unsigned))  # "int8" .. "int64"
        return ColumnType(f"{name} unsigned" if col.unsigned else name, arrow_type, native=plan)

    return build


def _bigint(col) -> ColumnType:
    if col.unsigned:
        # Python int -> Decimal: exact for the whole 0..2^64-1 range
        return ColumnType("bigint unsigned", pa.decimal128(20, 0), Decimal, _plan("uint64_decimal", unsigned=True))
    return ColumnType("bigint", pa.int64(), native=_plan("int64"))


def _decimal(col) -> ColumnType:
    mysql_type = f"decimal({col.precision},{col.decimals})"
    if col.precision <= 38:
        return ColumnType(mysql_type, pa.decimal128(col.precision, col.decimals),
                          native=_plan("decimal", col.precision * 100 + col.decimals))
    # Decimal -> str keeps every digit; format 'f' avoids exponent notation like 1E+30
    return ColumnType(mysql_type, pa.string(), lambda v: format(v, "f"), _plan("decimal_text"))


def _fsp(name: str):
    def suffix(col) -> str:
        fsp = getattr(col, "fsp", 0) or 0
        return f"{name}({fsp})" if fsp else name

    return suffix


def _datetime(col) -> ColumnType:
    return ColumnType(_fsp("datetime")(col), pa.timestamp("us"), native=_plan("datetime"))


def _timestamp(col) -> ColumnType:
    # mysql-replication returns the UTC wall clock (utcfromtimestamp) as a naive datetime;
    # pyarrow reads naive datetimes for a tz-aware type as UTC, which is what they are.
    return ColumnType(_fsp("timestamp")(col), pa.timestamp("us", tz="UTC"), native=_plan("timestamp"))


_US = dt.timedelta(microseconds=1)


def _fix_negative_fractional_time(value: dt.timedelta) -> dt.timedelta:
    """mysql-replication decodes a negative TIME(n>0) with a fraction wrong: it negates the
    integer part and the fraction separately, but MySQL stores the packed value as one signed
    number, so the integer part of a negative value with a fraction is one second further from
    zero and the fraction is its complement. Measured on every fsp 1..6 against the leader's own
    values (tests/capture/test_types.py); undone here rather than forking the library."""
    if value >= dt.timedelta(0) or value.microseconds == 0:
        return value
    magnitude = -(value // _US)  # microseconds the library reports, as a positive number
    whole_seconds = (magnitude + 999_999) // 1_000_000
    fraction = whole_seconds * 1_000_000 - magnitude
    return -((whole_seconds - 1) * 1_000_000 + fraction) * _US


def _time(col) -> ColumnType:
    fsp = getattr(col, "fsp", 0) or 0
    return ColumnType(_fsp("time")(col), pa.duration("us"), _fix_negative_fractional_time if fsp else None,
                      _plan("time"))


def _bit(col) -> ColumnType:
    nbytes = (col.bits + 7) // 8
    # mysql-replication renders BIT as a string of '0'/'1'; turn it back into MySQL's bytes
    return ColumnType(f"bit({col.bits})", pa.binary(), lambda v: int(v, 2).to_bytes(nbytes, "big"), _plan("bit"))


def _set(col) -> ColumnType:
    # sorted by the SET's declared order, which is how MySQL itself renders the value
    order = {v: i for i, v in enumerate(col.set_values or [])}
    plan = _plan("set", names=col.set_values) if col.set_values else None
    return ColumnType("set", pa.string(), lambda v: ",".join(sorted(v, key=order.__getitem__)), plan)


def _json_text(value: Any) -> str:
    if value is JSON_NULL:
        return "null"
    if isinstance(value, str):
        return value

    def default(obj):
        if isinstance(obj, bytes):
            return obj.decode("utf-8")
        if isinstance(obj, Decimal):
            return float(obj)
        return str(obj)

    def keys_to_str(obj):
        if isinstance(obj, dict):
            return {(k.decode() if isinstance(k, bytes) else k): keys_to_str(v) for k, v in obj.items()}
        if isinstance(obj, list):
            return [keys_to_str(v) for v in obj]
        return obj

    return json.dumps(keys_to_str(value), default=default, ensure_ascii=False)


_BLOB_NAMES = {1: "tiny", 2: "", 3: "medium", 4: "long"}


def _is_binary(col) -> bool:
    return (col.character_set_name or "").lower() == "binary"


# the character sets whose bytes the compiled decoder takes as they are (UTF-8); text in any
# other one is decoded by this reference path, with Python's codec for it
_UTF8 = frozenset({"utf8mb4", "utf8mb3", "utf8"})


def _text_plan(col) -> NativePlan | None:
    return _plan("text") if (col.character_set_name or "").lower() in _UTF8 else None


def _text_or_binary(text_name: str, binary_name: str):
    def build(col) -> ColumnType:
        if _is_binary(col):
            return ColumnType(binary_name, pa.binary(), native=_plan("binary"))
        return ColumnType(text_name, pa.string(), native=_text_plan(col))

    return build


def _char_or_binary(col) -> ColumnType:
    if _is_binary(col):
        # The binlog drops BINARY(n)'s trailing 0x00 pad bytes; the stored value has them.
        width = col.max_length
        # (and hands back an empty value as '': bytes.decode of b'' never looks up the codec)
        return ColumnType(f"binary({width})", pa.binary(), lambda v: bytes(v, "ascii").ljust(width, b"\x00")
                          if isinstance(v, str) else v.ljust(width, b"\x00"), _plan("fixed_binary", width))
    return ColumnType("char", pa.string(), native=_text_plan(col))


def _blob(col) -> ColumnType:
    size = _BLOB_NAMES.get(col.length_size, "")
    if _is_binary(col):
        return ColumnType(f"{size}blob", pa.binary(), native=_plan("binary"))
    return ColumnType(f"{size}text", pa.string(), native=_text_plan(col))


_BUILDERS: dict[int, Callable[[Any], ColumnType]] = {
    FIELD_TYPE.TINY: _int("tinyint", pa.int8(), pa.int16()),
    FIELD_TYPE.SHORT: _int("smallint", pa.int16(), pa.int32()),
    FIELD_TYPE.INT24: _int("mediumint", pa.int32(), pa.int32()),
    FIELD_TYPE.LONG: _int("int", pa.int32(), pa.int64()),
    FIELD_TYPE.LONGLONG: _bigint,
    FIELD_TYPE.NEWDECIMAL: _decimal,
    FIELD_TYPE.FLOAT: lambda col: ColumnType("float", pa.float32(), native=_plan("float32")),
    FIELD_TYPE.DOUBLE: lambda col: ColumnType("double", pa.float64(), native=_plan("float64")),
    FIELD_TYPE.YEAR: lambda col: ColumnType("year", pa.int16(), native=_plan("year")),
    FIELD_TYPE.DATE: lambda col: ColumnType("date", pa.date32(), native=_plan("date")),
    FIELD_TYPE.NEWDATE: lambda col: ColumnType("date", pa.date32(), native=_plan("date")),
    FIELD_TYPE.DATETIME: _datetime,
    FIELD_TYPE.DATETIME2: _datetime,
    FIELD_TYPE.TIMESTAMP: _timestamp,
    FIELD_TYPE.TIMESTAMP2: _timestamp,
    FIELD_TYPE.TIME: _time,
    FIELD_TYPE.TIME2: _time,
    FIELD_TYPE.VARCHAR: _text_or_binary("varchar", "varbinary"),
    FIELD_TYPE.VAR_STRING: _text_or_binary("varchar", "varbinary"),
    FIELD_TYPE.STRING: _char_or_binary,
    FIELD_TYPE.BLOB: _blob,
    FIELD_TYPE.TINY_BLOB: _blob,
    FIELD_TYPE.MEDIUM_BLOB: _blob,
    FIELD_TYPE.LONG_BLOB: _blob,
    FIELD_TYPE.ENUM: lambda col: ColumnType("enum", pa.string(),
                                            native=_plan("enum", names=col.enum_values) if col.enum_values else None),
    FIELD_TYPE.SET: _set,
    FIELD_TYPE.BIT: _bit,
    FIELD_TYPE.JSON: lambda col: ColumnType("json", pa.string(), _json_text, _plan("json")),
    FIELD_TYPE.GEOMETRY: lambda col: ColumnType("geometry", pa.binary(), native=_plan("binary")),
}


def column_type(col, table: str) -> ColumnType:
    """The exact type of one binlog column (a pymysqlreplication ``Column``)."""
    try:
        build = _BUILDERS[col.type]
    except KeyError:
        raise UnsupportedColumnType(
            f"{table}.{col.name}: binlog column type {col.type} is not supported; "
            "exclude the table with the pipeline's 'exclude' globs"
        ) from None
    return build(col)
