"""The closed world of binlog events: every event type is handled, known to carry nothing for a
change batch, or refused.

mysql-replication turns event types it does not know into ``NotImplementedEvent`` and moves on;
a compressed binlog once became a batch of 0 rows that way, with no error. So the capture never
relies on the library to say that something was skipped: ``BinlogCapture`` dispatches the events it
handles, lets through only the ones listed here as carrying nothing, and stops on anything else
with ``UnknownEventError``, which names the event type, its position, the server setting that
produces it and what to do.
"""

from __future__ import annotations

from pymysqlreplication.constants import BINLOG
from pymysqlreplication.event import (
    FormatDescriptionEvent,
    HeartbeatLogEvent,
    IntvarEvent,
    MariadbAnnotateRowsEvent,
    MariadbBinLogCheckPointEvent,
    MariadbGtidListEvent,
    MariadbStartEncryptionEvent,
    PreviousGtidsEvent,
    RandEvent,
    RowsQueryLogEvent,
    StopEvent,
    UserVarEvent,
)
from ..errors import PermanentError

# Event classes that carry no row, no DDL and no transaction boundary of their own: the format
# description and GTID bookkeeping, heartbeats, the SQL text beside row events (annotations), the
# server stopping, and the context of statements (INTVAR/RAND/USER_VAR precede a statement, which
# is judged by the query handler: a DDL is replayed, statement-format DML is refused).
CARRY_NOTHING = frozenset({
    FormatDescriptionEvent,
    MariadbGtidListEvent,
    MariadbBinLogCheckPointEvent,
    MariadbAnnotateRowsEvent,
    MariadbStartEncryptionEvent,  # the server decrypts before sending: what follows is plain
    RowsQueryLogEvent,
    HeartbeatLogEvent,
    StopEvent,
    IntvarEvent,
    RandEvent,
    UserVarEvent,
})

# Event classes the reader asks the library not to read at all (``BinLogStreamReader``'s
# ``ignored_events``: it steps over them by their header's length). MySQL's Previous_gtids (the
# GTID set a binlog file starts with) carries nothing for a batch, and the library reads only its
# pre-8.3 layout: one that holds a tagged GTID (uuid:tag:N) breaks its reading mid-event. What
# needs a file's starting set reads the server's own rendering of it (SHOW BINLOG EVENTS:
# ``gtid.FILE_START_SETS``).
NOT_READ = (PreviousGtidsEvent,)

IGNORABLE_LOG_EVENT = BINLOG.IGNORABLE_LOG_EVENT  # MySQL: "may be ignored by a replica", by definition
HEARTBEAT_LOG_EVENT_V2 = 0x29
# Type codes that reach us as NotImplementedEvent and carry nothing.
CARRY_NOTHING_CODES = frozenset({IGNORABLE_LOG_EVENT, HEARTBEAT_LOG_EVENT_V2})

ANONYMOUS_GTID_LOG_EVENT = BINLOG.ANONYMOUS_GTID_LOG_EVENT  # MySQL with gtid_mode=OFF: begins a transaction
GTID_TAGGED_LOG_EVENT = 0x2A  # MySQL 8.3+: a transaction with a tagged GTID (uuid:tag:N)

_NAMES = {value: name for name, value in vars(BINLOG).items() if name.isupper() and isinstance(value, int)
          and not name.startswith(("INTVAR_", "BINLOG_CHECKSUM"))}
_NAMES.update({
    0x28: "TRANSACTION_PAYLOAD_EVENT", 0x29: "HEARTBEAT_LOG_EVENT_V2", 0x2A: "GTID_TAGGED_LOG_EVENT",
    0xA5: "QUERY_COMPRESSED_EVENT", 0xA6: "WRITE_ROWS_COMPRESSED_EVENT_V1",
    0xA7: "UPDATE_ROWS_COMPRESSED_EVENT_V1", 0xA8: "DELETE_ROWS_COMPRESSED_EVENT_V1",
    0xA9: "WRITE_ROWS_COMPRESSED_EVENT", 0xAA: "UPDATE_ROWS_COMPRESSED_EVENT", 0xAB: "DELETE_ROWS_COMPRESSED_EVENT",
})

