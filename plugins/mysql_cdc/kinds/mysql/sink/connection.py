"""Follower sessions: one place that opens them, so every session gets the same settings."""

from __future__ import annotations

import pymysql

from ....mysql_server import MySQLSettings
from ....merge.errors import FollowerUnwritableError, MergeError
from ....retry_policy import causes, describe, server_error_code

# the server errors that refuse every write, not one statement, and what they mean
UNWRITABLE = {
    1290: "it is read-only (read_only or super_read_only is ON)",
    1836: "it is in read-only mode",
    1792: "it is read-only (the session's transaction is read-only)",
    1021: "its disk is full",
    1114: "a table is full (the disk, or the tablespace's size limit)",
}


def connect(settings: MySQLSettings, **kwargs):
    """A follower session for the merge job.

    - ``time_zone = '+00:00'``: TIMESTAMP values travel as UTC wall clock (see encoding).
    - ``foreign_key_checks = 0``: the leader already enforced its foreign keys, and the merge
      replaces a row by delete + insert, which with checks on would cascade to (or be refused
      for) the row's children on the follower. The leader's own cascades are not in the binlog,
      so tables with ON DELETE/UPDATE CASCADE cannot be mirrored by binlog capture anyway.
    - ``NO_AUTO_VALUE_ON_ZERO``: rows carry their AUTO_INCREMENT values; an id of 0 must stay 0,
      not draw a new one."""
    try:
        conn = settings.connect(**kwargs)
    except pymysql.err.OperationalError as exc:
        raise MergeError(
            f"cannot connect to {settings.describe('follower')}: {exc.args[-1]}"
        ) from None
    with conn.cursor() as cur:
        cur.execute("SET SESSION time_zone = '+00:00', foreign_key_checks = 0, "
                    "sql_mode = CONCAT(@@SESSION.sql_mode, ',NO_AUTO_VALUE_ON_ZERO')")
    return conn


def unwritable(settings: MySQLSettings, exc: BaseException | None) -> FollowerUnwritableError | None:
    """The error to report when ``exc`` (or its cause) is the follower refusing every write: it
    names the server, the cause and the fix, instead of one statement's refusal."""
    for error in causes(exc):
        meaning = UNWRITABLE.get(server_error_code(error))
        if meaning is not None:
            return FollowerUnwritableError(
                f"{settings.describe('follower')} refuses writes: {meaning} ({describe(error)}). "
                "The segments committed before it stay, and the checkpoint says where the follower "
                "stands. Make the server writable (SET GLOBAL read_only = OFF; free disk space), or point "
                "the connection at the writable server, then clear the failed merge_batch task.")
    return None
