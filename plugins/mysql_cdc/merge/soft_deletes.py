"""Soft deletes: a lake table that keeps the rows the leader deleted, marked, instead of removing them.

A table a lake follower's ``soft_deletes`` names (``true``: every table, or ``db.table`` globs) has
three columns after the leader's:

- ``_deleted`` (boolean): false for a row the leader holds, true for one it deleted;
- ``_deleted_at`` (timestamp, UTC): when the deleting transaction was committed on the leader (NULL
  for a live row, and for rows a TRUNCATE or a copy found gone: the binlog gives no time for them);
- ``_deleted_txn`` (string, ``FILE:OFFSET``): where the deleting transaction begins in the leader's
  binlog, as ``_txn`` of the change rows (a TRUNCATE's: its statement; a copy's: its position).

A deleted row keeps the values it had when it was deleted. A key the leader inserts again is live
again: its row replaced, the marks cleared. A row the lake never held (inserted and deleted between
two runs) is not kept: the lake keeps what it held.

Only a table with a primary key can keep its deleted rows (a deleted row is found again by its
key); a keyless table named by the option stops the merge with an error naming it
(``history.check_table``, for both modes).

Here: the names, the option's parsing, the marks of a segment's net rows in Arrow (from the change
rows, however the net rows were made), and the live rows verification compares. Each kind applies
them: Delta's ``MERGE`` updates a deleted row's marks (``kinds.delta.sink.merges``), Iceberg's
commit rewrites it marked (``kinds.iceberg.commit.TableCommit.upsert``). docs/history-modes.md.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any, Callable, Optional, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..contracts import change_row as cr

DELETED, DELETED_AT, DELETED_TXN = "_deleted", "_deleted_at", "_deleted_txn"
COLUMNS = (DELETED, DELETED_AT, DELETED_TXN)
FIELDS = (pa.field(DELETED, pa.bool_()), pa.field(DELETED_AT, pa.timestamp("us", tz="UTC")),
          pa.field(DELETED_TXN, pa.large_string()))
# the change rows' metadata the marks are made of (a sink asks the reader for it: ``Sink.change_metadata``)
METADATA = frozenset({cr.COMMIT_TS, cr.TXN})


def parse_globs(value: Any, field: str = "soft_deletes") -> tuple[str, ...]:
    """The option's value (true: every table, false, or a list of ``db.table`` globs) as globs."""
    from ..capture.filters import TableFilter

    if value is True:
        return ("*.*",)
    if value is False or value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{field}: must be true, false or a list of db.table globs such as ['shop.*', '*.orders'], "
                         f"got {value!r}")
    try:
        return tuple(TableFilter(include=tuple(v.strip() for v in value)).include)
    except ValueError as exc:
        raise ValueError(f"{field}: {exc}") from None


def keeps_deleted(globs: Sequence[str], database: str, table: str) -> bool:
    """Whether the option's globs name the table."""
    return any(fnmatchcase(f"{database}.{table}", g) for g in globs)


def deletion_marks(changes: pa.Table, key_columns: Sequence[str]) -> pa.Table:
    """Per key that an event of ``changes`` (a table's change rows, with ``_commit_ts`` and ``_txn``)
    deletes, the last such event's commit time and transaction: the key columns, ``_deleted_at``,
    ``_deleted_txn``. A delete deletes its row's key; an update that changes the key deletes its old
    key (from ``_before``)."""
    keys = list(key_columns)
    ops = pc.cast(changes.column(cr.OP), pa.string())
    deletes = pc.equal(ops, cr.DELETE)
    parts = [_events(changes.filter(deletes), [changes.filter(deletes).column(k) for k in keys], keys)]
    updates = changes.filter(pc.equal(ops, cr.UPDATE))
    if updates.num_rows:
        before = updates.column(cr.BEFORE)
        old = [pc.struct_field(before, k) for k in keys]
        moved = np.zeros(updates.num_rows, dtype=bool)
        for k, o in zip(keys, old):
            moved |= ~pc.fill_null(pc.equal(updates.column(k), o), False).to_numpy(zero_copy_only=False)
        if moved.any():
            mask = pa.array(moved)
            parts.append(_events(updates.filter(mask), [pc.filter(o, mask) for o in old], keys))
    events = pa.concat_tables(parts)
    # the last event per key (binlog order): sorted, then each key's last row kept
    events = events.take(pc.sort_indices(events, [(c, "ascending") for c in cr.ORDER_COLUMNS]))
    last = events.group_by(keys, use_threads=False).aggregate([(DELETED_AT, "last"), (DELETED_TXN, "last")])
    return last.rename_columns([*keys, DELETED_AT, DELETED_TXN]).select([*keys, DELETED_AT, DELETED_TXN])


