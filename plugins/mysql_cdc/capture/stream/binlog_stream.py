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
import logging
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
from ..events import NOT_READ, CaptureError, LeaderUnreachableError
from ..native import require_native

log = logging.getLogger(__name__)

FRAMINGS = ("native", "library")
_READ_BYTES = 1 << 20  # what one read of the socket asks for
# the stream's private settings its fetchone changes (a format description; a lost connection),
# looked up by name: a library upgrade that renames one fails loudly (_private_setting)
_POST_HEADER_LENGTHS = "_BinLogStreamReader__post_header_lengths"
_CONNECTED_STREAM = "_BinLogStreamReader__connected_stream"


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
            ignored_events=list(NOT_READ),  # (events.NOT_READ says why)
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
        """The library's events; with native framing, the first one of each connection (the
        dump's made-up rotate), then the framer's tuples."""
        while True:
            with self._read_errors():
                event = self.stream.fetchone()
            if event is None:
                return
            if isinstance(event, FormatDescriptionEvent) and event.packet.log_pos != 0:
                self.forget_table_ids()
            yield event
            if self.framing == "native" and not (yield from self._frames()):
                return
            # (native framing lost the connection: the library reconnects from the last event read)

    def _frames(self) -> Iterator[tuple]:
        """The rest of the dump, cut into events by the compiled framer; returns True when the
        connection was lost and the library is to reconnect. The framer reads the bytes PyMySQL's
        packet reader would read next (its buffer first), so the library never reads this
        connection again."""
        native = require_native()
        conn = self.stream._stream_connection
        frames = native.EventFrames(conn._next_seq_id)
        last = None  # the end of the last event read in the stream's file (None: as a rotate set it)
        while not frames.done:
            try:
                data = conn._rfile.read1(_READ_BYTES)
            except OSError as exc:
                return self._lost(conn, last, exc)
            if not data:
                return self._lost(conn, last, "the server closed it")
            try:
                events = frames.feed(data)
            except native.DecodeError as exc:
                raise CaptureError(f"reading the leader's binlog from {self.start}: the compiled framer cannot cut the "
                                   f"dump into events ({exc.args[-1]}); set `extract: {{decoder: python}}` to read it "
                                   "with mysql-replication, and report it") from None
            for frame in events:
                if frame[0] == BINLOG.ROTATE_EVENT:
                    last = None  # where the next file starts is the rotate's, set by library_event
                elif frame[2]:
                    last = frame[2]
                yield frame
        if frames.error is not None:
            with self._read_errors():
                pymysql.err.raise_mysql_exception(frames.error)
        conn._next_seq_id = frames.seq
        return False

    def _lost(self, conn, last: int | None, why) -> bool:
        """The dump's connection lost: reconnect from the last event read, as mysql-replication's
        own reading does (its fetchone reconnects when asked for the next event). A leader still
        away then fails the read (``_read_errors``); the task's retry reads the range again."""
        log.warning("the leader's binlog dump was lost after %s:%s (%s): reconnecting from there",
                    self.stream.log_file, last or self.stream.log_pos, why)
        if last is not None:
            self.stream.log_pos = last
        conn._force_close()
        _private_setting(self.stream, _CONNECTED_STREAM, False)
        return True

    def library_event(self, event_bytes: bytes):
        """The library's event object for one framed event, with the bookkeeping its own reading
        does (``fetchone``): a real rotate forgets the table maps, a file's format description
        sets the version and header lengths the next events are read with. None for an event the
        library drops (a table map whose id it has read, with ``freeze_schema``)."""
        event = self.inflater.parse(event_bytes)
        if event is None:
            return None
        code = event_bytes[4]
        if code == BINLOG.ROTATE_EVENT:
            # where a reconnection resumes (the stream's own log_pos and log_file, as fetchone keeps them)
            self.stream.log_pos, self.stream.log_file = event.position, event.next_binlog
            if event.timestamp != 0:
                self.stream.table_map = {}
        elif code == BINLOG.FORMAT_DESCRIPTION_EVENT:
            self.stream.mysql_version = event.mysql_version
            _private_setting(self.stream, _POST_HEADER_LENGTHS, event.post_header_len)
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
                # the server away (a restart, a failover) after a reconnection: the next try reads again
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


def _private_setting(stream, name: str, value) -> None:
    """Set one of the library stream's private settings its own reading keeps."""
    if not hasattr(stream, name):
        raise CaptureError(f"mysql-replication's BinLogStreamReader has no {name!r} any more: pin the version in "
                           "requirements.txt")
    setattr(stream, name, value)
