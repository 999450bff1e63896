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

from ....merge.netting import Net, PickedNet, as_array, each_op_letters
from ....contracts import ColumnSpec, TableChanges
from ....contracts import change_row as cr
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
    ``U`` and ``D`` rows go in the DELETE, the ``I`` and ``U`` rows in the INSERT, from ``ops``,
    their op letters; numbered among the net rows) and the columns whose literals they use.
    ``rows`` holds the values: the net table (``numbers`` None), or the change rows the net rows
    were picked from (``netting.PickedNet``), ``numbers`` being the picked rows' numbers."""

    def __init__(self, table: TableChanges, columns: Sequence[FollowerColumn], rows: pa.Table,
                 numbers: np.ndarray | None, ops: np.ndarray):
        self.target = qualified(table.database, table.table)
        self.table, self.rows, self.numbers = table, rows, numbers
        self.removed = np.flatnonzero(ops != cr.INSERT.encode())
        self.added = np.flatnonzero(ops != cr.DELETE.encode())
        self.keys = list(table.key_columns) if len(self.removed) else []
        # generated columns compute themselves (as in the load file)
        self.names = [c.name for c, f in zip(table.columns, columns) if not f.generated] if len(self.added) else []

    def needed(self) -> list[tuple[int, ColumnSpec]]:
        """The columns the statements use, each with its position in ``rows``: the leader table's
        columns come first there, in the manifest's order (``reader.change_schema``, and a net
        table's ``netting.table_columns``), so a column is found by position, not by name."""
        wanted = set(self.names) | set(self.keys)
        needed = [(at, c) for at, c in enumerate(self.table.columns) if c.name in wanted]
        held = self.rows.column_names
        if any(held[at] != c.name for at, c in needed):  # (a value in another column's place is never right)
            raise ValueError(f"{self.target}: its rows hold columns {held}, not the manifest's "
                             f"{[c.name for c in self.table.columns]} first")
        return needed

    def statements(self, deleted: str | None, inserted: str | None) -> TableStatements:
        """The statements, from the SQL of the deleted keys (``k1, k2`` or ``(a1, b1), (a2, b2)``)
        and of the inserted rows (``(a1, b1), (a2, b2)``)."""
        delete = insert = None
        if self.keys:
            key_sql = quote_ident(self.keys[0]) if len(self.keys) == 1 else "(" + ", ".join(map(quote_ident, self.keys)) + ")"
            delete = f"DELETE FROM {self.target} WHERE {key_sql} IN ({deleted})"
        if self.names:
            insert = f"INSERT INTO {self.target} ({', '.join(map(quote_ident, self.names))}) VALUES {inserted}"
        return TableStatements(delete, len(self.removed), insert, len(self.added))


_TEXT = pa.large_string()  # the literals of a whole group: more than 2 GiB could not be ruled out


class _Literals:
    """The literals of every column a group's statements use, in one array: those of one Arrow
    type and encoding made together, whatever their table (``literal_texts``), then put one after
    another. ``start[i][name]``: where table ``i``'s column ``name`` begins (a value per net row)."""

    def __init__(self, plans: Sequence[_TableRows]):
        # (Arrow type, encoder, SET expression) -> [(table, column, values)]; the types named by
        # the manifest's strings (an Arrow type hashes by rendering itself: ~0.5 µs, which a
        # thousand tables' columns would pay several times each)
        groups: dict[tuple, list[tuple[int, str, pa.Array]]] = {}
        encodings: dict[tuple, tuple[pa.DataType, LoadColumn]] = {}
        kinds: dict[tuple[str, str], tuple] = {}  # (Arrow type, MySQL type) -> its group's key
        for i, plan in enumerate(plans):
            for at, spec in plan.needed():
                values = as_array(plan.rows.column(at))
                kind = (spec.arrow_type, spec.mysql_type)
                key = kinds.get(kind)
                if key is None:  # a thousand tables have a few dozen kinds
                    column = load_column(spec.name, values.type, spec.mysql_type)
                    key = kinds[kind] = (spec.arrow_type, column.encode, column.via_variable)
                    encodings.setdefault(key, (values.type, column))
                groups.setdefault(key, []).append((i, spec.name, values))
        self.start: list[dict[str, int]] = [{} for _ in plans]
        texts, at = [], 0
        for key, members in groups.items():
            values, lengths = _net_values([(v, plans[i].numbers) for i, _, v in members])
            arrow_type, column = encodings[key]
            texts.append(literal_texts(column, arrow_type, values).cast(_TEXT))
            for (i, name, _), length in zip(members, lengths):
                self.start[i][name] = at
                at += length
        self.texts = pa.concat_arrays(texts) if texts else pa.array([], _TEXT)

    def rows(self, parts: Sequence[tuple[int, Sequence[str], np.ndarray]], parenthesized: bool) -> list[str]:
        """Per (table, columns, rows): the literals of those rows of its columns, a row's joined by
        ``", "``, the rows by ``", "`` too (``k1, k2``) or each in parentheses (``(a1, b1), (a2,
        b2)``). Two Arrow kernels for all the tables: joined in Python, a thousand tables' rows cost
        a Python string per literal and a join per row."""
        if not parts:
            return []
        # the literals in the order they are written: table by table, row by row, column by column
        cells = [(rows[:, None] + np.array([self.start[i][c] for c in columns])[None, :]).ravel()
                 for i, columns, rows in parts]
        widths = np.repeat([len(columns) for _, columns, _ in parts], [len(rows) for _, _, rows in parts])
        row_texts = pc.binary_join(
            pa.LargeListArray.from_arrays(_offsets(widths), self.texts.take(pa.array(np.concatenate(cells)))),
            pa.scalar(", ", _TEXT))
        tables = pc.binary_join(pa.LargeListArray.from_arrays(_offsets([len(rows) for _, _, rows in parts]), row_texts),
                                pa.scalar("), (" if parenthesized else ", ", _TEXT)).to_pylist()
        return [f"({text})" for text in tables] if parenthesized else tables


