"""The merge job's pure transforms on small inline change rows (one shared SparkSession)."""

import pytest
from pyspark.sql import Row
from merge_helpers import assert_dataframe_equal as assertDataFrameEqual

from mysql_cdc.contracts import BinlogPosition, SnapshotChunk
from mysql_cdc.merge.transforms import (
    after_checkpoint, after_copies, expand_copies, fold_catch_up, net_keyed_changes, net_keyless_changes,
)

SCHEMA = (
    "id INT, k2 STRING, v STRING, _op STRING, _binlog_seq LONG, _binlog_pos LONG, _row_index INT, "
    "_before STRUCT<id: INT, k2: STRING, v: STRING>"
)


def changes(spark, *rows):
    """rows: (op, (seq, pos, index), after-or-deleted image, before image or None)."""
    data = [(*image, op, seq, pos, idx, before) for op, (seq, pos, idx), image, before in rows]
    return spark.createDataFrame(data, SCHEMA)


def keyed(spark, *rows, keys=("id",)):
    return net_keyed_changes(changes(spark, *rows), list(keys))


def net(*rows):
    """Expected net rows: (id, k2, v, op, n)."""
    return [Row(id=i, k2=k, v=v, __mcdc_op=op, __mcdc_n=n) for i, k, v, op, n in rows]


# -- keyed --------------------------------------------------------------------------------------


def test_keyed_update_of_existing_row_is_an_upsert_of_the_last_image(spark):
    actual = keyed(
        spark,
        ("U", (1, 100, 0), (1, "a", "second"), (1, "a", "first")),
        ("U", (1, 200, 0), (1, "a", None), (1, "a", "second")),  # NULL in a non-key column survives
    )
    assertDataFrameEqual(actual, net((1, "a", None, "U", 1)))


def test_keyed_insert_then_update_is_an_insert_of_a_new_key(spark):
    actual = keyed(
        spark,
        ("I", (1, 100, 0), (7, "a", "new"), None),
        ("U", (1, 200, 0), (7, "a", "newer"), (7, "a", "new")),
    )
    assertDataFrameEqual(actual, net((7, "a", "newer", "I", 1)))


def test_keyed_insert_then_delete_cancels(spark):
    actual = keyed(
        spark,
        ("I", (1, 100, 0), (7, "a", "x"), None),
        ("U", (1, 150, 0), (7, "a", "y"), (7, "a", "x")),
        ("D", (1, 200, 0), (7, "a", "y"), None),
    )
    assertDataFrameEqual(actual, [])


def test_keyed_delete_then_insert_replaces_the_row(spark):
    actual = keyed(
        spark,
        ("D", (1, 100, 0), (3, "a", "old"), None),
        ("I", (1, 200, 0), (3, "a", "reborn"), None),
    )
    assertDataFrameEqual(actual, net((3, "a", "reborn", "U", 1)))


def test_keyed_delete_of_existing_row(spark):
    actual = keyed(spark, ("D", (1, 100, 0), (3, "a", "old"), None))
    assertDataFrameEqual(actual, net((3, "a", "old", "D", 1)))


def test_keyed_key_change_deletes_the_old_key_and_inserts_the_new(spark):
    actual = keyed(spark, ("U", (1, 100, 0), (2, "a", "moved"), (1, "a", "moved")))
    assertDataFrameEqual(actual, net((1, "a", "moved", "D", 1), (2, "a", "moved", "I", 1)))


def test_keyed_key_change_read_with_the_old_key_only(spark):
    # the merge reads a keyed table's before-image as its key (reader.change_schema)
    schema = SCHEMA.replace("_before STRUCT<id: INT, k2: STRING, v: STRING>", "_before STRUCT<id: INT>")
    rows = spark.createDataFrame([(2, "a", "moved", "U", 1, 100, 0, (1,))], schema)
    actual = net_keyed_changes(rows, ["id"])
    assertDataFrameEqual(actual, net((1, None, None, "D", 1), (2, "a", "moved", "I", 1)))


def test_keyed_key_swap_through_a_temporary_key(spark):
    actual = keyed(
        spark,
        ("U", (1, 100, 0), (3, "a", "one"), (1, "a", "one")),
        ("U", (1, 200, 0), (1, "a", "two"), (2, "a", "two")),
        ("U", (1, 300, 0), (2, "a", "one"), (3, "a", "one")),
    )
    # 1 and 2 existed before the batch: replaced; 3 was created and removed inside it
    assertDataFrameEqual(actual, net((1, "a", "two", "U", 1), (2, "a", "one", "U", 1)))


