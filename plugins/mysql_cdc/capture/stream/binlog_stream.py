"""The leader's binlog as a stream of events, read from a position to its current end.

mysql-replication is the connection: it registers as a replica, asks for the dump and reads the
first event. Who frames the rest is the reader's ``framing``:

- ``library``: mysql-replication reads every event (PyMySQL's packet reader, the library's event
  classes). The reference.
- ``native``: the compiled framer (``native/src/event_frames.rs``) cuts the connection's bytes into
  events, handed over as ``(type, timestamp, log_pos, size, event bytes)``. The capture reads the
  few kinds every transaction repeats itself (``BinlogCapture.handle_frame``) and asks
  ``library_event`` for the library's reading of any other.
"""

from __future__ import annotations

import contextlib
import random
from typing import Iterator

import pymysql
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.constants import BINLOG
from pymysqlreplication.event import FormatDescriptionEvent

from ...contracts import BinlogPosition
from ...mysql_server import MySQLSettings, connection_class
from .compressed import EventInflater
from ...retry_policy import TRANSIENT_SERVER_ERRORS, server_error_code
from ..events import CaptureError, LeaderUnreachableError
from ..native import require_native

FRAMINGS = ("native", "library")
_READ_BYTES = 1 << 20  # what one read of the socket asks for
_LOST = "Lost connection to MySQL server during the binlog dump"
# the stream's private setting a format description changes (as fetchone does), looked up by name
_POST_HEADER_LENGTHS = "_BinLogStreamReader__post_header_lengths"


class BinlogReader:
    """Every event from ``start`` to the current end of the leader's binlog (non-blocking), and
    the inflater of the compressed events among them (it needs the stream's own settings)."""

    def __init__(self, settings: MySQLSettings, start: BinlogPosition, server_id: int | None = None,
                 framing: str = "library"):
        if framing not in FRAMINGS:
            raise ValueError(f"framing must be one of {FRAMINGS}, got {framing!r}")
        if framing == "native":
            require_native()
        self.start = start
        self.settings = settings
        self.framing = framing
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
        """The library's events; with native framing, only the first (the dump's made-up rotate),
        then the framer's tuples."""
        while True:
            with self._read_errors():
                event = self.stream.fetchone()
            if event is None:
                return
            if isinstance(event, FormatDescriptionEvent) and event.packet.log_pos != 0:
                self.forget_table_ids()
            yield event
            if self.framing == "native":
                yield from self._frames()
                return

    def _frames(self) -> Iterator[tuple]:
        """The rest of the dump, cut into events by the compiled framer. It reads the bytes
        PyMySQL's packet reader would read next (its buffer first), so the library must not read
        this connection again: a lost connection ends the read (the task's retry reads the range
        again) where the library would have reconnected by itself."""
        native = require_native()
        conn = self.stream._stream_connection
        frames = native.EventFrames(conn._next_seq_id)
        while not frames.done:
            with self._read_errors():
                try:
                    data = conn._rfile.read1(_READ_BYTES)
                except OSError as exc:  # as PyMySQL reports a failed read
                    raise pymysql.err.OperationalError(2013, f"{_LOST} ({exc})") from exc
                if not data:
                    raise pymysql.err.OperationalError(2013, _LOST)
                try:
                    events = frames.feed(data)
                except native.DecodeError as exc:
                    raise CaptureError(f"reading the leader's binlog from {self.start}: the compiled framer cannot cut the "
                                       f"dump into events ({exc.args[-1]}); set `extract: {{decoder: python}}` to read it "
                                       "with mysql-replication, and report it") from None
            yield from events
        if frames.error is not None:
            with self._read_errors():
                pymysql.err.raise_mysql_exception(frames.error)
        conn._next_seq_id = frames.seq

    def library_event(self, event_bytes: bytes):
        """The library's event object for one framed event, with the bookkeeping its own reading
        does (``fetchone``): a real rotate forgets the table maps, a file's format description
        sets the version and header lengths the next events are read with. None for an event the
        library drops (a table map whose id it has read, with ``freeze_schema``)."""
        event = self.inflater.parse(event_bytes)
        if event is None:
            return None
        code = event_bytes[4]
        if code == BINLOG.ROTATE_EVENT and event.timestamp != 0:
            self.stream.table_map = {}
        elif code == BINLOG.FORMAT_DESCRIPTION_EVENT:
            if not hasattr(self.stream, _POST_HEADER_LENGTHS):
                raise CaptureError("mysql-replication's BinLogStreamReader keeps its header lengths under another "
                                   "name: pin the version in requirements.txt")
            self.stream.mysql_version = event.mysql_version
            setattr(self.stream, _POST_HEADER_LENGTHS, event.post_header_len)
            if event.packet.log_pos != 0:
                self.forget_table_ids()
        return event

    @contextlib.contextmanager
    def _read_errors(self):
        """A failed read of the binlog, as the error capture raises for it."""
        try:
            yield
        except pymysql.err.OperationalError as exc:
            tls = self.settings.tls_error(exc)
            if tls is not None:
                raise tls from exc
            if server_error_code(exc) in TRANSIENT_SERVER_ERRORS:
                # the server away (a restart, a failover; with library framing, still away after
                # the library's own reconnect): the next try reads again
                raise LeaderUnreachableError(
                    f"reading the leader's binlog from {self.start} failed: {exc.args[-1]}; "
                    f"{self.settings.describe('leader')} is unreachable (restarting?), the task's "
                    "retry reads the range again") from exc
            raise CaptureError(f"reading the leader's binlog from {self.start} failed: {exc.args[-1]}") from exc

    def forget_table_ids(self) -> None:
        """Called at a binlog file's own format description (the first event of every file; the
        one a dump makes up when it starts inside a file has position 0): the file may have been
        written by a restarted server, and a table id means something only within one run of the
        server, which numbers its tables again from the start. The library forgets its table maps
        only at a rotate event with a timestamp, which a server that stopped (cleanly: a stop
        event; or not: nothing) never writes; with ``freeze_schema`` it would then keep the map
        of the table that had the id before the restart and decode another table's rows with it."""
        self.stream.table_map = {}
