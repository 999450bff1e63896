"""The merge's summary as a user reads it: one line per table, figures summed across segments."""

from mysql_cdc.merge.report import LOGGED_TABLES, MergeSummary, TableReport, segment_lines


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


def test_a_segments_tables_are_logged_one_by_one_up_to_the_limit():
    reports = [TableReport("shop.orders", 3, inserted=2, updated=1, stage_seconds=0.25, apply_seconds=0.5),
               TableReport("shop.items", 1, deleted=1, stage_seconds=0.125)]
    assert segment_lines(reports, limit=2) == [
        "merged shop.orders: 3 changes in -> 2 inserted, 1 updated, 0 deleted in 0.8 s (stage 0.25 s, apply 0.50 s)",
        "merged shop.items: 1 changes in -> 0 inserted, 0 updated, 1 deleted in 0.1 s (stage 0.12 s, apply 0.00 s)",
    ]


def test_of_many_tables_the_busiest_are_logged_in_the_segments_order_and_the_others_in_one_line():
    # 1,200 tables of 1 change each, and three busier ones among them
    reports = [TableReport(f"db.t{i:04d}", 1, inserted=1, stage_seconds=0.001) for i in range(1_200)]
    for i, changes in ((7, 50), (3, 40), (900, 60)):
        reports[i] = TableReport(f"db.t{i:04d}", changes, inserted=changes - 10, deleted=10, apply_seconds=0.5)
    lines = segment_lines(reports, limit=3)
    assert lines == [
        "merged db.t0003: 40 changes in -> 30 inserted, 0 updated, 10 deleted in 0.5 s (stage 0.00 s, apply 0.50 s)",
        "merged db.t0007: 50 changes in -> 40 inserted, 0 updated, 10 deleted in 0.5 s (stage 0.00 s, apply 0.50 s)",
        "merged db.t0900: 60 changes in -> 50 inserted, 0 updated, 10 deleted in 0.5 s (stage 0.00 s, apply 0.50 s)",
        "merged 1,197 more tables: 1,197 changes in -> 1,197 inserted, 0 updated, 0 deleted in 1.2 s "
        "(stage 1.20 s, apply 0.00 s; each table in the merge summary)",
    ]
    assert len(segment_lines(reports)) == LOGGED_TABLES + 1  # the job's own limit
