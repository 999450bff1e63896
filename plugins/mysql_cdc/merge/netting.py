"""The merge's netting on Arrow, in the job's driver: a table of up to ``DRIVER_NET_ROWS`` change
rows costs no Spark job at all.

Through Spark every table costs a read stage, a shuffle and a prepare stage: seconds of task
scheduling and Python workers, whatever its rows. A batch touching many tables lightly (an OLTP
application writes a few rows of many tables per interval) then cost what its table count did,
and a 1M-row batch on a small machine paid for distribution it could not use. Here a table is
read with pyarrow, netted with Arrow compute and numpy (vectorized: ranks, sorts, takes, comparisons;
no Python per row) and prepared by the sink in the same process.

These functions have exactly the semantics of ``transforms`` (``after_checkpoint``,
``net_keyed_changes``, ``net_keyless_changes`` + ``expand_copies``), which stay the definition:
``tests/merge/test_netting.py`` runs both on the same change rows and requires equal results.
NULLs compare equal (Spark's ``<=>`` and its grouping), ``-0.0`` equal to ``0.0``; NaN cannot occur
(MySQL stores none).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..contracts import BinlogPosition, TableChanges
from ..contracts import change_row as cr
from ..storage import ObjectStore
from .reader import read_tables

OP, COUNT = cr.NET_OP, cr.NET_COUNT

# Up to this many change rows, a table is netted here rather than by Spark. Measured on 2 cores
# (docs/performance.md): a table's Spark stages cost 0.5-2 s whatever its size (and the session
# ~5 s when it is the first), netting here ~0.5 s per 1M change rows; the 1M-row batch of
# bench_merge takes 5.8 s in the job this way against 19.5 s through Spark. The price is memory in
# the driver (the Airflow worker, in client mode): a few hundred MB for 1M rows of a narrow table.
DRIVER_NET_ROWS = 1_000_000
# The Spark property (a pipeline's ``spark_conf``) that sets it for a merge job: 0 sends every table
# through Spark and has executors load every copy (a cluster whose Airflow workers should only drive
# it), more keeps more on the driver. (A copy with nothing to fold in streams through the driver a
# file at a time whatever its size: ``merge.sink.TableCopy.on_driver``.)
DRIVER_NET_ROWS_PROPERTY = "spark.mysql_cdc.driverNetRows"

_AFTER, _BEFORE = 0, 1  # which image of a change row an event carries


def table_columns(changes: pa.Table) -> list[str]:
    """The leader table's own columns of a change-row table (everything but the metadata)."""
    return [c for c in changes.column_names if c not in cr.METADATA_NAMES]


