"""Arrow columns -> the text ``LOAD DATA`` reads, exactly, vectorized.

The merge job stages its net rows in the follower with ``LOAD DATA LOCAL INFILE`` (the fastest
way into MySQL/MariaDB). The file format is the server's default one: fields separated by TAB,
lines ended by LF, ``\\`` escapes, ``\\N`` for NULL, read as utf8mb4. Every value is rendered so
that the server stores exactly the leader's value:

- integers, DECIMAL: their exact decimal text (BIGINT UNSIGNED arrives as decimal(20,0)).
- FLOAT/DOUBLE: the shortest text that round-trips the *double*; a FLOAT is widened to double
  first, so the server parses it to the exact float32 value with no second rounding.
- DATE, DATETIME, TIMESTAMP: ISO text with microseconds; TIMESTAMP as UTC wall clock, which is why
  every loading session runs with ``time_zone = '+00:00'``.
- TIME: ``[-]H:MM:SS.ffffff`` from the duration's microseconds (covers -838:59:59..838:59:59).
- YEAR: four digits, so YEAR 0 stays 0000 (the text '0' would be read as 2000).
- binary strings: hex, turned back into bytes by ``SET col = UNHEX(@v)``; BIT(n): hex, turned into
  the number by ``SET col = CAST(CONV(@v, 16, 10) AS UNSIGNED)`` (LOAD DATA cannot take BIT
  values as raw bytes).
- text: backslash, TAB, LF and NUL escaped.

Rows are assembled with Arrow kernels and the file bytes are taken straight from the resulting
string array's data buffer, so encoding costs a few Arrow passes per column, not Python per value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

NULL_TEXT = "\\N"
FIELD_SEPARATOR = "\t"
LINE_END = "\n"

Encoder = Callable[[pa.Array], pa.Array]  # any Arrow array -> string array without nulls


def _with_nulls(values: pa.Array, original: pa.Array) -> pa.Array:
    """``values`` (text of every valid slot) with ``\\N`` wherever ``original`` is NULL."""
    if original.null_count == 0:
        return values
    return pc.if_else(original.is_null(), pa.scalar(NULL_TEXT), values)


def escape_text(arr: pa.Array) -> pa.Array:
    # the escape character first, or the escapes added below would be escaped again
    out = pc.replace_substring(arr, "\\", "\\\\")
    for raw, escaped in (("\t", "\\t"), ("\n", "\\n"), ("\x00", "\\0")):
        out = pc.replace_substring(out, raw, escaped)
    return _with_nulls(out.fill_null(""), arr)


def _cast_text(arr: pa.Array) -> pa.Array:
    return _with_nulls(pc.cast(arr, pa.string()).fill_null(""), arr)


def _float_text(arr: pa.Array) -> pa.Array:
    return _cast_text(pc.cast(arr, pa.float64()))


def _timestamp_text(arr: pa.Array) -> pa.Array:
    # tz-aware values are UTC instants; dropping the zone keeps the UTC wall clock.
    # Arrow renders microsecond timestamps as 'YYYY-MM-DD HH:MM:SS.ffffff'.
    naive = pc.cast(arr, pa.timestamp("us"))
    return _cast_text(naive)


def _year_text(arr: pa.Array) -> pa.Array:
    return _with_nulls(pc.utf8_lpad(pc.cast(arr, pa.string()).fill_null(""), width=4, padding="0"), arr)


def _digits(values: np.ndarray, width: int) -> pa.Array:
    return pc.utf8_lpad(pc.cast(pa.array(values), pa.string()), width=width, padding="0")


def _time_text(arr: pa.Array) -> pa.Array:
    micros = pc.cast(pc.cast(arr, pa.duration("us")), pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)
    magnitude = np.abs(micros)
    seconds, fraction = np.divmod(magnitude, 1_000_000)
    minutes, secs = np.divmod(seconds, 60)
    hours, mins = np.divmod(minutes, 60)
    sign = pa.array(np.where(micros < 0, "-", ""))
    text = pc.binary_join_element_wise(
        sign, pc.cast(pa.array(hours), pa.string()), ":", _digits(mins, 2), ":", _digits(secs, 2), ".",
        _digits(fraction, 6), "",
    )
    return _with_nulls(text, arr)


def _large_offsets(arr: pa.Array) -> np.ndarray:
    """The int64 offsets of a large_string/large_binary array's slots (honouring a slice)."""
    return np.frombuffer(arr.buffers()[1], dtype=np.int64, count=len(arr) + 1, offset=arr.offset * 8)


