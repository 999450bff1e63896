"""A small keyed table's net rows as two SQL statements of the follower transaction.

A batch of an OLTP application touches many tables with a few rows each. Through a staging table
and a load file (``staging``), every such table cost a table created and loaded in the follower, a
file written, a ``LOAD DATA`` and a ``SHOW WARNINGS``: about ten milliseconds of round trips and
fixed work for a hundred rows. Here the same rows become

- ``DELETE FROM t WHERE k IN (...)``: the keys of the ``U`` and ``D`` rows (``(k1, k2) IN ((..), ..)``
  for a composite key), and
- ``INSERT INTO t (cols) VALUES (...), ...``: the ``I`` and ``U`` rows,

which the follower transaction sends many tables at a time in one round trip
(``rows.apply_statements``). The counts are checked as the staged path checks them, per statement.

Every value is a literal the server reads back exactly, built from the load file's own encoding
(``encoding.load_column``), so both paths write the same values:

- integers: bare digits (a quoted number would compare with a key as a double);
- text: ``_utf8mb4 X'<hex of its UTF-8 bytes>'``: no escaping to get wrong, whatever the session's
  ``sql_mode``; in a comparison the column's collation applies (a literal is more coercible), so
  a key matches as the staging table's join would match it;
- binary and BIT: the load file's expression over the hex (``UNHEX('..')``, ``CAST(CONV(..))``);
- everything else (DECIMAL, FLOAT/DOUBLE, dates, times, YEAR): the load file's text, quoted; the
  server converts it as it converts the load file's field.

Only keys whose literals compare exactly take this path (``statement_key``): integers, text and
dates with times. A binary key (BINARY(n) pads with zero bytes, a literal does not), a DECIMAL or a
FLOAT key, and keyless tables keep the staging table, as do tables with more net rows than
``STATEMENT_ROWS`` (there ``LOAD DATA`` is the faster way) or statements over ``STATEMENT_BYTES``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from ...contracts import TableChanges
from ...contracts import change_row as cr
from .encoding import LoadColumn, hex_text, load_column, quote_ident
from .tables import FollowerColumn, qualified

OP = cr.NET_OP

STATEMENT_ROWS = 2_000  # net rows up to which a keyed table goes as statements
STATEMENT_BYTES = 1 << 20  # and the most bytes its two statements may take (max_allowed_packet allowing)

_KEY_TYPES = frozenset({
    "tinyint", "smallint", "mediumint", "int", "bigint",  # bare digits
    "char", "varchar", "tinytext", "text", "mediumtext", "longtext",  # the column's collation
    "date", "datetime", "timestamp",  # the server's own conversion of the text, as in a load file
})


def statement_key(table: TableChanges, columns: Sequence[FollowerColumn]) -> bool:
    """Whether the table's key compares exactly with literals (see the module docstring)."""
    by_name = {c.name.lower(): c for c in columns}
    keys = [by_name.get(k.lower()) for k in table.key_columns]
    return bool(keys) and all(k is not None and k.data_type in _KEY_TYPES for k in keys)


def _text(values: pa.Array) -> pa.Array:
    # a cast costs tens of microseconds even when there is nothing to convert; the encoders give
    # string arrays (a table's statements are far below string's 2 GiB)
    return values if values.type == pa.string() else pc.cast(values, pa.string())


def _concat(*parts) -> pa.Array:
    """The element-wise concatenation of arrays and constant texts, as a string array."""
    parts = [pa.scalar(p, pa.string()) if isinstance(p, str) else _text(p) for p in parts]
    return pc.binary_join_element_wise(*parts, pa.scalar("", pa.string()))


def literal_texts(column: LoadColumn, arrow_type: pa.DataType, values: pa.Array) -> pa.Array:
    """The SQL literal of every value of one column (``NULL`` for a null), as a string array."""
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        text = _concat("_utf8mb4 X'", hex_text(values), "'")  # (hex_text takes the bytes of any string)
    elif pa.types.is_integer(arrow_type):
        text = _text(values)
    else:
        # the load file's field (its \\N for a null is replaced below), through its SET expression
        before, after = (column.via_variable or "{v}").split("{v}")
        text = _concat(before + "'", column.encode(values), "'" + after)
    return pc.if_else(values.is_null(), pa.scalar("NULL", pa.string()), text) if values.null_count else text


def _literals(rows: pa.Table, names: Sequence[str], mysql_types: dict[str, str]) -> list[pa.Array]:
    """The SQL literals of the rows' columns ``names``, one string array per column."""
    arrays = []
    for name in names:
        values = rows.column(name).combine_chunks()
        arrays.append(literal_texts(load_column(name, values.type, mysql_types[name]), values.type, values))
    return arrays


def _rows_sql(literals: list[pa.Array]) -> str:
    """``(v1, v2), (v1, v2), ...``: the rows of the columns' literals."""
    joined = pc.binary_join_element_wise(*literals, pa.scalar(", ", pa.string())) if len(literals) > 1 \
        else literals[0]
    return "(" + "), (".join(joined.to_pylist()) + ")"


@dataclass(frozen=True)
class TableStatements:
    """One table's net rows as the statements the follower transaction runs, with the rows each
    must change (a key the leader changed existed at the checkpoint: its delete finds one row)."""

    delete: str | None
    deletes_expected: int
    insert: str | None
    inserts_expected: int

    @property
    def size(self) -> int:
        return len(self.delete or "") + len(self.insert or "")


def table_statements(table: TableChanges, columns: Sequence[FollowerColumn], net: pa.Table) -> TableStatements:
    """The DELETE of the keys the batch changed or removed and the INSERT of the rows it leaves."""
    target = qualified(table.database, table.table)
    mysql_types = {c.name: c.mysql_type for c in table.columns}
    ops = net.column(OP)
    removed = net.filter(pc.is_in(ops, pa.array([cr.UPDATE, cr.DELETE])))
    added = net.filter(pc.is_in(ops, pa.array([cr.INSERT, cr.UPDATE])))
    delete = insert = None
    if removed.num_rows:
        keys = list(table.key_columns)
        key_sql = quote_ident(keys[0]) if len(keys) == 1 else "(" + ", ".join(map(quote_ident, keys)) + ")"
        literals = _literals(removed, keys, mysql_types)
        values = ", ".join(literals[0].to_pylist()) if len(keys) == 1 else _rows_sql(literals)
        delete = f"DELETE FROM {target} WHERE {key_sql} IN ({values})"
    if added.num_rows:
        # generated columns compute themselves (as in the load file)
        names = [c.name for c, f in zip(table.columns, columns) if not f.generated]
        values = _rows_sql(_literals(added, names, mysql_types))
        insert = f"INSERT INTO {target} ({', '.join(map(quote_ident, names))}) VALUES {values}"
    return TableStatements(delete, removed.num_rows, insert, added.num_rows)


def takes_statements(table: TableChanges, columns: Sequence[FollowerColumn], net_rows: int) -> bool:
    """Whether a table's net rows go as statements rather than through a staging table."""
    return net_rows <= STATEMENT_ROWS and statement_key(table, columns)

