"""The merge's transforms: pure functions of DataFrames and plain values.

``after_checkpoint`` keeps the change rows the follower lacks (``after_copies`` those a table
copied in chunks lacks, ``fold_catch_up`` folds them into the copy); ``net_keyed_changes`` and
``net_keyless_changes`` turn a table's change rows into its net effect (one row per key, or a
multiset delta per distinct row); ``net_changes`` picks the one a table needs. They read no
storage and touch no follower, so tests run them on small inline rows.
"""

from __future__ import annotations

from typing import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ..contracts import BinlogPosition, SnapshotChunk, TableChanges
from ..contracts import change_row as cr

OP, COUNT = cr.NET_OP, cr.NET_COUNT

# working columns of the transforms: the change-row contract reserves _op etc., and the merge job
# refuses tables with columns starting with __mcdc_ (Follower.check_table)
_IMAGE, _KIND, _ORDER, _CREATES, _DELTA = "__mcdc_image", "__mcdc_kind", "__mcdc_order", "__mcdc_creates", "__mcdc_delta"


def col(name: str) -> Column:
    """A top-level column by its exact name (dots, backticks and spaces included)."""
    return F.col("`" + name.replace("`", "``") + "`")


def table_columns(df: DataFrame) -> list[str]:
    """The leader table's own columns of a change-row DataFrame (everything but the metadata)."""
    return [c for c in df.columns if c not in cr.METADATA_NAMES]


# -- transforms -----------------------------------------------------------------------------------


def after_checkpoint(df: DataFrame, position: BinlogPosition) -> DataFrame:
    """The change rows whose event lies at or after ``position``: the ones the follower lacks.
    (A checkpoint is a transaction boundary, so no transaction is ever split by this.)"""
    return df.where(_after(position))


def _after(position: BinlogPosition) -> Column:
    seq, pos = col(cr.BINLOG_SEQ), col(cr.BINLOG_POS)
    return (seq > position.sequence) | ((seq == position.sequence) & (pos >= position.offset))


def _lacked_by_copy(key: Column, chunks: Sequence[SnapshotChunk]) -> Column:
    """Whether the chunk holding ``key`` was copied before the change (so it lacks it)."""
    lacked = F.lit(False)
    for chunk in chunks:
        inside = F.lit(True)
        if chunk.lo is not None:
            inside = inside & (key >= chunk.lo)
        if chunk.hi is not None:
            inside = inside & (key < chunk.hi)
        lacked = lacked | (inside & _after(chunk.at))
    return lacked


def after_copies(df: DataFrame, split_column: str, chunks: Sequence[SnapshotChunk]) -> DataFrame:
    """The change rows a table copied in chunks lacks: each chunk was read at its own position,
    so a change is kept when it is after the position of the chunk its row lies in.

    An update that moves a row from a chunk copied before it to one copied after it, or the other
    way, is two halves: the removal of the old row (a delete of the before-image), kept when the
    old row's chunk lacks it, and the new row (an insert of the after-image), kept when the new
    row's chunk lacks it. (Kept whole, it would bring back into a chunk read after it a row that
    later changes had moved on.)"""
    op, key = col(cr.OP), col(split_column)
    before_key = F.col(cr.BEFORE).getField(split_column)
    images = set(table_columns(df))
    no_before = F.lit(None).cast(df.schema[cr.BEFORE].dataType)

    def half(new_op: str, image: str) -> Column:
        fields = []
        for name in df.columns:
            if name == cr.OP:
                fields.append(F.lit(new_op).alias(name))
            elif name == cr.BEFORE:
                fields.append(no_before.alias(name))
            elif name in images and image == "before":
                fields.append(F.col(cr.BEFORE).getField(name).alias(name))
            else:
                fields.append(col(name).alias(name))
        return F.struct(*fields)

    whole = F.struct(*[col(name).alias(name) for name in df.columns])
    old_lacks, new_lacks = _lacked_by_copy(before_key, chunks), _lacked_by_copy(key, chunks)
    split = (op == cr.UPDATE) & (old_lacks != new_lacks)  # (a delete's or insert's _before is NULL)
    kept = (F.when(split, F.array(F.when(old_lacks, half(cr.DELETE, "before")),
                                  F.when(new_lacks, half(cr.INSERT, "after"))))
            .otherwise(F.array(F.when(new_lacks, whole))))
    return df.select(F.explode(F.filter(kept, lambda change: change.isNotNull())).alias("change")).select("change.*")