# the two lower-case hex digits of every byte value, as ASCII bytes
_HEX_PAIRS = np.array([list(f"{b:02x}".encode()) for b in range(256)], dtype=np.uint8)


def hex_text(arr: pa.Array) -> pa.Array:
    """Lower-case hex of every binary value, computed on the whole data buffer at once."""
    arr = pc.cast(arr, pa.large_binary())
    n = len(arr)
    offsets, data = _large_offsets(arr), arr.buffers()[2]
    start, stop = int(offsets[0]), int(offsets[-1])
    raw = np.frombuffer(data, dtype=np.uint8, count=stop - start, offset=start) if stop > start else np.empty(0, np.uint8)
    hexed = _HEX_PAIRS[raw].reshape(-1)
    new_offsets = (offsets - start) * 2
    text = pa.LargeStringArray.from_buffers(n, pa.py_buffer(new_offsets.tobytes()), pa.py_buffer(hexed.tobytes()))
    return _with_nulls(text, arr)


@dataclass(frozen=True)
class LoadColumn:
    """How one column travels: its encoder, and how the LOAD DATA column list names it."""

    name: str
    encode: Encoder
    via_variable: str | None = None  # SQL turning user variable @v into the value, e.g. UNHEX(@v)


FROM_HEX = "UNHEX({v})"  # a binary string's bytes from the hex a load file carries


def quote_ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def load_column(name: str, arrow_type: pa.DataType, mysql_type: str) -> LoadColumn:
    """The exact encoding of one column, from its Arrow type and (for BIT and YEAR) MySQL type."""
    base = mysql_type.split("(")[0].strip().lower()
    if base == "bit":
        return LoadColumn(name, hex_text, "CAST(CONV({v}, 16, 10) AS UNSIGNED)")
    if pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type):
        return LoadColumn(name, hex_text, FROM_HEX)
    if base == "year":
        return LoadColumn(name, _year_text)
    if pa.types.is_duration(arrow_type):
        return LoadColumn(name, _time_text)
    if pa.types.is_timestamp(arrow_type):
        return LoadColumn(name, _timestamp_text)
    if pa.types.is_floating(arrow_type):
        return LoadColumn(name, _float_text)
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return LoadColumn(name, escape_text)
    if (pa.types.is_integer(arrow_type) or pa.types.is_decimal(arrow_type) or pa.types.is_date32(arrow_type)
            or pa.types.is_boolean(arrow_type)):
        return LoadColumn(name, _cast_text)
    raise TypeError(f"column {name!r}: no exact LOAD DATA encoding for Arrow type {arrow_type}")


def load_data_clause(columns: list[LoadColumn]) -> str:
    """``(col, @v1, ...) SET col2 = UNHEX(@v1)``: the column list of a LOAD DATA statement."""
    targets, assignments = [], []
    for i, col in enumerate(columns):
        if col.via_variable:
            var = f"@v{i}"
            targets.append(var)
            assignments.append(f"{quote_ident(col.name)} = {col.via_variable.format(v=var)}")
        else:
            targets.append(quote_ident(col.name))
    clause = "(" + ", ".join(targets) + ")"
    if assignments:
        clause += " SET " + ", ".join(assignments)
    return clause


def encode_rows(arrays: list[pa.Array], columns: list[LoadColumn]) -> memoryview:
    """The LOAD DATA lines of one batch of rows (one array per column, same length)."""
    if not arrays or len(arrays[0]) == 0:
        return memoryview(b"")
    # large_string: 64-bit offsets, so a batch of big BLOBs cannot overflow the join
    texts = [pc.cast(col.encode(arr), pa.large_string()) for arr, col in zip(arrays, columns)]
    sep, end, empty = (pa.scalar(v, pa.large_string()) for v in (FIELD_SEPARATOR, LINE_END, ""))
    lines = pc.binary_join_element_wise(*texts, sep)
    lines = pc.binary_join_element_wise(lines, empty, end)  # line + LF + "": every line ends in LF
    offsets = _large_offsets(lines)
    # the data buffer of a string array is its values back to back: exactly the file's bytes
    return memoryview(lines.buffers()[2])[int(offsets[0]) : int(offsets[-1])]
