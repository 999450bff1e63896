"""The leader's binlog as a stream of events, read from a position to its current end."""

from __future__ import annotations

import random
from typing import Iterator

import pymysql
from pymysqlreplication import BinLogStreamReader

from ...contracts import BinlogPosition
from ...mysql_server import MySQLSettings
from .compressed import EventInflater
from ..events import CaptureError

class BinlogReader:
    """Every event from ``start`` to the current end of the leader's binlog (non-blocking), and
    the inflater of the compressed events among them (it needs the stream's own settings)."""

    def __init__(self, settings: MySQLSettings, start: BinlogPosition, server_id: int | None = None):
        self.start = start
        self.settings = settings
        self.stream = BinLogStreamReader(
            connection_settings=settings.replication_settings(),
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
                raise self.settings.tls_error(exc) or CaptureError(
                    f"reading the leader's binlog from {self.start} failed: {exc.args[-1]}") from exc
            if event is None:
                return
            yield event
