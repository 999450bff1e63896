"""The merge's summary as a user reads it: one line per table, figures summed across segments."""

from mysql_cdc.apply.report import MergeSummary, TableReport


def test_one_line_per_table_summed_across_segments_and_back_from_json():
    summary = MergeSummary("shop", "b1", noop=False, checkpoint="binlog.000002:4", segments_applied=3, seconds=2.5)
    summary.add(TableReport("shop.orders", 3, inserted=1, updated=1, deleted=0, stage_seconds=0.5))
    summary.add(TableReport("shop.items", 1, deleted=1, apply_seconds=0.25))
    summary.add(TableReport("shop.orders", 2, inserted=0, updated=1, deleted=1, apply_seconds=0.5))
    summary.add(TableReport("shop.new", 1000, kind="snapshot", inserted=2, updated=1))
    lines = summary.describe()
    assert lines == [
        "batch b1: 1,006 rows in 3 table(s), 3 segment(s) applied in 2.5 s; checkpoint now binlog.000002:4",
        "  shop.orders: 5 changes in -> 1 inserted, 2 updated, 1 deleted in 1.0 s",
        "  shop.items: 1 changes in -> 0 inserted, 0 updated, 1 deleted in 0.2 s",
        "  shop.new: copied 1,000 rows, then caught up: 2 inserted, 1 updated, 0 deleted in 0.0 s",
    ]
    assert MergeSummary.from_json(summary.to_json()).describe() == lines


def test_an_applied_batch_says_so():
    summary = MergeSummary("shop", "b1", noop=True, checkpoint="binlog.000002:4")
    assert summary.describe() == ["batch b1: already applied (checkpoint binlog.000002:4): nothing to do"]