def as_array(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """A column's values as one array: its only chunk as it is (what a small table's column has),
    else its chunks combined. (``combine_chunks`` copies even one chunk: ~5 µs a call, which a
    thousand small tables pay several times each.)"""
    if isinstance(values, pa.Array):
        return values
    return values.chunk(0) if values.num_chunks == 1 else values.combine_chunks()


def rows_after(changes: pa.Table, position: BinlogPosition) -> pa.Table:
    """The change rows whose event lies at or after ``position`` (``transforms.after_checkpoint``)."""
    # numpy: a few microseconds per call where an Arrow kernel costs tens, which a batch of a
    # thousand small tables pays a thousand times; usually every row is after, and nothing is copied
    seq, pos = (changes.column(c).to_numpy() for c in (cr.BINLOG_SEQ, cr.BINLOG_POS))
    later = (seq > position.sequence) | ((seq == position.sequence) & (pos >= position.offset))
    return changes if later.all() else changes.filter(pa.array(later))


def rows_after_each(changes: Sequence[pa.Table], positions: Sequence[BinlogPosition]) -> list[pa.Table]:
    """``rows_after`` of each table (``changes[i]`` from ``positions[i]``), compared for all of
    them in one numpy pass: a table of a group of small ones otherwise pays its few calls of a few
    microseconds each. Usually every row is after, and nothing is copied."""
    if len(changes) < 2:
        return [rows_after(c, p) for c, p in zip(changes, positions)]
    sizes = [c.num_rows for c in changes]
    seq, pos = (np.concatenate([c.column(n).to_numpy() for c in changes]) for n in (cr.BINLOG_SEQ, cr.BINLOG_POS))
    at_seq = np.repeat([p.sequence for p in positions], sizes)
    at_pos = np.repeat([p.offset for p in positions], sizes)
    later = (seq > at_seq) | ((seq == at_seq) & (pos >= at_pos))
    if later.all():
        return list(changes)
    ends = np.cumsum(sizes).tolist()
    return [c if keep.all() else c.filter(pa.array(keep))
            for c, keep in zip(changes, (later[end - n:end] for n, end in zip(sizes, ends)))]


def _each_later(seq: np.ndarray, pos: np.ndarray, index: np.ndarray) -> np.ndarray:
    """From the differences of consecutive rows' (sequence, offset, index): whether each row's
    event is at or after the one before it."""
    return (seq > 0) | ((seq == 0) & ((pos > 0) | ((pos == 0) & (index >= 0))))


def _in_order(changes: pa.Table) -> pa.Table:
    """The change rows in binlog order. Capture writes them so; checked, as sorting costs a copy."""
    if _each_later(*(np.diff(changes.column(c).to_numpy()) for c in cr.ORDER_COLUMNS)).all():
        return changes
    return changes.take(pc.sort_indices(changes, [(c, "ascending") for c in cr.ORDER_COLUMNS]))


# a working column (a leader table may not have columns starting with __mcdc_: check_table)
_DELTA = "__mcdc_delta"


def op_letters(ops: pa.Array) -> np.ndarray:
    """A string array of one-letter ops (``I``, ``U``, ``D``) as numpy bytes, straight from its data
    buffer when every value is one byte (as capture and netting write them)."""
    n = len(ops)
    if not n:
        return np.empty(0, dtype="S1")
    if pa.types.is_string(ops.type) and not ops.null_count:
        offsets = np.frombuffer(ops.buffers()[1], dtype=np.int32, count=n + 1, offset=ops.offset * 4)
        if offsets[-1] - offsets[0] == n and np.all(offsets[1:] - offsets[:-1] == 1):
            return np.frombuffer(ops.buffers()[2], dtype="S1", count=n, offset=int(offsets[0]))
    fixed = pc.cast(ops, pa.binary(1))
    return np.frombuffer(fixed.buffers()[1], dtype="S1", count=n, offset=fixed.offset)


def _before(changes: pa.Table) -> pa.StructArray:
    return as_array(changes.column(cr.BEFORE))


def _grouping(values: pa.Array) -> pa.Array:
    """A column as grouping compares it: Spark groups -0.0 with 0.0; Arrow's hashing would not."""
    if pa.types.is_floating(values.type):
        return pc.if_else(pc.equal(values, 0), pa.scalar(0, values.type), values)
    return values


def _images(changes: pa.Table, columns: Sequence[str], source: np.ndarray, row: np.ndarray) -> list:
    """Per (source, row): the after image (``_AFTER``) or the before image (``_BEFORE``) of that
    change row, as the values of each of ``columns`` (``_net_table`` makes them NULL-able). A
    column the ``_before`` read does not hold (a keyed table's holds its key:
    ``reader.change_schema``) is NULL in a before image: only a moved key's delete takes one, and
    a delete needs its key only."""
    from_before = source == _BEFORE
    row = pa.array(row)
    if from_before.any():
        from_before = pa.array(from_before)
        before = _before(changes).take(row)
        held = {field.name for field in before.type}

        def before_image(c: str) -> pa.Array:
            return before.field(c) if c in held else pa.nulls(len(row), changes.schema.field(c).type)

        return [pc.if_else(from_before, before_image(c), changes.column(c).take(row)) for c in columns]
    # the usual case (no key moved away last, no update in a keyless table): after images only
    return changes.select(columns).take(row).columns  # one take for all columns


def _op_array(codes: np.ndarray) -> pa.Array:
    """The op letters of op codes (``_OP_LETTERS``) as a string array, built from buffers."""
    data = _OP_LETTERS[codes].tobytes()
    offsets = np.arange(len(codes) + 1, dtype=np.int32)
    return pa.Array.from_buffers(pa.string(), len(codes), [None, pa.py_buffer(offsets), pa.py_buffer(data)])


_NET_FIELDS = (pa.field(OP, pa.string()), pa.field(COUNT, pa.int64()))


def _net_table(changes: pa.Table, columns: Sequence[str], images: Sequence, ops: pa.Array, counts: pa.Array
               ) -> pa.Table:
    """The net rows: the values ``images`` of the table's ``columns``, every column NULL-able (a
    before image may lack one), then the op letters and the copy counts; one table made at once."""
    # (a cast costs tens of microseconds even when there is nothing to convert)
    ops = ops if ops.type == pa.string() else ops.cast(pa.string())
    counts = counts if counts.type == pa.int64() else counts.cast(pa.int64())
    schema = pa.schema([*(changes.schema.field(c).with_nullable(True) for c in columns), *_NET_FIELDS])
    return pa.Table.from_arrays([*images, ops, counts], schema=schema)


def _key_ranks(after: pa.Array, old: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Dense ranks of one key column's values over ``after`` and ``old`` together: equal values
    (NULLs with NULLs, -0.0 with 0.0) share a rank, and ranks follow the values' sort order (for
    integers without NULLs, the values themselves: they compare and sort the same). With
    the ranks, finding and ordering each key's events is integer work in numpy: a few microseconds
    per step where an Arrow kernel costs tens, for any key type."""
    old = old if old.type == after.type else old.cast(after.type)  # (a no-op cast costs tens of µs)
    if pa.types.is_integer(after.type) and not after.null_count and not old.null_count:
        # integers without NULLs compare and sort as their own values: no rank needed
        return after.to_numpy(), old.to_numpy()
    ranks = pc.rank(pa.concat_arrays([after, old]), sort_keys="ascending", tiebreaker="dense").to_numpy()
    return ranks[:len(after)], ranks[len(after):]


_OP_DELETE, _OP_INSERT, _OP_UPDATE = 0, 1, 2
_OP_LETTERS = np.array([cr.DELETE.encode(), cr.INSERT.encode(), cr.UPDATE.encode()], dtype="S1")  # by op code


def _last_events(events: np.ndarray, starts: np.ndarray, deletes: np.ndarray, creates: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Per key, its net effect: ``events`` are the event numbers sorted so that a key's events are
    one run in binlog order, ``starts`` marks where each run starts, ``deletes`` and ``creates``
    say what each event (by number) does. Returns the event each key's row is taken from (its
    last) and the key's op code: ``D`` if the last event deletes, else ``I`` if the first one
    created the key (it was not in the follower before the batch), else ``U``. A key created and
    deleted inside the batch disappears."""
    first = np.flatnonzero(starts)
    # a run ends where the next one starts (none at all when there are no events)
    last = np.append(first[1:] - 1, len(events) - 1) if len(first) else first
    deleted, created = deletes[events[last]], creates[events[first]]
    kept = ~(deleted & created)
    deleted, created = deleted[kept], created[kept]
    return events[last[kept]], np.where(deleted, _OP_DELETE, np.where(created, _OP_INSERT, _OP_UPDATE))


def net_keyed(changes: pa.Table, key_columns: Sequence[str]) -> pa.Table:
    """One row per key touched, as ``transforms.net_keyed_changes``: the last image, ``__mcdc_op``
    ``U`` (replace), ``I`` (the key's first event created it: insert only) or ``D``, and
    ``__mcdc_n`` = 1; a key created and deleted inside the batch disappears. Rows in key order."""
    changes = _in_order(changes)
    n = changes.num_rows
    columns, before = table_columns(changes), _before(changes)
    # the op letters as numpy bytes: three comparisons for a few microseconds
    letters = op_letters(as_array(changes.column(cr.OP)))
    is_insert, is_update, is_delete = (letters == o.encode() for o in (cr.INSERT, cr.UPDATE, cr.DELETE))
    # per key column, the ranks of the rows' (after) keys and of the updates' before keys
    updates = np.flatnonzero(is_update)
    ranks = [_key_ranks(as_array(changes.column(k)), before.field(k).take(pa.array(updates)))
             for k in key_columns]
    same_key = np.ones(len(updates), dtype=bool)
    for after, old in ranks:
        same_key &= after[updates] == old
    key_changed = np.zeros(n, dtype=bool)
    key_changed[updates[~same_key]] = True
    moved = updates[~same_key]
    # Every change row is one event on its (after) key: a delete deletes, an insert or update
    # upserts. An update that changes the key is also an event deleting the old key, ordered just
    # before it (order 2i vs 2i+1), so "the last event per key" is the net effect.
    keys = [np.concatenate([after, old[~same_key]]) for after, old in ranks]
    order = np.concatenate([2 * np.arange(n, dtype=np.int64) + 1, 2 * moved.astype(np.int64)])
    deletes = np.concatenate([is_delete, np.ones(len(moved), dtype=bool)])
    creates = np.concatenate([is_insert | key_changed, np.zeros(len(moved), dtype=bool)])
    source = np.concatenate([np.full(n, _AFTER, dtype=np.int8), np.full(len(moved), _BEFORE, dtype=np.int8)])
    row = np.concatenate([np.arange(n, dtype=np.int64), moved.astype(np.int64)])
    # Per key, the last event and the first one's "creates" (a key whose first event created it
    # was not in the follower before the batch): sorted by key then order, a key's events are one
    # run, and the rows leave in key order (the follower then inserts them appending to its index).
    events = np.lexsort([order, *reversed(keys)])  # lexsort's last key sorts first
    starts = np.ones(len(events), dtype=bool)
    if len(events) > 1:
        same = np.ones(len(events) - 1, dtype=bool)
        for key in keys:
            ranked = key[events]
            same &= ranked[1:] == ranked[:-1]
        starts[1:] = ~same
    picked, codes = _last_events(events, starts, deletes, creates)
    images = _images(changes, columns, source[picked], row[picked])
    return _net_table(changes, columns, images, _op_array(codes), pa.array(np.ones(len(picked), dtype=np.int64)))


def net_keyless(changes: pa.Table, columns: Sequence[str]) -> pa.Table:
    """The net multiset delta of a table without a primary key, as ``transforms.net_keyless_changes``
    then ``expand_copies``: a row whose count went up as that many ``I`` rows (``__mcdc_n`` = 1),
    one whose count went down as one ``D`` row with ``__mcdc_n`` copies to remove."""
    op = as_array(changes.column(cr.OP))
    rows = np.arange(changes.num_rows, dtype=np.int64)
    updates = pc.indices_nonzero(pc.equal(op, cr.UPDATE)).cast(pa.int64())
    # inserts and update after-images count +1, deletes and update before-images -1
    source = np.concatenate([np.full(changes.num_rows, _AFTER, dtype=np.int8), np.full(len(updates), _BEFORE, dtype=np.int8)])
    row = np.concatenate([rows, updates.to_numpy()])
    delta = pa.concat_arrays([pc.if_else(pc.equal(op, cr.DELETE), -1, 1).cast(pa.int64()),
                              pa.array(np.full(len(updates), -1, dtype=np.int64))])
    images = _images(changes, columns, source, row)
    names = [f"__mcdc_col{i}" for i in range(len(columns))]  # grouping by position: any column name
    events = pa.Table.from_arrays([_grouping(as_array(values)) for values in images] + [delta],
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
    ops = pa.array(np.where(chosen_counts > 0, cr.INSERT, cr.DELETE))
    return _net_table(changes, columns, [chosen.column(n) for n in names], ops,
                      pa.array(np.where(chosen_counts > 0, 1, -chosen_counts)))


def net_rows(changes: pa.Table, table: TableChanges) -> pa.Table:
    """The net rows of one table's change rows (``transforms.net_changes``)."""
    if table.key_columns:
        return net_keyed(changes, table.key_columns)
    return net_keyless(changes, [c.name for c in table.columns])


def _int_values(values: pa.Array) -> np.ndarray:
    """An integer array's values as int64, NULL slots included (whatever their buffer holds)."""
    width = values.type.bit_width // 8
    data = np.frombuffer(values.buffers()[1], dtype=f"{'i' if pa.types.is_signed_integer(values.type) else 'u'}{width}",
                         count=values.offset + len(values))
    return data[values.offset:].astype(np.int64)


def _valid(values: pa.Array) -> np.ndarray:
    """Which slots of an array hold a value."""
    bitmap = values.buffers()[0]
    if bitmap is None:
        return np.ones(len(values), dtype=bool)
    bits = np.unpackbits(np.frombuffer(bitmap, dtype=np.uint8), bitorder="little")
    return bits[values.offset:values.offset + len(values)].astype(bool)


def _each_in_order(changes: Sequence[pa.Table]) -> list[pa.Table]:
    """``_in_order`` of each table, checked over all of them at once (one numpy pass, where one per
    table costs tens of microseconds): only a table out of order is sorted."""
    if not changes:
        return []
    later = _each_later(*(np.diff(np.concatenate([c.column(n).to_numpy() for c in changes])) for n in cr.ORDER_COLUMNS))
    # a table's last row against the next one's first is no order (empty tables: none, or no next)
    ends = np.cumsum([c.num_rows for c in changes])[:-1] - 1
    later[ends[(ends >= 0) & (ends < len(later))]] = True
    if later.all():
        return list(changes)
    table_of = np.searchsorted(ends, np.flatnonzero(~later), side="left")
    unordered = set(table_of.tolist())
    return [_in_order(c) if i in unordered else c for i, c in enumerate(changes)]


_UINT64, _UPDATE = pa.uint64(), cr.UPDATE.encode()


def _group_key(changes: pa.Table, table: TableChanges, ops: np.ndarray) -> Optional[np.ndarray]:
    """A table's keys as int64, when the table nets in a group (``net_each``): one integer key
    column (up to 63 bits) without NULLs, and no update in the batch that changed a key (its old
    key's delete needs the before image: ``net_keyed``). None otherwise. ``ops``: its op letters."""
    if len(table.key_columns) != 1 or not changes.num_rows:
        return None
    keys = as_array(changes.column(table.key_columns[0]))
    if not pa.types.is_integer(keys.type) or keys.type == _UINT64 or keys.null_count:
        return None
    keys = _int_values(keys)
    updates = np.flatnonzero(ops == _UPDATE)
    if len(updates):
        # an update's old key, read from the before image's buffers (a take would cost tens of µs)
        old = _before(changes).field(table.key_columns[0])
        if not _valid(old)[updates].all() or np.any(_int_values(old)[updates] != keys[updates]):
            return None
    return keys


def each_op_letters(tables: Sequence[pa.Table], column: str = cr.OP) -> list[np.ndarray]:
    """``op_letters`` of each table's op ``column`` (a change row's, or a net row's
    ``cr.NET_OP``), made for all of them at once: one call costs ~10 µs however few its rows, which
    a group of small tables would pay per table. Each table's letters are a view of its share."""
    if len(tables) == 1:  # (a large table is netted alone: its letters straight from its column)
        return [op_letters(as_array(tables[0].column(column)))]
    letters = op_letters(pa.concat_arrays([as_array(t.column(column)) for t in tables])) if tables else None
    ends = np.cumsum([t.num_rows for t in tables])
    return [letters[end - t.num_rows:end] for t, end in zip(tables, ends.tolist())]


@dataclass(frozen=True, eq=False)
class PickedNet:
    """A table's net rows as the grouped netting finds them (``net_each``): each is one of its
    change rows as it is (the after image of its key's last event), with an op and a count of 1.
    Net row ``i`` is row ``rows[i]`` of ``changes``, its op code ``codes[i]`` (``_OP_LETTERS``).

    ``table()`` makes the net table (``net_rows``' form). A sink that takes the values straight from
    the change rows by row number need not make it (the MySQL follower's statements: a thousand
    small tables' net tables cost a take and a table each, about a third of their netting and
    statements together)."""

    changes: pa.Table  # the change rows, in binlog order
    columns: tuple[str, ...]  # the leader table's columns (``table_columns``)
    rows: np.ndarray  # int64 row numbers in ``changes``, one per net row, in key order
    codes: np.ndarray  # each net row's op code

    @property
    def num_rows(self) -> int:
        return len(self.rows)

    def letters(self) -> np.ndarray:
        """The net rows' op letters as numpy bytes (``op_letters``' form)."""
        return _OP_LETTERS[self.codes]

    def table(self) -> pa.Table:
        """The net rows as a table: after images only (no key moved), one take; every field
        NULL-able (``_net_table``'s schema, without making one: its fields cost microseconds each)."""
        images = self.changes.select(list(self.columns)).take(pa.array(self.rows)).columns
        return pa.Table.from_arrays([*images, _op_array(self.codes), pa.array(np.ones(len(self.rows), dtype=np.int64))],
                                    names=[*self.columns, OP, COUNT])


# a table's net rows as the driver's netting leaves them: a net table, or picks of its change rows
Net = Union[pa.Table, PickedNet]


def net_table(net: Net) -> pa.Table:
    """Net rows as a table, made from the picks when they are picks."""
    return net.table() if isinstance(net, PickedNet) else net


def net_tables(changes: Sequence[pa.Table], tables: Sequence[TableChanges]) -> list[pa.Table]:
    """``net_rows`` of each table (its change rows ``changes[i]``), exactly (``net_each``, as tables)."""
    return [net_table(net) for net in net_each(changes, tables)]


def net_each(changes: Sequence[pa.Table], tables: Sequence[TableChanges]) -> list[Net]:
    """``net_rows`` of each table (its change rows ``changes[i]``), exactly: the tables with one
    integer key whose updates keep their keys (an OLTP application's usual table) are netted
    together, in one pass of numpy over all their keys, and their net rows are picks of their
    change rows (``PickedNet``); the others are netted one by one into net tables.

    A small table's netting is a dozen numpy and Arrow calls of tens of microseconds each, whatever
    its rows: the bench's thousand tables of a hundred rows took 0.69-0.80 s table by table,
    0.49-0.61 s in groups of 64 (each table's images still its own take, now made only when asked)."""
    ordered = _each_in_order(changes)
    letters = each_op_letters(ordered)
    grouped = [_group_key(c, t, ops) for c, t, ops in zip(ordered, tables, letters)]
    together = [i for i, g in enumerate(grouped) if g is not None]
    nets: list[Optional[Net]] = [None if g is not None else net_rows(c, t)
                                 for c, t, g in zip(ordered, tables, grouped)]
    if not together:
        return nets
    # every change row is one event on its key (no key moved): per (table, key), the last event
    # decides, and whether the first one created the key. Sorted by table then key (lexsort is
    # stable: a key's events keep the rows' binlog order), a key's events are one run.
    sizes = np.array([ordered[i].num_rows for i in together])
    table_of = np.repeat(np.arange(len(together)), sizes)
    key = np.concatenate([grouped[i] for i in together])
    ops = np.concatenate([letters[i] for i in together])
    events = np.lexsort([key, table_of])
    tables_sorted, keys_sorted = table_of[events], key[events]
    starts = np.ones(len(events), dtype=bool)
    starts[1:] = (tables_sorted[1:] != tables_sorted[:-1]) | (keys_sorted[1:] != keys_sorted[:-1])
    picked, codes = _last_events(events, starts, ops == cr.DELETE.encode(), ops == cr.INSERT.encode())
    # each table's share of the picks (they are in table order), back to its own row numbers
    bounds = np.searchsorted(table_of[picked], np.arange(len(together) + 1))
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    for j, i in enumerate(together):
        share = slice(bounds[j], bounds[j + 1])
        # (``table_columns``, without asking Arrow for names)
        nets[i] = PickedNet(ordered[i], tuple(c.name for c in tables[i].columns), picked[share] - offsets[j], codes[share])
    return nets


# what netting a table of a group on the driver needs: the schema its change rows are read as,
# its changes in the batch, and the follower's position for it (rows before it are applied)
NetItem = tuple[pa.Schema, TableChanges, BinlogPosition]
# per table: its change rows at or after its position, and their net rows (``net_each``)
Netted = tuple[pa.Table, Net]


def read_and_net(store: ObjectStore, batch_prefix: str, items: Sequence[NetItem]) -> list[Netted]:
    """The driver's path for a group of small tables, the same for every sink: their change rows
    read from the batch (``reader.read_tables``), those at or after each table's position kept,
    and netted together (``net_each``). In the order of ``items``."""
    # step by step over the whole group, not table by table: each step's code and data stay in the
    # CPU's caches (interleaved, a thousand small tables took twice as long)
    read = read_tables(store, batch_prefix, [(schema, table) for schema, table, _ in items])
    changes = rows_after_each(read, [position for _, _, position in items])
    return list(zip(changes, net_each(changes, [table for _, table, _ in items])))


def copies_per_op(net: pa.Table) -> dict[str, int]:
    """Net rows' copies (``__mcdc_n``) per op letter, for the merge's report. (numpy over the op
    letters' bytes: an Arrow group-by of 800k net rows took 6.5 ms, this 1.5.)"""
    letters = op_letters(as_array(net.column(cr.NET_OP)))
    copies = as_array(net.column(cr.NET_COUNT)).to_numpy(zero_copy_only=False)
    return {op: int(copies[letters == op.encode()].sum()) for op in (cr.INSERT, cr.UPDATE, cr.DELETE)}


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