def _order(sub: int) -> Column:
    """The total order of changes; ``sub`` orders the two halves of a key-changing update."""
    return F.struct(*[col(c) for c in cr.ORDER_COLUMNS], F.lit(sub).alias("sub"))


def _key_changed(key_columns: Sequence[str]) -> Column:
    same = [F.col(cr.BEFORE).getField(k).eqNullSafe(col(k)) for k in key_columns]
    unchanged = same[0]
    for condition in same[1:]:
        unchanged = unchanged & condition
    return (col(cr.OP) == cr.UPDATE) & ~unchanged


def _events(df: DataFrame, cases: Sequence[tuple[Column, Sequence[Column]]]) -> DataFrame:
    """One pass over the change rows: each row becomes the events of the first case it matches
    (``explode`` of an array of event structs), so the Parquet files are read once, not once per
    kind of event as a union of filtered copies would."""
    chosen = F.when(cases[0][0], F.array(*cases[0][1]))
    for condition, events in cases[1:]:
        chosen = chosen.when(condition, F.array(*events))
    return df.select(F.explode(chosen).alias("event")).select("event.*")


def net_keyed_changes(df: DataFrame, key_columns: Sequence[str]) -> DataFrame:
    """One row per key touched: the table's columns (the last image), ``__mcdc_op`` and
    ``__mcdc_n`` (=1).

    Every change becomes events on keys: an insert or update upserts its after-image; a delete
    deletes; an update that changes the key first deletes the old key (from ``_before``). Per key
    the last event wins. ``__mcdc_op`` is ``U`` (the key existed before the batch: replace it),
    ``I`` (the key's first event created it, so the follower cannot have it: insert only) or ``D``
    (delete). A key created and deleted inside the batch disappears."""
    columns = table_columns(df)
    op = col(cr.OP)
    after = F.struct(*[col(c) for c in columns])
    # a moved key's delete needs only the key of its before-image: the rest is NULL where the
    # change rows were read with their key only (``reader.change_schema``)
    held = set(df.schema[cr.BEFORE].dataType.fieldNames())
    before = F.struct(*[(F.col(cr.BEFORE).getField(c) if c in held else F.lit(None).cast(df.schema[c].dataType)).alias(c)
                        for c in columns])
    key_changed = _key_changed(key_columns)

    def event(image: Column, kind: str, sub: int, creates: Column) -> Column:
        return F.struct(image.alias(_IMAGE), F.lit(kind).alias(_KIND), _order(sub).alias(_ORDER),
                        creates.alias(_CREATES))

    events = _events(df, [
        (op == cr.DELETE, [event(after, cr.DELETE, 1, F.lit(False))]),
        (key_changed, [event(before, cr.DELETE, 0, F.lit(False)), event(after, cr.UPDATE, 1, F.lit(True))]),
        (op.isin(cr.INSERT, cr.UPDATE), [event(after, cr.UPDATE, 1, op == cr.INSERT)]),
    ])
    keys = [f"__mcdc_key{i}" for i in range(len(key_columns))]
    events = events.select("*", *[F.col(_IMAGE).getField(k).alias(n) for k, n in zip(key_columns, keys)])
    last = F.col("last")
    # Shuffle by key first: the aggregation then runs entirely after the exchange, sorting the
    # rows once, instead of sorting them map-side for a partial aggregation that cannot shrink
    # them (most keys change once) and sorting them again after the exchange.
    net = events.repartition(*keys).groupBy(*keys).agg(
        F.max_by(F.struct(_KIND, _IMAGE), _ORDER).alias("last"),
        F.min_by(_CREATES, _ORDER).alias("first_creates"),
    )
    net = net.where(~((last.getField(_KIND) == cr.DELETE) & F.col("first_creates")))
    # Rows leave in key order within each partition (the aggregation's own order, so this sort
    # costs nothing): the follower then inserts them in key order, appending to its index.
    net = net.sortWithinPartitions(*keys)
    net_op = (F.when(last.getField(_KIND) == cr.DELETE, cr.DELETE)
              .when(F.col("first_creates"), cr.INSERT).otherwise(cr.UPDATE))
    return net.select(
        *[last.getField(_IMAGE).getField(c).alias(c) for c in columns],
        net_op.alias(OP),
        F.lit(1).cast("long").alias(COUNT),
    )


