"""Follower sessions: one place that opens them, so every session gets the same settings."""

from __future__ import annotations

import pymysql

from ....mysql_server import MySQLSettings
from ....merge.errors import MergeError


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
