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
- binary: ``X'<hex>'``, its bytes; BIT: the load file's expression over the hex (``CAST(CONV(..))``);
- everything else (DECIMAL, FLOAT/DOUBLE, dates, times, YEAR): the load file's text, quoted; the
  server converts it as it converts the load file's field.

The literals of a group of tables (``tables_statements``) are made once per Arrow type and
encoding for all of the group's columns of that type, whatever their table: an Arrow kernel costs
tens of microseconds however few its rows, and a table of a hundred rows has several columns.

Only keys whose literals compare exactly take this path (``statement_key``): integers, text,
dates with times and binary strings (their hex literal, byte for byte: a BINARY(n) value arrives
padded to its n bytes, as capture restores the pad the binlog drops). A DECIMAL key (its
text may be in E-notation, which bare is a DOUBLE literal), a FLOAT key and keyless tables keep
the staging table, as do tables with more net rows than ``STATEMENT_ROWS`` (there ``LOAD DATA`` is
the faster way) or statements over ``STATEMENT_BYTES``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...apply.netting import op_letters
from ...contracts import TableChanges
from ...contracts import change_row as cr
from .encoding import FROM_HEX, LoadColumn, hex_text, load_column, quote_ident
from .tables import FollowerColumn, qualified

OP = cr.NET_OP

STATEMENT_ROWS = 2_000  # net rows up to which a keyed table goes as statements
STATEMENT_BYTES = 1 << 20  # and the most bytes its two statements may take (max_allowed_packet allowing)

_KEY_TYPES = frozenset({
    "tinyint", "smallint", "mediumint", "int", "bigint",  # bare digits
    "char", "varchar", "tinytext", "text", "mediumtext", "longtext",  # the column's collation
    "date", "datetime", "timestamp",  # the server's own conversion of the text, as in a load file
    "binary", "varbinary",  # X'<hex>': the exact bytes, compared as bytes
})


def statement_key(table: TableChanges, columns: Sequence[FollowerColumn]) -> bool:
    """Whether the table's key compares exactly with literals (see the module docstring)."""
    by_name = {c.name.lower(): c for c in columns}
    keys = [by_name.get(k.lower()) for k in table.key_columns]
    return bool(keys) and all(k is not None and k.data_type in _KEY_TYPES for k in keys)


_STRING = pa.string()
def literal_texts(column: LoadColumn, arrow_type: pa.DataType, values: pa.Array) -> pa.Array:
    """The SQL literal of every value of one column (``NULL`` for a null), as a string array."""
    text_like = pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type)
    if text_like or column.via_variable == FROM_HEX:
        # text: its UTF-8 bytes, read as utf8mb4; binary: its bytes (a hex literal, not UNHEX() of
        # one: the parser takes it as it is, where a function costs the follower per value).
        # (hex_text takes the bytes of any string; one pass per group, so its extra kernels cost little)
        hexed = hex_text(values)
        quote, unquote, empty = (pa.scalar(t, hexed.type) for t in ("_utf8mb4 X'" if text_like else "X'", "'", ""))
        text = pc.binary_join_element_wise(quote, hexed, unquote, empty)
    elif pa.types.is_integer(arrow_type):
        text = pc.cast(values, _STRING)
    else:
        # the load file's field (its \\N for a null is replaced below), through its SET expression
        before, after = (column.via_variable or "{v}").split("{v}")
        encoded = column.encode(values)
        quote, unquote, empty = (pa.scalar(t, encoded.type) for t in (before + "'", "'" + after, ""))  # string or large
        text = pc.binary_join_element_wise(quote, encoded, unquote, empty)
    return pc.if_else(values.is_null(), pa.scalar("NULL", text.type), text) if values.null_count else text


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