def _events(rows: pa.Table, key_values: list, keys: list[str]) -> pa.Table:
    """Deleting events: the deleted keys, the event's order, its commit time and transaction."""
    at = pc.cast(rows.column(cr.COMMIT_TS), FIELDS[1].type)
    return pa.table([*key_values, *(rows.column(c) for c in cr.ORDER_COLUMNS), at,
                     pc.cast(rows.column(cr.TXN), pa.large_string())],
                    names=[*keys, *cr.ORDER_COLUMNS, DELETED_AT, DELETED_TXN])


def with_marks(net: pa.Table, marks: pa.Table, key_columns: Sequence[str]) -> pa.Table:
    """The net rows with the marks' three columns: a delete's from ``marks`` (``deletion_marks``),
    ``_deleted`` false and no time or transaction for every other row. In the net rows' order."""
    keys = list(key_columns)
    order = "__mcdc_row"
    numbered = net.select(keys).append_column(order, pa.array(np.arange(net.num_rows, dtype=np.int64)))
    # (a join matches keys by value and type: the marks' keys are cast to the net rows' types)
    marks = pa.table([*(marks.column(k).cast(net.schema.field(k).type) for k in keys),
                      marks.column(DELETED_AT), marks.column(DELETED_TXN)], names=[*keys, DELETED_AT, DELETED_TXN])
    joined = numbered.join(marks, keys=keys, join_type="left outer", use_threads=False)
    joined = joined.take(pc.sort_indices(joined.column(order)))
    deleted = pc.equal(net.column(cr.NET_OP), cr.DELETE)
    at = pc.if_else(deleted, joined.column(DELETED_AT), pa.scalar(None, FIELDS[1].type))
    txn = pc.if_else(deleted, joined.column(DELETED_TXN), pa.scalar(None, FIELDS[2].type))
    return net.append_column(FIELDS[0], deleted).append_column(FIELDS[1], at).append_column(FIELDS[2], txn)


def marked_removed(rows: pa.Table, at: pa.Scalar | None, txn: str | None) -> pa.Table:
    """``rows`` (a table's rows, with the marks' columns) marked deleted where they are live, at
    ``at`` by ``txn`` (a TRUNCATE, or rows a copy found gone); rows deleted before keep their marks."""
    live = pc.invert(pc.fill_null(rows.column(DELETED), False))
    at = pa.scalar(None if at is None else at.as_py(), rows.schema.field(DELETED_AT).type)
    txn = pa.scalar(txn, rows.schema.field(DELETED_TXN).type)
    columns = {DELETED: pc.if_else(live, True, rows.column(DELETED)),
               DELETED_AT: pc.if_else(live, at, rows.column(DELETED_AT)),
               DELETED_TXN: pc.if_else(live, txn, rows.column(DELETED_TXN))}
    for name, values in columns.items():
        index = rows.schema.get_field_index(name)
        rows = rows.set_column(index, rows.schema.field(index), values)
    return rows


def live(rows: pa.Table) -> pa.Table:
    """The rows the leader holds, without the marks' columns (what verification compares)."""
    from ..monitor.cut_checksums import plain_views

    mask = pc.invert(pc.fill_null(rows.column(DELETED), False))
    return plain_views(rows.select([n for n in rows.column_names if n not in COLUMNS])).filter(mask)


def reading_live(read: Callable[[str], Optional[pa.Table]], globs: Sequence[str],
                 history_globs: Sequence[str] = ()) -> Callable[[str], Optional[pa.Table]]:
    """``read`` (a table's rows by ``db.table``; None: no such table) giving what the leader holds of
    each table: the live rows of the tables ``globs`` names (``live``), the current versions of those
    ``history_globs`` names (``history.current``), every other table's rows as they are."""
    from . import history

    def read_live(name: str) -> Optional[pa.Table]:
        rows = read(name)
        if rows is None:
            return None
        database, table = name.split(".", 1)
        if keeps_deleted(globs, database, table):
            return live(rows)
        return history.current(rows) if history.keeps_history(history_globs, database, table) else rows
    return read_live