def test_keyed_changing_one_column_of_a_composite_key(spark):
    actual = keyed(spark, ("U", (1, 100, 0), (1, "b", "v"), (1, "a", "v")), keys=("id", "k2"))
    assertDataFrameEqual(actual, net((1, "a", "v", "D", 1), (1, "b", "v", "I", 1)))


def test_keyed_order_is_file_then_offset_then_row_index(spark):
    actual = keyed(
        spark,
        # listed out of order on purpose; binlog.000002 comes after any offset of binlog.000001
        ("U", (2, 4, 0), (1, "a", "last"), (1, "a", "x")),
        ("U", (1, 999_999, 1), (1, "a", "second"), (1, "a", "x")),
        ("U", (1, 999_999, 0), (1, "a", "first"), (1, "a", "x")),
    )
    assertDataFrameEqual(actual, net((1, "a", "last", "U", 1)))


# -- keyless ------------------------------------------------------------------------------------


def keyless(spark, *rows):
    return net_keyless_changes(changes(spark, *rows), ["id", "k2", "v"])


def test_keyless_duplicates_count(spark):
    actual = keyless(
        spark,
        ("I", (1, 100, 0), (1, "a", "x"), None),
        ("I", (1, 100, 1), (1, "a", "x"), None),
        ("I", (1, 200, 0), (1, "a", "x"), None),
        ("D", (1, 300, 0), (1, "a", "x"), None),
    )
    assertDataFrameEqual(actual, net((1, "a", "x", "I", 2)))


def test_keyless_nulls_compare_equal(spark):
    actual = keyless(
        spark,
        ("I", (1, 100, 0), (None, "a", None), None),
        ("I", (1, 200, 0), (None, "a", None), None),
        ("D", (1, 300, 0), (None, "a", None), None),
    )
    assertDataFrameEqual(actual, net((None, "a", None, "I", 1)))


def test_keyless_update_moves_one_copy(spark):
    actual = keyless(spark, ("U", (1, 100, 0), (1, "a", "new"), (1, "a", "old")))
    assertDataFrameEqual(actual, net((1, "a", "old", "D", 1), (1, "a", "new", "I", 1)))


def test_keyless_insert_then_delete_cancels(spark):
    actual = keyless(
        spark,
        ("I", (1, 100, 0), (1, "a", "x"), None),
        ("U", (1, 200, 0), (1, "a", "y"), (1, "a", "x")),
        ("D", (1, 300, 0), (1, "a", "y"), None),
    )
    assertDataFrameEqual(actual, [])


def test_keyless_deletes_of_rows_from_before_the_batch(spark):
    actual = keyless(
        spark,
        ("D", (1, 100, 0), (1, "a", "x"), None),
        ("D", (1, 100, 1), (1, "a", "x"), None),
    )
    assertDataFrameEqual(actual, net((1, "a", "x", "D", 2)))


def test_expand_copies_repeats_inserts_and_keeps_deletes_single(spark):
    counted = spark.createDataFrame(
        [(1, "a", "x", "I", 3), (2, "b", "y", "D", 2)],
        "id INT, k2 STRING, v STRING, __mcdc_op STRING, __mcdc_n LONG",
    )
    assertDataFrameEqual(
        expand_copies(counted),
        net(*[(1, "a", "x", "I", 1)] * 3, (2, "b", "y", "D", 2)),
    )


# -- replay position ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("checkpoint", "kept"),
    [
        ("binlog.000001:200", [(1, 200), (1, 300), (2, 4)]),  # a row at the checkpoint is after it
        ("binlog.000001:201", [(1, 300), (2, 4)]),
        ("binlog.000002:4", [(2, 4)]),
        ("binlog.000003:4", []),
    ],
)
def test_after_checkpoint_keeps_rows_at_or_after_the_position(spark, checkpoint, kept):
    df = changes(spark, *[("I", (seq, pos, 0), (pos, "a", "v"), None) for seq, pos in [(1, 100), (1, 200), (1, 300), (2, 4)]])
    actual = after_checkpoint(df, BinlogPosition.parse(checkpoint)).select("_binlog_seq", "_binlog_pos")
    assertDataFrameEqual(actual, [Row(_binlog_seq=s, _binlog_pos=p) for s, p in kept])