# what produces an event type the capture refuses, and what to do about it
_CAUSES = {
    BINLOG.PARTIAL_UPDATE_ROWS_EVENT: (
        "a session wrote with binlog_row_value_options=PARTIAL_JSON, whose updates carry only the "
        "changed parts of JSON documents, not the rows",
        "set binlog_row_value_options='' globally and in every session (mysql-cdc's preflight refuses "
        "PARTIAL_JSON), then re-copy the tables those updates touched with a resnapshot run",
    ),
    BINLOG.XA_PREPARE_EVENT: (
        "an XA transaction (XA START … XA END; XA PREPARE) was written to the binlog",
        "mysql-cdc does not capture XA transactions: their rows become visible at XA COMMIT, in a later "
        "part of the binlog. Exclude the tables XA transactions write to, or stop using XA on the leader",
    ),
    BINLOG.BEGIN_LOAD_QUERY_EVENT: (
        "LOAD DATA was logged as a statement (a session with binlog_format=STATEMENT or MIXED)",
        "set binlog_format=ROW globally and stop sessions from overriding it, then re-copy the loaded "
        "table with a resnapshot run",
    ),
    BINLOG.EXECUTE_LOAD_QUERY_EVENT: (
        "LOAD DATA was logged as a statement (a session with binlog_format=STATEMENT or MIXED)",
        "set binlog_format=ROW globally and stop sessions from overriding it, then re-copy the loaded "
        "table with a resnapshot run",
    ),
}


def event_type_name(code: int) -> str:
    return _NAMES.get(code, "an event type mysql-cdc has never seen")


class CaptureError(RuntimeError, PermanentError):
    """The binlog cannot be turned into a correct batch; the message names where and why."""


class LeaderUnreachableError(RuntimeError):
    """The leader's connection was lost or refused in the middle of a read (a restart, a failover, the
    network): not permanent, the task's retry reads the range again from the checkpoint."""


class SnapshotError(RuntimeError, PermanentError):
    """A snapshot copy cannot be made; the message says why and what to do."""


def zero_date_error(column: str, value: str) -> SnapshotError:
    """A copied value no date can represent (both decoders of a copy say it in these words)."""
    return SnapshotError(
        f"column {column}: value {value!r} is not a date (a zero date); fix the value on the leader or "
        "exclude the table"
    )


# Row values neither decoder may write as NULL; both raise these same errors (extract, native).

def partial_image_error(table: str, column: str) -> CaptureError:
    return CaptureError(
        f"{table}: a row image without column {column!r}: a session wrote with binlog_row_image=MINIMAL or "
        "NOBLOB, whose rows do not say what the column holds. Set binlog_row_image=FULL globally and in every "
        "session"
    )


def unrepresentable_value_error(table: str, column: str, what: str) -> CaptureError:
    return CaptureError(
        f"{table}.{column}: a value the binlog reader cannot represent ({what}, e.g. a zero date '0000-00-00'); "
        "fix the value on the leader, enable NO_ZERO_DATE, or exclude the table"
    )


class UnknownEventError(RuntimeError, PermanentError):
    """An event the capture does not understand: reading past it could lose changes."""

    def __init__(self, code: int, position, server: str):
        cause, fix = _CAUSES.get(code, (
            f"the {server} leader wrote an event of a kind this version of mysql-cdc does not know",
            "upgrade mysql-cdc, or report the event type and the server version; nothing was written for "
            "this range",
        ))
        super().__init__(
            f"binlog event {event_type_name(code)} (type {code}) at {position}: {cause}. Reading past it could "
            f"lose changes, so the extract stops here. To go on: {fix}"
        )
        self.code = code
