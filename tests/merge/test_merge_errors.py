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


def test_a_tables_failed_commit_names_the_table_and_the_recovery():
    from mysql_cdc.merge.errors import FollowerSchemaError, TableCommitError
    from mysql_cdc.retry_policy import is_permanent

    lost = ConnectionResetError("Connection reset by peer\n\tat the executor")
    error = TableCommitError.of("shop.orders", 12, lost)
    assert str(error) == (
        "shop.orders: committing its 12 net rows failed: Connection reset by peer. A retry of the run applies "
        "what is missing (the segment's tables already committed are skipped); if shop.orders fails again, "
        'copy it anew: a manual run with conf {"resnapshot": ["shop.orders"]}')
    try:
        raise error from lost
    except TableCommitError as raised:
        assert not is_permanent(raised)  # the cause says: a reset may pass
    try:
        raise TableCommitError.of("shop.orders", 1, FollowerSchemaError("no column x")) from FollowerSchemaError("x")
    except TableCommitError as raised:
        assert is_permanent(raised)
