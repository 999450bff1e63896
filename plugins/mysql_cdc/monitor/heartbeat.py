"""The heartbeat: one row per pipeline on the leader, rewritten at the start of every run.

An idle leader writes no binlog, so the commit time of the last transaction a follower applied
stops moving and ``seconds_behind`` can no longer tell a stalled pipeline from a quiet leader.
With ``heartbeat: true`` each run commits a row on the leader first; the run then carries that
transaction like any other (its commit time becomes the batch's ``end_time``), so the figures
always measure the whole path, leader to follower.

The row lives in the leader's ``_mysql_cdc`` schema, which capture never copies (a system schema
to ``capture.filters``): it moves the binlog, not the follower's tables. A batch holding only
heartbeats moves the checkpoint without starting Spark. The leader's account needs CREATE,
INSERT and UPDATE on ``_mysql_cdc.*`` (docs in the README).
"""

from __future__ import annotations

from ..contracts import RESERVED_SCHEMA
from ..mysql_server import MySQLSettings

HEARTBEAT_TABLE = f"`{RESERVED_SCHEMA}`.`heartbeat`"


def write_heartbeat(leader: MySQLSettings, pipeline: str) -> None:
    import pymysql

    try:
        conn = leader.connect()
    except pymysql.err.OperationalError as exc:
        raise ConnectionError(f"cannot connect to {leader.describe('leader')}: {exc.args[-1]}") from None
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE IF NOT EXISTS `{RESERVED_SCHEMA}`")
            cur.execute(f"CREATE TABLE IF NOT EXISTS {HEARTBEAT_TABLE} (pipeline VARCHAR(190) NOT NULL PRIMARY KEY, "
                        "beat_at DATETIME(6) NOT NULL) ENGINE=InnoDB")
            cur.execute(f"INSERT INTO {HEARTBEAT_TABLE} (pipeline, beat_at) VALUES (%s, UTC_TIMESTAMP(6)) "
                        "ON DUPLICATE KEY UPDATE beat_at = VALUES(beat_at)", (pipeline,))
    except pymysql.err.OperationalError as exc:
        raise PermissionError(
            f"the heartbeat of pipeline {pipeline!r} could not be written on {leader.describe('leader')}: "
            f"{exc.args[-1]}; grant the account CREATE, INSERT and UPDATE on {RESERVED_SCHEMA}.*, or set heartbeat: false"
        ) from None
    finally:
        conn.close()
