"""How the merge job reports an error: one line, the real cause dug out of Spark's wrapping."""

from mysql_cdc.contracts import RangeGapError


def test_one_line_error_digs_the_real_error_out_of_an_executor_report():
    from mysql_cdc.merge.job import one_line

    report = RuntimeError(
        "An exception was thrown from the Python worker. Please see the stack trace below.\n"
        "Traceback (most recent call last):\n  File \"staging.py\", line 1, in load\n"
        "mysql_cdc.kinds.mysql.sink.staging.StagingError: loading staging table stg_x changed values: Data truncated\n"
    )
    assert one_line(report) == "mysql_cdc.kinds.mysql.sink.staging.StagingError: loading staging table stg_x changed values: Data truncated"
    assert one_line(RangeGapError("gap: batch b starts at x")) == "gap: batch b starts at x"