class _TableRows:
    """One table's net rows as its statements need them: which rows each takes (the keys of the
    ``U`` and ``D`` rows go in the DELETE, the ``I`` and ``U`` rows in the INSERT) and the
    columns whose literals they use."""

    def __init__(self, table: TableChanges, columns: Sequence[FollowerColumn], net: pa.Table):
        self.target = qualified(table.database, table.table)
        self.net = net
        self.mysql_types = {c.name: c.mysql_type for c in table.columns}
        ops = op_letters(net.column(OP).combine_chunks())
        self.removed = np.flatnonzero(ops != cr.INSERT.encode())
        self.added = np.flatnonzero(ops != cr.DELETE.encode())
        self.keys = list(table.key_columns) if len(self.removed) else []
        # generated columns compute themselves (as in the load file)
        self.names = [c.name for c, f in zip(table.columns, columns) if not f.generated] if len(self.added) else []

    def needed(self) -> list[str]:
        return list(dict.fromkeys([*self.names, *self.keys]))

    def statements(self, texts: dict[str, list[str]]) -> TableStatements:
        """The statements, from the literals of the columns ``needed`` (every net row's)."""
        delete = insert = None
        if self.keys:
            key_sql = quote_ident(self.keys[0]) if len(self.keys) == 1 else "(" + ", ".join(map(quote_ident, self.keys)) + ")"
            if len(self.keys) == 1:
                values = ", ".join(texts[self.keys[0]][i] for i in self.removed)
            else:
                rows = [", ".join(r) for r in zip(*(texts[k] for k in self.keys))]
                values = "(" + "), (".join(rows[i] for i in self.removed) + ")"
            delete = f"DELETE FROM {self.target} WHERE {key_sql} IN ({values})"
        if self.names:
            rows = [", ".join(r) for r in zip(*(texts[n] for n in self.names))]
            values = "(" + "), (".join(rows[i] for i in self.added) + ")"
            insert = f"INSERT INTO {self.target} ({', '.join(map(quote_ident, self.names))}) VALUES {values}"
        return TableStatements(delete, len(self.removed), insert, len(self.added))


def tables_statements(tables: Sequence[tuple[TableChanges, Sequence[FollowerColumn], pa.Table]]
                      ) -> list[TableStatements]:
    """Per (table, follower columns, net rows): the DELETE of the keys the batch changed or removed
    and the INSERT of the rows it leaves.

    The literals are made for all the tables at once: the columns of one Arrow type and encoding,
    whatever their table, are concatenated and encoded by one pass of Arrow kernels, then each
    table's rows are joined from its share. An Arrow kernel costs tens of microseconds however few
    its rows; a thousand small tables could not pay several per column."""
    plans = [_TableRows(table, columns, net) for table, columns, net in tables]
    # (Arrow type, encoder, SET expression) -> [(table, column, values)]
    groups: dict[tuple, list[tuple[int, str, pa.Array]]] = {}
    encodings: dict[tuple, LoadColumn] = {}
    for i, plan in enumerate(plans):
        for name in plan.needed():
            values = plan.net.column(name).combine_chunks()
            column = load_column(name, values.type, plan.mysql_types[name])
            key = (values.type, column.encode, column.via_variable)
            encodings.setdefault(key, column)
            groups.setdefault(key, []).append((i, name, values))
    texts: list[dict[str, list[str]]] = [{} for _ in plans]
    for key, members in groups.items():
        values = members[0][2] if len(members) == 1 else pa.concat_arrays([v for _, _, v in members])
        literals = literal_texts(encodings[key], key[0], values).to_pylist()
        start = 0
        for i, name, part in members:
            texts[i][name] = literals[start:start + len(part)]
            start += len(part)
    return [plan.statements(text) for plan, text in zip(plans, texts)]


def table_statements(table: TableChanges, columns: Sequence[FollowerColumn], net: pa.Table) -> TableStatements:
    """``tables_statements`` of one table."""
    return tables_statements([(table, columns, net)])[0]


def takes_statements(table: TableChanges, columns: Sequence[FollowerColumn], net_rows: int) -> bool:
    """Whether a table's net rows go as statements rather than through a staging table."""
    return net_rows <= STATEMENT_ROWS and statement_key(table, columns)

