"""The merge's netting on Arrow, in the job's driver: a table of up to ``DRIVER_NET_ROWS`` change
rows costs no Spark job at all.

Through Spark every table costs a read stage, a shuffle and a prepare stage: seconds of task
scheduling and Python workers, whatever its rows. A batch touching many tables lightly (an OLTP
application writes a few rows of many tables per interval) then cost what its table count did,
and a 1M-row batch on a small machine paid for distribution it could not use. Here a table is
read with pyarrow, netted with Arrow compute (vectorized: sorts, takes, comparisons; no Python per
row) and prepared by the sink in the same process.

These functions have exactly the semantics of ``spark.transforms`` (``after_checkpoint``,
``net_keyed_changes``, ``net_keyless_changes`` + ``expand_copies``), which stay the definition:
``tests/apply/test_netting.py`` runs both on the same change rows and requires equal results.
NULLs compare equal (Spark's ``<=>`` and its grouping), ``-0.0`` equal to ``0.0``; NaN cannot occur
(MySQL stores none).
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..contracts import BinlogPosition, TableChanges
from ..contracts import change_row as cr

OP, COUNT = cr.NET_OP, cr.NET_COUNT

# Up to this many change rows, a table is netted here rather than by Spark. Measured on 2 cores
# (docs/performance.md): a table's Spark stages cost 0.5-2 s whatever its size (and the session
# ~5 s when it is the first), netting here ~0.5 s per 1M change rows; the 1M-row batch of
# bench_merge takes 5.8 s in the job this way against 19.5 s through Spark. The price is memory in
# the driver (the Airflow worker, in client mode): a few hundred MB for 1M rows of a narrow table.
DRIVER_NET_ROWS = 1_000_000
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
    """The change rows in binlog order. Capture writes them so; checked, as sorting costs a copy."""
    seq, pos, index = (np.diff(changes.column(c).to_numpy()) for c in cr.ORDER_COLUMNS)
    if np.all((seq > 0) | ((seq == 0) & ((pos > 0) | ((pos == 0) & (index >= 0))))):
        return changes
    return changes.take(pc.sort_indices(changes, [(c, "ascending") for c in cr.ORDER_COLUMNS]))


# working columns (a leader table may not have columns starting with __mcdc_: check_table)
_ORDER, _KIND, _CREATES, _SOURCE, _ROW, _DELTA = (
    "__mcdc_order", "__mcdc_kind", "__mcdc_creates", "__mcdc_source", "__mcdc_row", "__mcdc_delta")


def _before(changes: pa.Table) -> pa.StructArray:
    return changes.column(cr.BEFORE).combine_chunks()


def _grouping(values: pa.Array) -> pa.Array:
    """A column as grouping compares it: Spark groups -0.0 with 0.0; Arrow's hashing would not."""
    if pa.types.is_floating(values.type):
        return pc.if_else(pc.equal(values, 0), pa.scalar(0, values.type), values)
    return values


def _null_safe_equal(a: pa.Array, b: pa.Array) -> pa.Array:
    """Spark's ``<=>``: NULLs equal each other, and the answer is never NULL."""
    both_null = pc.and_(pc.is_null(a), pc.is_null(b))
    return pc.or_(pc.fill_null(pc.equal(a, b), False), both_null)


def _images(changes: pa.Table, columns: Sequence[str], source: pa.Array, row: pa.Array) -> pa.Table:
    """Per (source, row): the after image (``_AFTER``) or the before image (``_BEFORE``) of that
    change row, as one table of the table's columns, all NULL-able."""
    from_before = pc.equal(source, _BEFORE)
    if pc.any(from_before).as_py():
        before = _before(changes).take(row)
        arrays = [pc.if_else(from_before, before.field(c), changes.column(c).take(row)) for c in columns]
    else:  # the usual case (no key moved away last, no update in a keyless table): after images only
        arrays = [changes.column(c).take(row) for c in columns]
    schema = pa.schema([changes.schema.field(c).with_nullable(True) for c in columns])
    return pa.Table.from_arrays(arrays, schema=schema)


def _with_net(images: pa.Table, ops: pa.Array, counts: pa.Array) -> pa.Table:
    return images.append_column(OP, ops.cast(pa.string())).append_column(COUNT, counts.cast(pa.int64()))


