"""The leader's binlog as a stream of events, read from a position to its current end."""

from __future__ import annotations

import random
from typing import Iterator

import pymysql
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import FormatDescriptionEvent

from ...contracts import BinlogPosition
from ...mysql_server import MySQLSettings, connection_class
from .compressed import EventInflater
from ...retry_policy import TRANSIENT_SERVER_ERRORS, server_error_code
from ..events import CaptureError, LeaderUnreachableError

class BinlogReader:
    """Every event from ``start`` to the current end of the leader's binlog (non-blocking), and
    the inflater of the compressed events among them (it needs the stream's own settings)."""

    def __init__(self, settings: MySQLSettings, start: BinlogPosition, server_id: int | None = None):
        self.start = start
        self.settings = settings
        self.stream = BinLogStreamReader(
            connection_settings=settings.replication_settings(),
            pymysql_wrapper=connection_class(),
            # Two readers with one server_id kick each other off (error 4052): each read gets its own.
            server_id=server_id or random.randint(1 << 20, (1 << 31) - 1),
            log_file=start.file,
            log_pos=start.offset,
            resume_stream=True,
            blocking=False,
            # Every event, known or not: positions must advance over all of them, and an event
            # nobody handles must stop the extract (see BinlogCapture.dispatch), not vanish.
            only_events=None,
            filter_non_implemented_events=False,
            # With file+offset against MariaDB is_mariadb must stay off: on it the library ignores
            # log_file/log_pos. MariaDB GTID events still arrive.
            is_mariadb=False,
            enable_logging=False,
            # A table map is parsed once per table id: the server gives a table a new id whenever
            # its definition changes (ALTER, FLUSH TABLES: a new table share), so a map with a
            # known id is the same map again, and one-row transactions would otherwise spend
            # half their time re-parsing it. The library then drops the repeat before we see it;
            # BinlogCapture keeps what it read from the first.
            freeze_schema=True,
        )
        self.inflater = EventInflater(self.stream)

    def __enter__(self) -> "BinlogReader":
        return self

    def __exit__(self, *exc) -> None:
        self.stream.close()

    def __iter__(self) -> Iterator:
        while True:
            try:
                event = self.stream.fetchone()
            except pymysql.err.OperationalError as exc:
                tls = self.settings.tls_error(exc)
                if tls is not None:
                    raise tls from exc
                if server_error_code(exc) in TRANSIENT_SERVER_ERRORS:
                    # mysql-replication reconnects once by itself on a lost connection; this is
                    # the server still away then (a restart, a failover): the next try reads again
                    raise LeaderUnreachableError(
                        f"reading the leader's binlog from {self.start} failed: {exc.args[-1]}; "
                        f"{self.settings.describe('leader')} is unreachable (restarting?), the task's "
                        "retry reads the range again") from exc
                raise CaptureError(f"reading the leader's binlog from {self.start} failed: {exc.args[-1]}") from exc
            if event is None:
                return
            if isinstance(event, FormatDescriptionEvent) and event.packet.log_pos != 0:
                self.forget_table_ids()
            yield event

    def forget_table_ids(self) -> None:
        """Called at a binlog file's own format description (the first event of every file; the
        one a dump makes up when it starts inside a file has position 0): the file may have been
        written by a restarted server, and a table id means something only within one run of the
        server, which numbers its tables again from the start. The library forgets its table maps
        only at a rotate event with a timestamp, which a server that stopped (cleanly: a stop
        event; or not: nothing) never writes; with ``freeze_schema`` it would then keep the map
        of the table that had the id before the restart and decode another table's rows with it."""
        self.stream.table_map = {}
