"""History tables (SCD type 2): a lake table that keeps every version of each row, with when and
where in the leader's binlog it was valid.

A table a lake follower's ``history`` names (``true``: every table, or ``db.table`` globs) has five
columns after the leader's:

- ``_valid_from`` (timestamp, UTC): when the transaction that wrote this version was committed on the
  leader; ``_valid_from_seq``: where the change is in the leader's binlog, as one number (DECIMAL(38,0):
  binlog file sequence x 10^24 + event offset x 10^12 + row index, a changelog row's ``_change_seq``):
  versions of one transaction, or one second, are ordered by it;
- ``_valid_to``, ``_valid_to_seq``: the same of the change that replaced or deleted the version (NULL
  while it is the row's current version);
- ``_current`` (boolean): the version the leader holds now (a deleted row has none).

Every change of a keyed row is a version, whatever the schedule: a row inserted and deleted between
two runs is one closed version. An update that changes the key closes the old key's version and
opens one for the new key. A TRUNCATE closes every current version (at its position, no time); a
copy (a resnapshot) closes the versions of the rows it no longer has or has with other values, and
opens versions for those at its position (no time: a copy has no commit time).

Here: the names, the option's parsing, and a segment's versions built from a table's change rows in
Arrow (``segment_versions``: the current versions to close, and the versions to add). Each kind
applies them in one commit of the table: ``kinds.delta.sink.merges.apply_history``,
``kinds.iceberg.commit.TableCommit.apply_history``. docs/history-modes.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..contracts import change_row as cr
from .errors import FollowerSchemaError

VALID_FROM, VALID_FROM_SEQ, VALID_TO, VALID_TO_SEQ, CURRENT = (
    "_valid_from", "_valid_from_seq", "_valid_to", "_valid_to_seq", "_current")
COLUMNS = (VALID_FROM, VALID_FROM_SEQ, VALID_TO, VALID_TO_SEQ, CURRENT)
TIME, SEQ = pa.timestamp("us", tz="UTC"), pa.decimal128(38, 0)
FIELDS = (pa.field(VALID_FROM, TIME), pa.field(VALID_FROM_SEQ, SEQ), pa.field(VALID_TO, TIME),
          pa.field(VALID_TO_SEQ, SEQ), pa.field(CURRENT, pa.bool_()))
# the change rows' metadata the versions are made of (``Sink.change_metadata``)
METADATA = frozenset({cr.COMMIT_TS})


def parse_globs(value: Any, field: str = "history") -> tuple[str, ...]:
    from .soft_deletes import parse_globs as globs

    return globs(value, field)


def keeps_history(globs: Sequence[str], database: str, table: str) -> bool:
    return any(fnmatchcase(f"{database}.{table}", g) for g in globs)


def check_table(name: str, key_columns: Sequence[str], column_names: Sequence[str], soft_deletes: bool,
                history: bool) -> None:
    """A ``FollowerSchemaError`` naming the fix for a table that cannot be kept as the history modes
    that name it say (``soft_deletes``, ``history``): named by both, without a primary key (a deleted
    row, or a row's versions, are found by its key), or with a column of the names a mode adds."""
    from . import soft_deletes as soft

    if soft_deletes and history:
        raise FollowerSchemaError(
            f"{name} is named by both soft_deletes and history: a history table keeps a deleted row as its "
            "closed version already; name it in one of them, then run the pipeline again",
            problem=f"{name}: in soft_deletes and history")
    option, added = ("soft_deletes", soft.COLUMNS) if soft_deletes else ("history", COLUMNS) if history else (None, ())
    if option is None:
        return
    if not key_columns:
        raise FollowerSchemaError(
            f"{name} has no primary key, and {option} names it: its rows are found again by their key; leave it "
            f"out of the follower's {option} (a list of db.table globs) or give it a primary key on the leader, "
            "then run the pipeline again", problem=f"{name}: {option} needs a primary key")
    clash = sorted({c for c in column_names if c.lower() in added})
    if clash:
        raise FollowerSchemaError(
            f"{name} has the column(s) {', '.join(clash)}, which {option} adds; leave the table out of the "
            f"follower's {option} or rename the column(s) on the leader, then run the pipeline again",
            problem=f"{name}: columns named like those {option} adds")


def retyped_error(name: str, column: str, have: str, want: str, soft_deletes: bool) -> FollowerSchemaError:
    """The error of a copy that would change the type of a column of a table keeping its deleted rows
    or its versions in a way they cannot take exactly (the kept rows hold values of the old type):
    the copy stops rather than lose or approximate them."""
    option, kept = ("soft_deletes", "deleted rows") if soft_deletes else ("history", "earlier versions")
    return FollowerSchemaError(
        f"{name}.{column} changed type from {have} to {want} on the leader, and {name} keeps its {kept} ({option}), "
        f"whose values of {column} the new type cannot hold exactly, so the copy that follows the change stops "
        f"before it writes; to keep them, copy the table elsewhere first; to start the table again, remove it "
        f"from the follower (its {kept} go with it) and trigger the pipeline with conf {{\"resnapshot\": [\"{name}\"]}}",
        problem=f"{name}.{column}: {have} -> {want}, and the table keeps its {kept}")


def seq_number(binlog_seq: int, offset: int, row: int = 0) -> int:
    """A position's place in the pipeline's total order, as ``_valid_from_seq`` holds it."""
    return binlog_seq * 10 ** 24 + offset * 10 ** 12 + row


@dataclass(frozen=True)
class SegmentVersions:
    """What a segment changes in a history table: ``closing`` (the key columns, ``_valid_to``,
    ``_valid_to_seq``): the current version of each key the segment touches ends at its first
    change; ``added``: the versions the segment's changes open (the leader's columns and the five
    history columns), closed within the segment or current."""

    closing: pa.Table
    added: pa.Table


def segment_versions(changes: pa.Table, columns: Sequence[str], key_columns: Sequence[str]) -> SegmentVersions:
    """The versions of one table's change rows (with ``_commit_ts``, in any order): every insert or
    update opens a version of its key's row (its after-image) and closes the key's version before it;
    a delete, or an update that changes the key (for its old key), closes it."""
    keys, columns = list(key_columns), list(columns)
    changes = changes.take(pc.sort_indices(changes, [(c, "ascending") for c in cr.ORDER_COLUMNS]))
    n = changes.num_rows
    ops = pc.cast(changes.column(cr.OP), pa.string()).to_numpy(zero_copy_only=False)
    before = changes.column(cr.BEFORE)
    moved = np.zeros(n, dtype=bool)
    if n and (ops == cr.UPDATE).any():
        for k in keys:
            same = pc.fill_null(pc.equal(changes.column(k), pc.struct_field(before, k)), False).to_numpy(
                zero_copy_only=False)
            moved |= (ops == cr.UPDATE) & ~same
    # events: (row, image) where image 0 = the after image opens a version, 1 = the before image's key
    # closes (a moved key); a delete closes its own key (its columns hold its before image)
    rows = np.concatenate([np.flatnonzero(moved), np.arange(n)])
    from_before = np.concatenate([np.ones(int(moved.sum()), dtype=bool), np.zeros(n, dtype=bool)])
    order = np.concatenate([2 * np.flatnonzero(moved), 2 * np.arange(n) + 1])
    opens = ~from_before & (ops[rows] != cr.DELETE)
    key_values = [pc.if_else(pa.array(from_before), pc.struct_field(before, k).take(pa.array(rows)),
                             changes.column(k).take(pa.array(rows))) for k in keys]
    events = pa.table([*key_values, pa.array(order), pa.array(rows), pa.array(opens)],
                      names=[*keys, "__order", "__row", "__opens"])
    events = events.take(pc.sort_indices(events, [*((k, "ascending") for k in keys), ("__order", "ascending")]))
    ev_rows = events.column("__row").to_numpy()
    ev_opens = events.column("__opens").to_numpy(zero_copy_only=False)
    first = np.ones(len(ev_rows), dtype=bool)
    if len(ev_rows) > 1:
        same_key = np.ones(len(ev_rows) - 1, dtype=bool)
        for k in keys:
            values = events.column(k)
            same_key &= pc.equal(values.slice(1), values.slice(0, len(values) - 1)).to_numpy(zero_copy_only=False)
        first[1:] = ~same_key
    # each event's next event of the same key closes the version it opens
    has_next = np.append(~first[1:], False)
    next_row = np.append(ev_rows[1:], -1)
    seqs = _seqs(changes)
    times = pc.cast(changes.column(cr.COMMIT_TS), TIME)
    closing = pa.table([*(events.column(k).filter(pa.array(first)) for k in keys),
                        times.take(pa.array(ev_rows[first])), _seq_array(seqs, ev_rows[first])],
                       names=[*keys, VALID_TO, VALID_TO_SEQ])
    opened = ev_rows[ev_opens]
    closed_by = np.where(has_next, next_row, -1)[ev_opens]
    to_rows = pa.array(np.where(closed_by >= 0, closed_by, 0))
    ended = pa.array(closed_by >= 0)
    added = pa.table([
        *(changes.column(c).take(pa.array(opened)) for c in columns),
        times.take(pa.array(opened)), _seq_array(seqs, opened),
        pc.if_else(ended, times.take(to_rows), pa.scalar(None, TIME)),
        pc.if_else(ended, _seq_array(seqs, np.where(closed_by >= 0, closed_by, 0)), pa.scalar(None, SEQ)),
        pc.invert(ended),
    ], names=[*columns, *COLUMNS])
    return SegmentVersions(closing, added)


def _seqs(changes: pa.Table) -> pa.Array:
    """Each change row's ``seq_number``, vectorized: in 256-bit decimals (an int64 needs 19 digits,
    10^24 25, and a 128-bit decimal product holds 38 at most), then in the column's 38 digits,
    which every real position fits (a cast that would lose digits raises)."""
    from decimal import Decimal

    def wide(name: str) -> pa.Array:
        return pc.cast(changes.column(name), pa.decimal256(19, 0))

    seq, offset, row = cr.ORDER_COLUMNS
    value = pc.add(pc.add(pc.multiply(wide(seq), pa.scalar(Decimal(10 ** 24), pa.decimal256(25, 0))),
                          pc.multiply(wide(offset), pa.scalar(Decimal(10 ** 12), pa.decimal256(13, 0)))), wide(row))
    return pc.cast(value, SEQ)


def _seq_array(seqs: pa.Array, rows: np.ndarray) -> pa.Array:
    return seqs.take(pa.array(rows, pa.int64()))


def current(rows: pa.Table) -> pa.Table:
    """A history table's current versions without the history's columns (what verification compares)."""
    from ..monitor.cut_checksums import plain_views

    mask = pc.fill_null(rows.column(CURRENT), True)
    return plain_views(rows.select([n for n in rows.column_names if n not in COLUMNS])).filter(mask)


def closed(rows: pa.Table, closing: pa.Table, keys: Sequence[str]) -> pa.Table:
    """``rows`` (a history table's, with its five columns) with the current version of each key in
    ``closing`` (``SegmentVersions.closing``) closed as it says; a row made before the table kept its
    history (its ``_current`` NULL) is its key's current version."""
    keys = list(keys)
    n = rows.num_rows
    is_current = pc.fill_null(rows.column(CURRENT), True)
    probe = rows.select(keys).append_column("__i", pa.array(np.arange(n, dtype=np.int64)))
    closing = pa.table([*(closing.column(k).cast(rows.schema.field(k).type) for k in keys),
                        closing.column(VALID_TO), closing.column(VALID_TO_SEQ)], names=[*keys, VALID_TO, VALID_TO_SEQ])
    matched = probe.join(closing, keys=keys, join_type="inner", use_threads=False)
    index = matched.column("__i").to_numpy()
    mask = np.zeros(n, dtype=bool)
    mask[index] = True
    mask &= is_current.to_numpy(zero_copy_only=False)
    where = np.zeros(n, dtype=np.int64)
    where[index] = np.arange(len(index))
    take = pa.array(where)
    ends = pa.array(mask)
    return _set(rows, {
        VALID_TO: pc.if_else(ends, matched.column(VALID_TO).take(take) if len(index) else rows.column(VALID_TO),
                             rows.column(VALID_TO)),
        VALID_TO_SEQ: pc.if_else(ends, matched.column(VALID_TO_SEQ).take(take) if len(index)
                                 else rows.column(VALID_TO_SEQ), rows.column(VALID_TO_SEQ)),
        CURRENT: pc.and_(is_current, pc.invert(ends)),
    })


def closed_all(rows: pa.Table, seq: int) -> pa.Table:
    """``rows`` (a history table's) with every current version closed at ``seq``, no time."""
    from decimal import Decimal

    is_current = pc.fill_null(rows.column(CURRENT), True)
    return _set(rows, {
        VALID_TO_SEQ: pc.if_else(is_current, pa.scalar(Decimal(seq), rows.schema.field(VALID_TO_SEQ).type),
                                 rows.column(VALID_TO_SEQ)),
        CURRENT: pa.array([False] * rows.num_rows),
    })


def _set(rows: pa.Table, values: dict) -> pa.Table:
    for name, array in values.items():
        index = rows.schema.get_field_index(name)
        rows = rows.set_column(index, rows.schema.field(index), pc.cast(array, rows.schema.field(index).type))
    return rows


def copy_versions(held: pa.Table | None, copy: pa.Table, keys: Sequence[str], seq: int) -> tuple[pa.Table | None, pa.Table]:
    """A copy (a resnapshot) of a history table: ``held`` (the table's rows, its five columns among
    them) with the current versions the copy no longer has, or has with other values, closed at
    ``seq`` (the copy's position, no time), and the versions the copy opens (its rows that are new
    or changed: ``copy``, the leader's columns). Columns are matched without case."""
    from decimal import Decimal

    at = pa.scalar(Decimal(seq), SEQ)

    def opened(rows: pa.Table) -> pa.Table:
        n = rows.num_rows
        return pa.table([*rows.columns, pa.nulls(n, TIME), pa.array([at.as_py()] * n, SEQ), pa.nulls(n, TIME),
                         pa.nulls(n, SEQ), pa.array([True] * n)], names=[*rows.column_names, *COLUMNS])

    if held is None or not held.num_rows:
        return held, opened(copy)
    keys = [k.lower() for k in keys]
    spelled = {n.lower(): n for n in held.column_names}
    names = [n for n in copy.column_names]
    if any(n.lower() not in spelled for n in names):
        same = pa.table({k: pa.array([], copy.schema.field(_spelling(copy, k)).type) for k in keys})
    else:
        same = _unchanged(held, copy, keys, spelled)
    copy_keys = pa.table([copy.column(_spelling(copy, k)) for k in keys], names=keys)
    new_or_changed = copy.filter(_not_in(copy_keys, same, keys))
    held_keys = pa.table([held.column(spelled[k]) for k in keys], names=keys)
    gone = pc.and_(pc.fill_null(held.column(CURRENT), True), _not_in(held_keys, same, keys))
    rows = _set(held, {
        VALID_TO_SEQ: pc.if_else(gone, at, held.column(VALID_TO_SEQ)),
        CURRENT: pc.and_(pc.fill_null(held.column(CURRENT), True), pc.invert(gone)),
    })
    return rows, opened(new_or_changed)


def _spelling(rows: pa.Table, lower: str) -> str:
    return next(n for n in rows.column_names if n.lower() == lower)


def _unchanged(held: pa.Table, copy: pa.Table, keys: list[str], spelled: dict) -> pa.Table:
    """The keys whose current version in ``held`` has exactly the copy's values."""
    current_rows = held.filter(pc.fill_null(held.column(CURRENT), True))
    names = [n.lower() for n in copy.column_names]
    left = pa.table([current_rows.column(spelled[n]) for n in names], names=[f"h.{n}" for n in names])
    right = pa.table([copy.column(_spelling(copy, n)).cast(left.schema.field(f"h.{n}").type) for n in names],
                     names=[f"c.{n}" for n in names])
    left = left.append_column("__k", _key_strings(left, [f"h.{k}" for k in keys]))
    right = right.append_column("__k", _key_strings(right, [f"c.{k}" for k in keys]))
    pairs = left.join(right, keys="__k", join_type="inner", use_threads=False)
    equal = pa.array([True] * pairs.num_rows)
    for n in names:
        a, b = pairs.column(f"h.{n}"), pairs.column(f"c.{n}")
        both_null = pc.and_(pc.is_null(a), pc.is_null(b))
        equal = pc.and_(equal, pc.or_(pc.fill_null(pc.equal(a, b), False), both_null))
    kept = pairs.filter(equal)
    return pa.table([kept.column(f"h.{k}") for k in keys], names=keys)


def _key_strings(rows: pa.Table, keys: list[str]) -> pa.Array:
    """One comparable value per row of its key columns (a composite key joined as text)."""
    parts = [pc.cast(rows.column(k), pa.large_string()) for k in keys]
    return parts[0] if len(parts) == 1 else pc.binary_join_element_wise(*parts, "\x00")


def _not_in(rows_keys: pa.Table, keys_table: pa.Table, keys: list[str]) -> pa.Array:
    """Per row of ``rows_keys``, whether its key is not among ``keys_table``'s."""
    if not keys_table.num_rows:
        return pa.array([True] * rows_keys.num_rows)
    found = _key_strings(keys_table, keys)
    return pc.invert(pc.is_in(_key_strings(rows_keys, keys), value_set=pc.unique(found)))