def net_keyed(changes: pa.Table, key_columns: Sequence[str]) -> pa.Table:
    """One row per key touched, as ``transforms.net_keyed_changes``: the last image, ``__mcdc_op``
    ``U`` (replace), ``I`` (the key's first event created it: insert only) or ``D``, and
    ``__mcdc_n`` = 1; a key created and deleted inside the batch disappears. Rows in key order."""
    changes = _in_order(changes)
    columns, before = table_columns(changes), _before(changes)
    op = changes.column(cr.OP).combine_chunks()
    rows = pa.array(np.arange(changes.num_rows, dtype=np.int64))
    same_key = pa.array(np.ones(changes.num_rows, dtype=bool))
    for k in key_columns:
        same_key = pc.and_(same_key, _null_safe_equal(changes.column(k).combine_chunks(), before.field(k)))
    key_changed = pc.and_(pc.equal(op, cr.UPDATE), pc.invert(same_key))
    # Every change row is one event on its (after) key: a delete deletes, an insert or update
    # upserts. An update that changes the key is also an event deleting the old key, ordered just
    # before it (order 2i vs 2i+1), so "the last event per key" is the net effect.
    keys = {f"__mcdc_key{i}": _grouping(changes.column(k).combine_chunks()) for i, k in enumerate(key_columns)}
    events = pa.table({
        **keys,
        _ORDER: pc.add(pc.multiply(rows, 2), 1),
        _KIND: pc.if_else(pc.equal(op, cr.DELETE), cr.DELETE, cr.UPDATE),
        _CREATES: pc.or_(pc.equal(op, cr.INSERT), key_changed),
        _SOURCE: pa.array(np.full(changes.num_rows, _AFTER, dtype=np.int8)),
        _ROW: rows,
    })
    moved = pc.indices_nonzero(key_changed)
    if len(moved):
        old = {f"__mcdc_key{i}": _grouping(before.field(k).take(moved)) for i, k in enumerate(key_columns)}
        events = pa.concat_tables([events, pa.table({
            **old,
            _ORDER: pc.multiply(moved.cast(pa.int64()), 2),
            _KIND: pa.array([cr.DELETE] * len(moved)),
            _CREATES: pa.array(np.zeros(len(moved), dtype=bool)),
            _SOURCE: pa.array(np.full(len(moved), _BEFORE, dtype=np.int8)),
            _ROW: moved.cast(pa.int64()),
        })]).sort_by(_ORDER)
    # Per key, the last event and the first one's "creates" (a key whose first event created it
    # was not in the follower before the batch): sorted by key then order, a key's events are one
    # run, and the rows leave in key order (the follower then inserts them appending to its index).
    events = events.take(pc.sort_indices(events, [(k, "ascending") for k in keys] + [(_ORDER, "ascending")]))
    starts = _run_starts(events, list(keys))
    first = pc.indices_nonzero(starts).to_numpy()
    # a run ends where the next one starts (none at all when there are no changes)
    last = pa.array(np.append(first[1:] - 1, events.num_rows - 1) if len(first) else first, pa.int64())
    first = pa.array(first, pa.int64())
    kind = events.column(_KIND).take(last)
    creates = events.column(_CREATES).take(first)
    kept = pc.invert(pc.and_(pc.equal(kind, cr.DELETE), creates))
    last, kind, creates = last.filter(kept), kind.filter(kept), creates.filter(kept)
    ops = pc.if_else(pc.equal(kind, cr.DELETE), cr.DELETE, pc.if_else(creates, cr.INSERT, cr.UPDATE))
    images = _images(changes, columns, events.column(_SOURCE).take(last).combine_chunks(),
                     events.column(_ROW).take(last).combine_chunks())
    return _with_net(images, ops, pa.array(np.ones(len(last), dtype=np.int64)))


def _run_starts(events: pa.Table, keys: list[str]) -> pa.Array:
    """For rows sorted by ``keys``: whether each row's key differs from the previous row's."""
    n = events.num_rows
    if n == 0:
        return pa.array([], pa.bool_())
    same = pa.array(np.ones(n - 1, dtype=bool))
    for k in keys:
        column = events.column(k).combine_chunks()
        same = pc.and_(same, _null_safe_equal(column.slice(1), column.slice(0, n - 1)))
    return pa.concat_arrays([pa.array([True]), pc.invert(same)])


def net_keyless(changes: pa.Table, columns: Sequence[str]) -> pa.Table:
    """The net multiset delta of a table without a primary key, as ``transforms.net_keyless_changes``
    then ``expand_copies``: a row whose count went up as that many ``I`` rows (``__mcdc_n`` = 1),
    one whose count went down as one ``D`` row with ``__mcdc_n`` copies to remove."""
    op = changes.column(cr.OP).combine_chunks()
    rows = pa.array(np.arange(changes.num_rows, dtype=np.int64))
    updates = pc.indices_nonzero(pc.equal(op, cr.UPDATE)).cast(pa.int64())
    # inserts and update after-images count +1, deletes and update before-images -1
    source = pa.concat_arrays([pa.array(np.full(changes.num_rows, _AFTER, dtype=np.int8)),
                               pa.array(np.full(len(updates), _BEFORE, dtype=np.int8))])
    row = pa.concat_arrays([rows, updates])
    delta = pa.concat_arrays([pc.if_else(pc.equal(op, cr.DELETE), -1, 1).cast(pa.int64()),
                              pa.array(np.full(len(updates), -1, dtype=np.int64))])
    images = _images(changes, columns, source, row)
    names = [f"__mcdc_col{i}" for i in range(len(columns))]  # grouping by position: any column name
    events = pa.Table.from_arrays([_grouping(images.column(c).combine_chunks()) for c in columns] + [delta],
                                  names=[*names, _DELTA])
    # NULLs group together (Arrow's hashing, like Spark's grouping): NULLs compare equal
    net = events.group_by(names, use_threads=False).aggregate([(_DELTA, "sum")])
    net = net.filter(pc.not_equal(net.column(f"{_DELTA}_sum"), 0))
    counts = net.column(f"{_DELTA}_sum").to_numpy()
    # an increase is that many I rows (the follower inserts staged rows as they are); a decrease
    # one D row whose count is the LIMIT of its delete
    repeat = np.where(counts > 0, counts, 1)
    picks = pa.array(np.repeat(np.arange(net.num_rows, dtype=np.int64), repeat))
    chosen = net.take(picks)
    chosen_counts = np.repeat(counts, repeat)
    schema = pa.schema([changes.schema.field(c).with_nullable(True) for c in columns])
    result = pa.Table.from_arrays([chosen.column(n) for n in names], schema=schema)
    ops = pa.array(np.where(chosen_counts > 0, cr.INSERT, cr.DELETE))
    return _with_net(result, ops, pa.array(np.where(chosen_counts > 0, 1, -chosen_counts)))


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
