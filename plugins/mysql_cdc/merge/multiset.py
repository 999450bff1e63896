"""A keyless table's changes as multiset arithmetic, planned in Arrow: every sink that rewrites
the rows a batch touches (delta-rs's merge, an Iceberg table's copy-on-write) applies the same
plan. A keyless table holds equal rows as copies; the batch's net rows say, per row value, how
many copies it inserted or deleted (``contracts.change_row.NET_COUNT``)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..contracts import change_row as cr

# the column of the rows a table holds that counts a row value's copies: a working name, which no
# leader column has (``merge.netting``), so that a table with a column ``n`` is counted too
COPIES = "__mcdc_copies"
SIDE = "__mcdc_side"  # a rewrite's row: a row value to remove ("del") or a copy to insert ("ins")


def keyless_rewrite(net: pa.Table, held: pa.Table, names: list[str]) -> pa.Table:
    """The rows of a keyless table's rewrite: for
    every row value the net rows touch, one ``del`` row when the table holds copies of it (all of
    them go), and one ``ins`` row per copy it must hold after the batch (its held copies plus the
    copies the batch inserted, minus those it deleted). ``net``: the net rows (columns ``names``,
    the net op and copies); ``held``: the distinct row values the table holds (columns ``names``)
    with their copies (``COPIES``), NULLs grouped together as the leader's equal rows are equal."""
    zeros, ones = pa.array(np.zeros(net.num_rows, np.int64)), pa.array(np.ones(net.num_rows, np.int64))
    change = pc.if_else(pc.equal(net.column(cr.NET_OP), cr.INSERT), net.column(cr.NET_COUNT),
                        pc.negate(net.column(cr.NET_COUNT))).cast(pa.int64())
    touched = pa.table([*net.select(names).columns, change, zeros, ones],
                       names=[*names, "change", "held", "touched"])
    values = held.select(names).cast(touched.select(names).schema)  # delta-rs reads strings as views
    held_zeros = pa.array(np.zeros(held.num_rows, np.int64))
    existing = pa.table([*values.columns, held_zeros, held.column(COPIES).cast(pa.int64()), held_zeros],
                        names=touched.column_names)
    # one group per row value, NULLs equal (a join would not match them); only the touched ones
    totals = (pa.concat_tables([touched, existing]).group_by(names, use_threads=False)
              .aggregate([("change", "sum"), ("held", "sum"), ("touched", "max")]))
    totals = totals.filter(pc.greater(totals.column("touched_max"), 0))
    held_now = totals.column("held_sum").to_numpy()
    copies = np.maximum(held_now + totals.column("change_sum").to_numpy(), 0)
    removed = totals.select(names).filter(pa.array(held_now > 0))
    inserted = totals.select(names).take(pa.array(np.repeat(np.arange(totals.num_rows), copies)))
    return pa.concat_tables([
        removed.append_column(SIDE, pa.array(["del"] * removed.num_rows, pa.string())),
        inserted.append_column(SIDE, pa.array(["ins"] * inserted.num_rows, pa.string())),
    ])