def net_keyless_changes(df: DataFrame, columns: Sequence[str]) -> DataFrame:
    """The net multiset delta of a table without a primary key: one row per distinct full row
    whose count changed, with ``__mcdc_op`` ``I`` (add ``__mcdc_n`` copies) or ``D`` (remove
    ``__mcdc_n`` copies). Inserts and update after-images count +1, deletes and update
    before-images -1; NULLs compare equal. Order does not matter for a multiset."""
    op = col(cr.OP)
    after = F.struct(*[col(c) for c in columns])
    before = F.struct(*[F.col(cr.BEFORE).getField(c).alias(c) for c in columns])

    def event(image: Column, delta: int) -> Column:
        return F.struct(image.alias(_IMAGE), F.lit(delta).alias(_DELTA))

    events = _events(df, [
        (op == cr.INSERT, [event(after, 1)]),
        (op == cr.DELETE, [event(after, -1)]),
        (op == cr.UPDATE, [event(before, -1), event(after, 1)]),
    ])
    net = events.groupBy(_IMAGE).agg(F.sum(_DELTA).alias(_DELTA)).where(F.col(_DELTA) != 0)
    return net.select(
        *[F.col(_IMAGE).getField(c).alias(c) for c in columns],
        F.when(F.col(_DELTA) > 0, cr.INSERT).otherwise(cr.DELETE).alias(OP),
        F.abs(F.col(_DELTA)).cast("long").alias(COUNT),
    )


def expand_copies(net: DataFrame) -> DataFrame:
    """Keyless ``I`` rows as ``__mcdc_n`` separate rows (the follower inserts staged rows as they
    are); ``D`` rows stay single, their count is the ``LIMIT`` of their delete."""
    inserting = col(OP) == cr.INSERT
    copies = F.when(inserting, F.sequence(F.lit(1).cast("long"), col(COUNT))).otherwise(F.array(F.lit(1).cast("long")))
    return (
        net.withColumn("__mcdc_copy", F.explode(copies))
        .drop("__mcdc_copy")
        .withColumn(COUNT, F.when(inserting, F.lit(1).cast("long")).otherwise(col(COUNT)))
    )


def fold_catch_up(copied: DataFrame, net: DataFrame, key_columns: Sequence[str]) -> DataFrame:
    """A table copied in chunks, brought to one position before anything is loaded: the copied
    rows whose key the catch-up's net changes (``net_keyed_changes`` of ``after_copies``) leave
    alone, and the final rows of the keys they touch; every row an insert.

    Each chunk was read at its own position, so the union of the chunks is a state the leader never
    had: a value of a secondary UNIQUE key that moved from a row of an early chunk to a row of a
    late one is in both. Loaded as it is, the table refuses it. Folded first, the rows are the
    leader's table at the copy's last position, which held every constraint."""
    keys = [f"__mcdc_key{i}" for i in range(len(key_columns))]
    touched = net.select(*[col(k).alias(n) for k, n in zip(key_columns, keys)])
    same_key = [col(k) == F.col(n) for k, n in zip(key_columns, keys)]
    condition = same_key[0]
    for other in same_key[1:]:
        condition = condition & other
    columns = [c for c in copied.columns if c not in (OP, COUNT)]
    untouched = copied.join(touched, condition, "left_anti").select(*[col(c) for c in columns])
    final = net.where(col(OP) != cr.DELETE).select(*[col(c) for c in columns])
    return untouched.unionByName(final).select("*", F.lit(cr.INSERT).alias(OP), F.lit(1).cast("long").alias(COUNT))


def net_changes(changes: DataFrame, table: TableChanges) -> DataFrame:
    """The net rows of one table's change rows: by key, or by full row for a keyless table."""
    if table.key_columns:
        return net_keyed_changes(changes, table.key_columns)
    return expand_copies(net_keyless_changes(changes, [c.name for c in table.columns]))
