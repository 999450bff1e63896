"""Which failures a retry can fix (``mysql_cdc.retry_policy``): one verdict for the extract task, the
merge task and the merge job. The DAG-level consequence (a permanent error is not retried, a
transient one is) is tested in tests/airflow/dags/test_fail_fast.py."""

from __future__ import annotations

import pymysql
import pytest

from mysql_cdc.merge.errors import CheckpointError, FollowerDivergedError, FollowerSchemaError
from mysql_cdc.capture.leader import PreflightError, PurgedPositionError
from mysql_cdc.contracts import RangeGapError
from mysql_cdc.contracts.replay import OtherLeaderError
from mysql_cdc.retry_policy import describe, is_permanent
from mysql_cdc.pipeline_config import PipelineConfigError


def chained(outer: BaseException, inner: BaseException) -> BaseException:
    try:
        try:
            raise inner
        except BaseException as exc:
            raise outer from exc
    except BaseException as exc:
        return exc


class Verdict(Exception):
    def __init__(self, permanent):
        super().__init__("carried verdict")
        self.permanent = permanent


@pytest.mark.parametrize("error", [
    RangeGapError("gap"), OtherLeaderError("other leader"), PipelineConfigError("bad field"),
    PreflightError("binlog_format is STATEMENT"), PurgedPositionError("purged"),
    FollowerSchemaError("columns differ"), FollowerDivergedError("changed outside"),
    pymysql.err.InternalError(1273, "Unknown collation: 'utf8mb4_0900_ai_ci'"),
    pymysql.err.ProgrammingError(1064, "You have an error in your SQL syntax"),
    pymysql.err.OperationalError(1142, "INSERT command denied to user"),
    pymysql.err.OperationalError(1290, "The MySQL server is running with the --read-only option"),
    pymysql.err.OperationalError(1836, "Running in read-only mode"),
    pymysql.err.OperationalError(1114, "The table 't' is full"),
    pymysql.err.OperationalError(1021, "Disk full (./t.MYD); waiting for someone to free some space"),
    chained(RuntimeError("wrapped"), FollowerSchemaError("columns differ")),
    Verdict(True),
], ids=lambda e: type(e).__name__)
def test_no_retry_fixes(error):
    assert is_permanent(error)


@pytest.mark.parametrize("error", [
    pymysql.err.OperationalError(2013, "Lost connection to server during query"),
    pymysql.err.OperationalError(2003, "Can't connect to MySQL server"),
    pymysql.err.OperationalError(1205, "Lock wait timeout exceeded"),
    pymysql.err.OperationalError(1213, "Deadlock found"),
    CheckpointError("the checkpoint moved while this merge ran"),
    ConnectionResetError("reset by peer"), RuntimeError("something we do not know"),
    # a transient server error decides before the permanent type it was raised from
    chained(pymysql.err.OperationalError(2006, "server has gone away"), FollowerSchemaError("x")),
    Verdict(False),
], ids=lambda e: type(e).__name__)
def test_a_retry_may_fix(error):
    assert not is_permanent(error)


def test_a_server_error_reads_cause_first():
    error = pymysql.err.InternalError(1273, "Unknown collation: 'utf8mb4_0900_ai_ci'")
    assert describe(error) == "Unknown collation: 'utf8mb4_0900_ai_ci' (MySQL error 1273)"
    assert describe(RangeGapError("gap: range ...")) == "gap: range ..."