# -- after_copies: a table copied in chunks, each at its own position ------------------------------

# ids below 10 were copied at 1:150, ids from 10 at 1:300
CHUNKS = (SnapshotChunk(0, None, 10, BinlogPosition("binlog.000001", 150), 4),
          SnapshotChunk(1, 10, None, BinlogPosition("binlog.000001", 300), 6))


def change_rows(*rows):
    """Expected change rows: (id, k2, v, op, (seq, pos, index), before image or None)."""
    return [Row(id=i, k2=k, v=v, _op=op, _binlog_seq=seq, _binlog_pos=pos, _row_index=idx,
                _before=None if before is None else Row(id=before[0], k2=before[1], v=before[2]))
            for i, k, v, op, (seq, pos, idx), before in rows]


def test_after_copies_keeps_a_change_when_its_rows_chunk_was_copied_before_it(spark):
    actual = after_copies(changes(
        spark,
        ("I", (1, 100, 0), (3, "a", "in chunk 0's copy"), None),
        ("U", (1, 200, 0), (4, "a", "after chunk 0's copy"), (4, "a", "x")),
        ("D", (1, 200, 1), (12, "a", "in chunk 1's copy"), None),
        ("D", (1, 300, 0), (13, "a", "at chunk 1's position: after it"), None),
        ("I", (2, 4, 0), (5, "a", None), None),  # a later binlog file
    ), "id", CHUNKS)
    assertDataFrameEqual(actual, change_rows(
        (4, "a", "after chunk 0's copy", "U", (1, 200, 0), (4, "a", "x")),
        (13, "a", "at chunk 1's position: after it", "D", (1, 300, 0), None),
        (5, "a", None, "I", (2, 4, 0), None),
    ))


def test_after_copies_splits_an_update_that_moves_a_row_between_chunks(spark):
    actual = after_copies(changes(
        spark,
        # 12 -> 3 at 1:200: chunk 1 (copied at 300) already lacks 12 and chunk 0 (150) lacks 3
        ("U", (1, 200, 0), (3, "a", "moved"), (12, "a", "moved")),
        # 4 -> 11 at 1:200: chunk 0 lacks the removal of 4; chunk 1 already holds 11
        ("U", (1, 200, 1), (11, "a", "moved"), (4, "a", "moved")),
        # 5 -> 6 inside chunk 0: one update, kept whole
        ("U", (1, 200, 2), (6, "a", "moved"), (5, "a", "moved")),
    ), "id", CHUNKS)
    assertDataFrameEqual(actual, change_rows(
        (3, "a", "moved", "I", (1, 200, 0), None),
        (4, "a", "moved", "D", (1, 200, 1), None),
        (6, "a", "moved", "U", (1, 200, 2), (5, "a", "moved")),
    ))


# -- fold_catch_up: the chunks of a copy brought to one position before the load ---------------------

COPY_SCHEMA = "id INT, k2 STRING, v STRING, __mcdc_op STRING, __mcdc_n LONG"


def test_fold_catch_up_loads_the_table_at_one_position(spark):
    """id 1 (early chunk) gave its unique value 'x' to id 190 (late chunk) after the early chunk
    was read: the chunks hold 'x' twice; the catch-up's net changes take it from id 1. Also: a
    row the catch-up deletes, one it inserts, a NULL left as it was."""
    copied = spark.createDataFrame([(1, "a", "x", "I", 1), (2, "a", None, "I", 1), (3, "a", "gone", "I", 1),
                                    (190, "a", "x", "I", 1)], COPY_SCHEMA)
    catch_up = keyed(spark,
                     ("U", (1, 500, 0), (1, "a", None), (1, "a", "x")),
                     ("D", (1, 510, 0), (3, "a", "gone"), None),
                     ("I", (1, 520, 0), (7, "a", "new"), None))
    actual = fold_catch_up(copied, catch_up, ["id"])
    assertDataFrameEqual(actual, net((1, "a", None, "I", 1), (2, "a", None, "I", 1), (7, "a", "new", "I", 1),
                                     (190, "a", "x", "I", 1)))
