"""The merge's netting for a small table, on Arrow in the job's driver: no Spark job at all.

A batch touching many tables touches most of them lightly (an OLTP application writes a few rows
of many tables per interval). Through Spark each such table costs a read stage, a shuffle and a
prepare stage, seconds of task scheduling and Python workers for a few hundred rows, so the cost
of a batch followed its table count, not its rows. A table with at most ``DRIVER_NET_ROWS`` change
rows is read, netted and prepared here instead, in milliseconds.

These functions have exactly the semantics of ``spark.transforms`` (``after_checkpoint``,
``net_keyed_changes``, ``net_keyless_changes`` + ``expand_copies``), which stay the definition:
``tests/apply/test_netting.py`` runs both on the same change rows and requires equal results.
Values are compared as Python values: NULLs equal (Spark's ``<=>`` and its grouping), ``-0.0``
equal to ``0.0``; NaN cannot occur (MySQL stores none).
"""

from __future__ import annotations

from typing import Iterable, Optional, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from ..contracts import BinlogPosition, TableChanges
from ..contracts import change_row as cr

OP, COUNT = cr.NET_OP, cr.NET_COUNT

# Up to this many change rows, a table is netted here rather than by Spark. Measured on 2 cores
# (bench/bench_tables.py): a table's Spark stage costs 0.5-2 s whatever its size, netting here
# ~1 s per 100k rows (pure Python per row), in the driver's one interpreter.
DRIVER_NET_ROWS = 20_000
# The Spark property (a pipeline's ``spark_conf``) that sets it for a merge job: 0 sends every table
# through Spark (a cluster whose Airflow workers should only drive it), more keeps more on the driver.
DRIVER_NET_ROWS_PROPERTY = "spark.mysql_cdc.driverNetRows"

_AFTER, _BEFORE = 0, 1  # which image of a change row an event carries


def table_columns(changes: pa.Table) -> list[str]:
    """The leader table's own columns of a change-row table (everything but the metadata)."""
    return [c for c in changes.column_names if c not in cr.METADATA_NAMES]


def rows_after(changes: pa.Table, position: BinlogPosition) -> pa.Table:
    """The change rows whose event lies at or after ``position`` (``transforms.after_checkpoint``)."""
    seq, pos = changes.column(cr.BINLOG_SEQ), changes.column(cr.BINLOG_POS)
    later = pc.or_(pc.greater(seq, position.sequence),
                   pc.and_(pc.equal(seq, position.sequence), pc.greater_equal(pos, position.offset)))
    return changes.filter(later)


def _in_order(changes: pa.Table) -> pa.Table:
    return changes.take(pc.sort_indices(changes, [(c, "ascending") for c in cr.ORDER_COLUMNS]))


def _values(array, names: Sequence[str]) -> list[tuple]:
    """Per row, the tuple of the named fields' values (of a table, or of a struct column)."""
    if isinstance(array, pa.Table):
        lists = [array.column(n).to_pylist() for n in names]
    else:
        struct = array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array
        lists = [struct.field(n).to_pylist() for n in names]
    return list(zip(*lists)) if lists else [()] * len(array)


def _images(changes: pa.Table, columns: Sequence[str], picks: Iterable[tuple[int, int]]) -> pa.Table:
    """The chosen images, ``(_AFTER or _BEFORE, row)`` each, as one table of the table's columns."""
    picks = list(picks)
    fields = [changes.schema.field(c).with_nullable(True) for c in columns]
    schema = pa.schema(fields)
    after = pa.array([row for source, row in picks if source == _AFTER], pa.int64())
    before = pa.array([row for source, row in picks if source == _BEFORE], pa.int64())
    parts = [pa.Table.from_arrays([changes.column(c).take(after) for c in columns], schema=schema)]
    if before:
        struct = changes.column(cr.BEFORE).combine_chunks().take(before)
        parts.append(pa.Table.from_arrays([struct.field(c) for c in columns], schema=schema))
    # back in the order of ``picks``: the after images came first, then the before images
    positions = [0] * len(picks)
    a = b = 0
    for i, (source, _) in enumerate(picks):
        if source == _AFTER:
            positions[i], a = a, a + 1
        else:
            positions[i], b = len(after) + b, b + 1
    return pa.concat_tables(parts).take(pa.array(positions, pa.int64()))


def _with_net(images: pa.Table, ops: list[str], counts: list[int]) -> pa.Table:
    return images.append_column(OP, pa.array(ops, pa.string())).append_column(COUNT, pa.array(counts, pa.int64()))