def _net_values(columns: Sequence[tuple[pa.Array, np.ndarray | None]]) -> tuple[pa.Array, list[int]]:
    """Columns of one kind, each (its values, the numbers of its net rows among them or None: all),
    as the net rows' values one after another, with each column's count: one take for them all
    where some are picked (a table's own take costs tens of microseconds, and the change rows it
    would skip are a third of a small table's)."""
    arrays = [values for values, _ in columns]
    values = arrays[0] if len(arrays) == 1 else pa.concat_arrays(arrays)
    if all(numbers is None for _, numbers in columns):
        return values, [len(a) for a in arrays]
    starts = np.cumsum([0, *(len(a) for a in arrays[:-1])])
    counts = [len(a) if numbers is None else len(numbers) for a, numbers in columns]
    # each column's row numbers, moved by where its values start (one numpy pass for them all)
    picks = np.concatenate([np.arange(len(a)) if numbers is None else numbers for a, numbers in columns])
    return values.take(pa.array(picks + np.repeat(starts, counts))), counts


def _offsets(lengths) -> pa.Array:
    return pa.array(np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]), pa.int64())


def tables_statements(tables: Sequence[tuple[TableChanges, Sequence[FollowerColumn], Net]]) -> list[TableStatements]:
    """Per (table, follower columns, net rows): the DELETE of the keys the batch changed or removed
    and the INSERT of the rows it leaves.

    The literals are made for all the tables at once: the columns of one Arrow type and encoding,
    whatever their table, are concatenated and encoded by one pass of Arrow kernels, and the rows
    of all the tables are joined by two more (``_Literals``). An Arrow kernel costs tens of
    microseconds however few its rows; a thousand small tables could not pay several per column.
    Net rows picked from change rows (``netting.PickedNet``) are taken from the change rows as they
    are: their net table is never made."""
    where = _net_rows([net for _, _, net in tables])
    plans = [_TableRows(table, columns, *rows) for (table, columns, _), rows in zip(tables, where)]
    literals = _Literals(plans)
    inserting = [i for i, plan in enumerate(plans) if plan.names]
    inserted = dict(zip(inserting, literals.rows([(i, plans[i].names, plans[i].added) for i in inserting], True)))
    deleted: dict[int, str] = {}
    for composite in (False, True):  # ``k IN (k1, k2)``; ``(a, b) IN ((a1, b1), (a2, b2))``
        deleting = [i for i, plan in enumerate(plans) if plan.keys and (len(plan.keys) > 1) == composite]
        deleted.update(zip(deleting, literals.rows([(i, plans[i].keys, plans[i].removed) for i in deleting], composite)))
    return [plan.statements(deleted.get(i), inserted.get(i)) for i, plan in enumerate(plans)]


def _net_rows(nets: Sequence[Net]) -> list[tuple[pa.Table, np.ndarray | None, np.ndarray]]:
    """Each table's net rows as (a table holding them, their row numbers in it or None for all its
    rows, their op letters): picked ones in their change rows, a net table's all its rows (their
    letters made for all the net tables at once: ``each_op_letters``)."""
    tables = [net for net in nets if not isinstance(net, PickedNet)]
    letters = iter(each_op_letters(tables, OP))
    return [(net.changes, net.rows, net.letters()) if isinstance(net, PickedNet) else (net, None, next(letters))
            for net in nets]


def table_statements(table: TableChanges, columns: Sequence[FollowerColumn], net: Net) -> TableStatements:
    """``tables_statements`` of one table."""
    return tables_statements([(table, columns, net)])[0]


def takes_statements(table: TableChanges, columns: Sequence[FollowerColumn], net_rows: int) -> bool:
    """Whether a table's net rows go as statements rather than through a staging table."""
    return net_rows <= STATEMENT_ROWS and statement_key(table, columns)