def net_keyed(changes: pa.Table, key_columns: Sequence[str]) -> pa.Table:
    """One row per key touched, as ``transforms.net_keyed_changes``: the last image, ``__mcdc_op``
    ``U`` (replace), ``I`` (the key's first event created it: insert only) or ``D``, and
    ``__mcdc_n`` = 1; a key created and deleted inside the batch disappears. Rows in key order."""
    changes = _in_order(changes)
    columns = table_columns(changes)
    ops = changes.column(cr.OP).to_pylist()
    after_keys = _values(changes, key_columns)
    before_keys = _values(changes.column(cr.BEFORE), key_columns)
    last: dict[tuple, tuple[str, int, int]] = {}  # key -> (kind, image source, row)
    first_creates: dict[tuple, bool] = {}

    def event(key: tuple, kind: str, source: int, row: int, creates: bool) -> None:
        first_creates.setdefault(key, creates)
        last[key] = (kind, source, row)

    for row, op in enumerate(ops):
        if op == cr.DELETE:
            event(after_keys[row], cr.DELETE, _AFTER, row, False)
        elif op == cr.UPDATE and before_keys[row] != after_keys[row]:
            # a key change: the old key goes first (its event sorts before the new key's)
            event(before_keys[row], cr.DELETE, _BEFORE, row, False)
            event(after_keys[row], cr.UPDATE, _AFTER, row, True)
        else:
            event(after_keys[row], cr.UPDATE, _AFTER, row, op == cr.INSERT)
    kept = [(key, kind, source, row) for key, (kind, source, row) in last.items()
            if not (kind == cr.DELETE and first_creates[key])]
    kept.sort(key=lambda k: _sortable(k[0]))
    net_ops = [cr.DELETE if kind == cr.DELETE else cr.INSERT if first_creates[key] else cr.UPDATE
               for key, kind, _, _ in kept]
    images = _images(changes, columns, [(source, row) for _, _, source, row in kept])
    return _with_net(images, net_ops, [1] * len(kept))


def _sortable(key: tuple) -> tuple:
    # a primary key holds no NULLs; the flag keeps the sort total regardless
    return tuple((True, 0) if value is None else (False, value) for value in key)


def net_keyless(changes: pa.Table, columns: Sequence[str]) -> pa.Table:
    """The net multiset delta of a table without a primary key, as ``transforms.net_keyless_changes``
    then ``expand_copies``: a row whose count went up as that many ``I`` rows (``__mcdc_n`` = 1),
    one whose count went down as one ``D`` row with ``__mcdc_n`` copies to remove."""
    ops = changes.column(cr.OP).to_pylist()
    after_rows = _values(changes, columns)
    before_rows = _values(changes.column(cr.BEFORE), columns)
    delta: dict[tuple, int] = {}
    image: dict[tuple, tuple[int, int]] = {}

    def count(values: tuple, change: int, source: int, row: int) -> None:
        delta[values] = delta.get(values, 0) + change
        image.setdefault(values, (source, row))

    for row, op in enumerate(ops):
        if op == cr.INSERT:
            count(after_rows[row], 1, _AFTER, row)
        elif op == cr.DELETE:
            count(after_rows[row], -1, _AFTER, row)
        else:
            count(before_rows[row], -1, _BEFORE, row)
            count(after_rows[row], 1, _AFTER, row)
    picks, net_ops, counts = [], [], []
    for values, change in delta.items():
        if change > 0:  # inserted copies: one row each (the follower inserts staged rows as they are)
            picks += [image[values]] * change
            net_ops += [cr.INSERT] * change
            counts += [1] * change
        elif change < 0:  # removed copies: one row, its count the LIMIT of its delete
            picks.append(image[values])
            net_ops.append(cr.DELETE)
            counts.append(-change)
    return _with_net(_images(changes, list(columns), picks), net_ops, counts)


def net_rows(changes: pa.Table, table: TableChanges) -> pa.Table:
    """The net rows of one table's change rows (``transforms.net_changes``)."""
    if table.key_columns:
        return net_keyed(changes, table.key_columns)
    return net_keyless(changes, [c.name for c in table.columns])


def driver_net_rows(property_value: Optional[str]) -> int:
    """The threshold a merge job runs with, from ``DRIVER_NET_ROWS_PROPERTY`` as submitted."""
    if property_value is None:
        return DRIVER_NET_ROWS
    try:
        value = int(property_value)
    except ValueError:
        value = -1
    if value < 0:
        raise ValueError(f"Spark property {DRIVER_NET_ROWS_PROPERTY}={property_value!r}: expected a number of change "
                         "rows >= 0 (0: every table netted by Spark); fix it in the pipeline's spark_conf")
    return value
