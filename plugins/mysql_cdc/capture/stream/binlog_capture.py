"""Binlog events in, one change batch out: the decoding half of capture.

``BinlogCapture`` consumes mysql-replication events in binlog order and feeds what it finds to a
``ChangeBatchWriter`` (``change_batch``), which owns the segments and the manifest; a snapshot (a
copy of tables) is another source for the same writer. It tracks two things the library does not:
the exact (file, offset) after every event, and whether that offset is a transaction boundary.
Both ends of a range must be boundaries: a start or end that falls inside a transaction is
refused instead of split.

With the compiled framer (``binlog_stream``), the events every transaction repeats (GTIDs, a
``BEGIN``, a table map already read, rows of a table the compiled decoder reads, XID) are read from
their bytes by ``handle_frame``, through ``BinlogCapture._FRAME_HANDLERS``; every other event goes
to the library and then ``handle``, as all do with the library's framing.

Events are dispatched by class through ``BinlogCapture._HANDLERS``, and events mysql-replication
does not know (``NotImplementedEvent``) by type code through ``BinlogCapture._RAW_HANDLERS``; what is
in neither table and not on the list of events that carry nothing (``events``) stops the extract. A
compressed event (MariaDB ``log_bin_compress``, MySQL ``binlog_transaction_compression``) is inflated
(``compressed``) and its plain events go through the same dispatch, at the compressed event's span.
"""

from __future__ import annotations

import logging
import re
import struct
from dataclasses import dataclass

from pymysqlreplication.constants import BINLOG, NONE_SOURCE
from pymysqlreplication.event import (
    FormatDescriptionEvent,
    GtidEvent,
    MariadbGtidEvent,
    NotImplementedEvent,
    QueryEvent,
    RotateEvent,
    XidEvent,
)
from pymysqlreplication.row_event import (
    DeleteRowsEvent, PartialUpdateRowsEvent, TableMapEvent, UpdateRowsEvent, WriteRowsEvent,
)

from ...contracts import (
    BinlogPosition, ChangeBatch, TablePositions,
)
from ...contracts import change_row as cr
from ..change_batch import ChangeBatchWriter
from .compressed import (
    HEADER_SIZE, MARIADB_COMPRESSED, MYSQL_TRANSACTION_PAYLOAD, EventInflater, body_of,
)
from ...contracts.gtid_set import parse_gtid_set
from ..gtid import GtidDecodeError, tagged_gtid
from ..events import (
    ANONYMOUS_GTID_LOG_EVENT, CARRY_NOTHING, CARRY_NOTHING_CODES, GTID_TAGGED_LOG_EVENT, CaptureError, UnknownEventError,
    partial_image_error, unrepresentable_value_error,
)
from ..rows import JSON_NULL, JSON_NULL_SOURCE, event_rows
from .ddl import ParsedStatement, UnparseableDdl, parse_statement
from ..filters import TableFilter
from ..leader import PreflightError
from ..native import NativeTable, event_body, require_native
from ..types import column_type
from ..table_changes import RowsOrigin, TableChangeWriter, TableSpec

log = logging.getLogger(__name__)


class StopReading(Exception):
    """The range's end is reached: the reader stops (raised from inside the event dispatch)."""


_DML_VERBS = ("INSERT", "UPDATE", "DELETE", "REPLACE", "LOAD")
_NAME = r"(?:`(?:[^`]|``)+`|[A-Za-z0-9_$]+)"
# the table a single-table DML statement writes: INSERT/REPLACE [INTO], UPDATE, DELETE FROM, LOAD ... INTO TABLE
_DML_TARGET = re.compile(
    rf"^(?:INSERT|REPLACE)(?:\s+(?:LOW_PRIORITY|DELAYED|HIGH_PRIORITY|IGNORE))*\s+(?:INTO\s+)?(?P<a>{_NAME}(?:\.{_NAME})?)"
    rf"|^UPDATE(?:\s+(?:LOW_PRIORITY|IGNORE))*\s+(?P<b>{_NAME}(?:\.{_NAME})?)\s+SET\b"
    rf"|^DELETE(?:\s+(?:LOW_PRIORITY|QUICK|IGNORE))*\s+FROM\s+(?P<c>{_NAME}(?:\.{_NAME})?)\s*(?:WHERE\b|ORDER\b|LIMIT\b|$)"
    rf"|^LOAD\s+DATA\b.*?\bINTO\s+TABLE\s+(?P<d>{_NAME}(?:\.{_NAME})?)",
    re.IGNORECASE | re.DOTALL,
)


def _unquote(name: str) -> str:
    return name[1:-1].replace("``", "`") if name.startswith("`") else name


def dml_target(query: str, schema: str) -> tuple[str, str] | None:
    """(database, table) a single-table DML statement writes, or None when it cannot be told
    (a multi-table UPDATE or DELETE, INSERT … SELECT counts as its target)."""
    match = _DML_TARGET.match(query.strip())
    if not match:
        return None
    name = next(g for g in match.groups() if g)
    parts = re.findall(_NAME, name)
    if len(parts) == 2:
        return _unquote(parts[0]), _unquote(parts[1])
    return (schema, _unquote(parts[0])) if schema else None


# MariaDB GTID event flag: the transaction is one statement with no BEGIN/COMMIT around it.
_MARIADB_FL_STANDALONE = 0x01


@dataclass
class _Transaction:
    start: BinlogPosition
    gtid: str | None
    timestamp: int
    # False when statements may follow the first one: after BEGIN, or a MariaDB GTID without
    # FL_STANDALONE (CREATE TABLE … SELECT logs its CREATE, then rows, then XID).
    ends_with_statement: bool = True


class BinlogCapture:
    """One reader's events, in binlog order, into a ``ChangeBatchWriter``: row events to their
    tables' change files, DDL to segments of their own, positions and GTIDs tracked across
    transactions; ``finish`` commits the batch once the range's end is reached."""

    def __init__(self, writer: ChangeBatchWriter, table_filter: TableFilter, start_gtid: str | None = None,
                 inflater: EventInflater | None = None, positions: TablePositions = TablePositions(),
                 start_gtid_set: str | None = None, decoder: str = "native"):
        self.writer = writer
        # "native": rows of tables whose every column has a NativePlan are decoded by the
        # compiled decoder (native.py); "python": all by mysql-replication (the reference)
        self.decoder = decoder
        if decoder == "native":
            require_native()
        self.positions = positions
        self.inflater = inflater
        self.range = range_ = writer.range
        self.filter = table_filter
        self.start_gtid = start_gtid
        self.last_gtid = start_gtid
        # the leader's executed GTID set at the last boundary passed (None: not tracked)
        self.start_gtid_set = start_gtid_set
        self.executed = None if start_gtid_set is None else parse_gtid_set(writer.server_flavor, start_gtid_set)

        self.file = range_.start.file
        self._sequence_of = (None, 0)  # (file, its sequence number): the last file's, read once
        self.position = range_.start  # last transaction boundary passed
        self.end_time: int | None = None  # commit time of the last transaction passed
        self.txn: _Transaction | None = None
        self.first_event = True
        # rows events inside one compressed transaction share its position: their rows are
        # numbered on from the previous event's, so (file, position, row index) stays a total order
        self.rows_at: tuple[BinlogPosition | None, int] = (None, 0)
        self.tables: dict[int, TableSpec | None] = {}  # table id -> spec (None: not captured)
        self.native_tables: dict[int, NativeTable] = {}  # table id -> its map, as the compiled decoder reads it
        self.maps_seen: dict[bytes, tuple[TableSpec, NativeTable | None]] = {}  # table map bytes -> its reading

    # -- positions ----------------------------------------------------------------------------

    def _file_sequence(self) -> int:
        if self._sequence_of[0] != self.file:
            self._sequence_of = (self.file, BinlogPosition(self.file, 4).sequence)
        return self._sequence_of[1]

    def _span(self, event) -> tuple[BinlogPosition, BinlogPosition]:
        after = event.packet.log_pos
        return BinlogPosition(self.file, after - event.packet.event_size), BinlogPosition(self.file, after)

    @property
    def at_boundary(self) -> bool:
        return self.txn is None

    def done(self) -> bool:
        if self.txn is not None or self.position < self.range.end:
            return False
        if self.position != self.range.end:
            raise CaptureError(
                f"end position {self.range.end} is not a transaction boundary (the transaction "
                f"around it ends at {self.position}); end ranges on positions taken from "
                "SHOW MASTER STATUS, a checkpoint or a batch manifest"
            )
        return True

    # -- event handlers -------------------------------------------------------------------------

    def handle(self, event) -> None:
        if isinstance(event, RotateEvent):
            self._on_rotate(event)
            return
        if event.packet.log_pos == 0:
            return  # artificial event the server made up for this session (e.g. a format description)
        start, after = self._span(event)
        self.dispatch(event, start, after)

    def dispatch(self, event, start: BinlogPosition, after: BinlogPosition) -> None:
        """Handle one event that spans [start, after) of the binlog (a compressed event's inner
        events all span the compressed event)."""
        if self.first_event:
            self._check_starts_transaction(event, start)
        if isinstance(event, NotImplementedEvent):
            code = event.packet.event_type
            if code in CARRY_NOTHING_CODES:
                handler = BinlogCapture._on_other
            else:
                handler = self._RAW_HANDLERS.get(code)
            if handler is None:
                raise UnknownEventError(code, start, self.writer.server_flavor)
        else:
            handler = self._HANDLERS.get(type(event))
            if handler is None:
                if type(event) not in CARRY_NOTHING:
                    raise UnknownEventError(event.packet.event_type, start, self.writer.server_flavor)
                handler = BinlogCapture._on_other
        handler(self, event, start, after)

    # -- framed events (native framing: binlog_stream.BinlogReader) ----------------------------

    def handle_frame(self, code: int, timestamp: int, log_pos: int, size: int, event_bytes: bytes) -> bool:
        """Handle one event as the compiled framer cut it, when it is a kind every transaction
        repeats and the capture reads itself. False: the library must read it (``handle`` its
        event object), as every other kind, a range's first event and made-up events are."""
        handler = self._FRAME_HANDLERS.get(code)
        if handler is None or self.first_event or log_pos == 0:
            return False
        # (a handler makes the positions it needs: most events need one or none)
        return handler(self, code, timestamp, log_pos, size, event_bytes)

    def _frame_rows(self, code, timestamp, log_pos, size, event_bytes) -> bool:
        table_id = int.from_bytes(event_bytes[HEADER_SIZE:HEADER_SIZE + 6], "little")
        if table_id not in self.tables:
            return False  # the library's reading stops on it as it does
        spec = self.tables[table_id]
        if spec is None:
            return True  # not captured
        native = self.native_tables.get(table_id)
        if native is None:
            return False  # the reference decoder's table: the library reads its rows
        start, after = BinlogPosition(self.file, log_pos - size), BinlogPosition(self.file, log_pos)
        self._native_rows(spec, native, code, body_of(event_bytes, self.inflater.checksum), size, start, after)
        return True

    def _frame_table_map(self, code, timestamp, log_pos, size, event_bytes) -> bool:
        # with freeze_schema the library drops the map of a table id it has read (see BinlogReader)
        table_id = int.from_bytes(event_bytes[HEADER_SIZE:HEADER_SIZE + 6], "little")
        return table_id in self.inflater.stream.table_map

    def _frame_xid(self, code, timestamp, log_pos, size, event_bytes) -> bool:
        self._end_transaction(timestamp, BinlogPosition(self.file, log_pos))
        return True

    def _frame_mariadb_gtid(self, code, timestamp, log_pos, size, event_bytes) -> bool:
        # body: sequence number (8), domain id (4), flags (1); the server id is the header's
        seq_no, domain, flags = struct.unpack_from("<QIB", event_bytes, HEADER_SIZE)
        server_id = struct.unpack_from("<I", event_bytes, 5)[0]
        self.txn = _Transaction(start=BinlogPosition(self.file, log_pos - size), gtid=f"{domain}-{server_id}-{seq_no}",
                                timestamp=timestamp,
                                ends_with_statement=bool(flags & _MARIADB_FL_STANDALONE))
        return True

    def _frame_gtid(self, code, timestamp, log_pos, size, event_bytes) -> bool:
        # body: flags (1), source uuid (16), transaction number (8)
        sid = event_bytes[HEADER_SIZE + 1:HEADER_SIZE + 17].hex()
        gno = struct.unpack_from("<Q", event_bytes, HEADER_SIZE + 17)[0]
        gtid = f"{sid[:8]}-{sid[8:12]}-{sid[12:16]}-{sid[16:20]}-{sid[20:]}:{gno}"
        self.txn = _Transaction(start=BinlogPosition(self.file, log_pos - size), gtid=gtid, timestamp=timestamp)
        return True

    def _frame_query(self, code, timestamp, log_pos, size, event_bytes) -> bool:
        # only a BEGIN (MySQL's every transaction): post-header thread id (4), seconds (4),
        # database name length (1), error code (2), status variables length (2)
        body = body_of(event_bytes, self.inflater.checksum)
        db_len = body[8]
        status_len = int.from_bytes(body[11:13], "little")
        if body[13 + status_len + db_len + 1:] != b"BEGIN":
            return False
        self._begin_implicit(timestamp, BinlogPosition(self.file, log_pos - size)).ends_with_statement = False
        return True

    def _check_starts_transaction(self, event, start: BinlogPosition) -> None:
        self.first_event = False
        if isinstance(event, TableMapEvent):
            # Rows right after a DDL inside one transaction (CREATE TABLE … SELECT): the merge job
            # checkpoints after such a DDL, so a range may legitimately resume here.
            self.txn = _Transaction(start=start, gtid=None, timestamp=event.timestamp, ends_with_statement=False)
            return
        if isinstance(event, (WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent, XidEvent)):
            raise CaptureError(
                f"start position {self.range.start} is inside a transaction (a {type(event).__name__} "
                "comes first); start ranges on positions taken from SHOW MASTER STATUS, a checkpoint "
                "or a batch manifest"
            )

    def _on_rotate(self, event: RotateEvent) -> None:
        # The first Rotate the server sends is synthetic (timestamp 0) and only names the file.
        # A real one ends a file: the boundary after it equals the new file's start.
        if event.timestamp != 0 and self.at_boundary:
            self.position = BinlogPosition(self.file, event.packet.log_pos)
            if self.done():
                raise StopReading
        self.file = event.next_binlog
        if event.timestamp != 0 and self.at_boundary:
            self.position = BinlogPosition(self.file, 4)

    def _on_format_description(self, event, start, after) -> None:
        # A file's first event: the file may come from a restarted server, whose table ids
        # start again (BinlogReader.forget_table_ids), so no id read before it names a table now.
        self.tables.clear()
        self.native_tables.clear()
        self._on_other(event, start, after)

    def _on_other(self, event, start, after) -> None:
        # Format descriptions, GTID lists, checkpoints, annotations, heartbeats: no data. Outside
        # a transaction they still move the boundary forward.
        if self.at_boundary:
            self.position = after

    def _on_gtid(self, event, start, after) -> None:
        self.txn = _Transaction(start=start, gtid=event.gtid, timestamp=event.timestamp)

    def _on_anonymous_gtid(self, event, start, after) -> None:
        # MySQL with gtid_mode=OFF: begins a transaction like a GTID event, with no GTID; the
        # batch then records none rather than an older one
        self.txn = _Transaction(start=start, gtid=None, timestamp=event.timestamp)
        self.last_gtid = None

    def _on_tagged_gtid(self, event, start, after) -> None:
        # MySQL 8.3+ tagged GTID (uuid:tag:N), in a format the library does not decode (gtid.py)
        try:
            gtid = tagged_gtid(event_body(event, self._inflater(event).checksum))
        except GtidDecodeError as exc:
            raise CaptureError(f"at {start}: {exc}") from None
        self.txn = _Transaction(start=start, gtid=gtid, timestamp=event.timestamp)

    def _on_mariadb_compressed(self, event, start, after) -> None:
        self.dispatch(self._inflater(event).mariadb(event), start, after)

    def _on_transaction_payload(self, event, start, after) -> None:
        for inner in self._inflater(event).mysql_payload(event):
            if inner is not None:  # an event the wrapper itself filtered (none are, with only_events=None)
                self.dispatch(inner, start, after)

    def _inflater(self, event) -> EventInflater:
        if self.inflater is None:
            raise CaptureError(f"compressed binlog event at {self._span(event)[0]} but no stream to inflate it with")
        return self.inflater

    def _on_mariadb_gtid(self, event, start, after) -> None:
        standalone = bool(event.flags & _MARIADB_FL_STANDALONE)
        self.txn = _Transaction(start=start, gtid=event.gtid, timestamp=event.timestamp,
                                ends_with_statement=standalone)

    def _begin_implicit(self, timestamp: int, start) -> _Transaction:
        # MySQL without GTIDs (or anonymous GTIDs not decoded): BEGIN/DDL opens the transaction
        if self.txn is None:
            self.txn = _Transaction(start=start, gtid=None, timestamp=timestamp)
        return self.txn

    def _end_transaction(self, timestamp: int, after: BinlogPosition) -> None:
        # the event that ends a transaction carries its commit time (a GTID or BEGIN event only
        # when the transaction started); the batch's end_time is the last one
        self.end_time = timestamp
        if self.txn and self.txn.gtid:
            self.last_gtid = self.txn.gtid
            if self.executed is not None:
                self.executed.add(self.txn.gtid)
        self.txn = None
        self.position = after

    def _on_xid(self, event, start, after) -> None:
        self._end_transaction(event.timestamp, after)

    def _on_query(self, event: QueryEvent, start, after) -> None:
        query = event.query.strip() if isinstance(event.query, str) else event.query.decode("utf-8", "replace")
        schema = event.schema.decode() if isinstance(event.schema, bytes) else (event.schema or "")
        head = query.split(None, 1)[0].upper() if query else ""
        if head == "BEGIN":
            self._begin_implicit(event.timestamp, start).ends_with_statement = False
            return
        if head in ("COMMIT", "ROLLBACK"):
            self._end_transaction(event.timestamp, after)
            return
        if head in _DML_VERBS:
            target = dml_target(query, schema)
            if target is not None and self._settled(target, after):
                return  # a table not captured, or one whose copy (a resnapshot) is past this statement
            raise CaptureError(
                f"statement-format DML at {start} ({query[:120]!r}): some session wrote with "
                "binlog_format=STATEMENT or MIXED, whose changes cannot be captured as rows. "
                "Set binlog_format=ROW globally and stop sessions from overriding it, then re-copy the table "
                "it wrote with a resnapshot run (conf {\"resnapshot\": [\"db.table\"]}): statements before the "
                "copy's position are then skipped"
            )
        try:
            parsed = parse_statement(query, schema)
        except UnparseableDdl as exc:
            raise CaptureError(f"at {start}: {exc}") from None
        txn = self._begin_implicit(event.timestamp, start)
        if parsed.is_ddl and any(self.filter.captures(t) for t in parsed.targets):
            self._emit_ddl(parsed, query, schema, txn, after)
        # MySQL 8 logs an atomic CREATE TABLE … SELECT as "CREATE TABLE … START TRANSACTION" + rows
        if txn.ends_with_statement and not query.rstrip().upper().endswith("START TRANSACTION"):
            self._end_transaction(event.timestamp, after)  # DDL and account statements commit on their own

    def _on_table_map(self, event: TableMapEvent, start, after) -> None:
        if not self.filter.captures_table(event.schema, event.table):
            self.tables[event.table_id] = None
            return
        # Every transaction repeats its tables' maps, byte for byte while a table keeps its shape
        # and id: one reading per distinct map (its bytes hold the table id, names, types and
        # metadata, all a spec depends on) keeps one-row transactions from paying it each time.
        checksum = self._inflater(event).checksum
        raw = event_body(event, checksum)  # (the header and checksum differ per event)
        known = self.maps_seen.get(raw)
        if known is None:
            spec = self._table_spec(event)
            native = None
            if spec.decoder == "native":
                native = NativeTable(event, checksum, f"{spec.database}.{spec.table}")
            known = self.maps_seen[raw] = (spec, native)
        self.tables[event.table_id], native = known
        if native is None:
            self.native_tables.pop(event.table_id, None)
        else:
            self.native_tables[event.table_id] = native

    def _table_spec(self, event: TableMapEvent) -> TableSpec:
        qualified = f"{event.schema}.{event.table}"
        columns = event.columns
        if any(c.name is None for c in columns):
            raise PreflightError(
                f"the binlog carries no column names for {qualified}: set binlog_row_metadata=FULL "
                "on the leader (rows written before that cannot be captured)"
            )
        meta = event.optional_metadata
        key_idx = list(meta.simple_primary_key_list or []) or sorted((meta.primary_keys_with_prefix or {}).keys())
        nullable = tuple(bool(event.null_bitmask[i // 8] & (1 << (i % 8))) for i in range(len(columns)))
        types = tuple(column_type(c, qualified) for c in columns)
        native = self.decoder == "native" and all(t.native is not None for t in types)
        return TableSpec(
            database=event.schema,
            table=event.table,
            names=tuple(c.name for c in columns),
            types=types,
            nullable=nullable,
            key_columns=tuple(columns[i].name for i in key_idx),
            decoder="native" if native else "python",
        )

    def _settled(self, table: tuple[str, str], after: BinlogPosition) -> bool:
        """Nothing of the table at this event is ours to capture: it is not captured, or a copy of
        it (a snapshot at or after this event's end) already holds the event's effect."""
        return not self.filter.captures_table(*table) or self._copy_holds(*table, after)

    def _copy_holds(self, database: str, table: str, after: BinlogPosition) -> bool:
        """A copy of the table (a snapshot at or after this event's end) holds the event's effect."""
        copied = self.positions.copied_at(database, table)
        return copied is not None and after <= copied

    def _on_partial_rows(self, event, start, after) -> None:
        # binlog_row_value_options=PARTIAL_JSON: the update carries only the changed parts of JSON
        # documents, not the rows. Refused, unless the table is not ours or its copy (the
        # resnapshot the error asks for) is past it.
        spec = self.tables.get(event.table_id)
        if spec is not None and not self._settled((spec.database, spec.table), after):
            raise UnknownEventError(event.packet.event_type, start, self.writer.server_flavor)

    def _on_rows(self, event, start, after) -> None:
        spec = self.tables.get(event.table_id)
        if spec is None:
            return  # not captured (or its table map was filtered)
        native = self.native_tables.get(event.table_id)
        if native is not None:
            body = event_body(event, self._inflater(event).checksum)
            self._native_rows(spec, native, event.packet.event_type, body, event.packet.event_size, start, after)
            return
        if self._copy_holds(spec.database, spec.table, after):
            return  # its copy holds these rows (even ones a partial row image could not carry)
        writer, origin = self._rows_origin(spec, start, event.packet.event_size)
        op, rows, befores = self._ROW_READERS[type(event)](self, event, spec)
        writer.add_event(op, rows, befores, origin)
        self.rows_at = (start, origin.first_index + len(rows))

    def _native_rows(self, spec: TableSpec, native: NativeTable, code: int, body: bytes, event_size: int,
                     start: BinlogPosition, after: BinlogPosition) -> None:
        """A rows event of a table the compiled decoder reads: its body (no header, no checksum)."""
        if self._copy_holds(spec.database, spec.table, after):
            return
        writer, origin = self._rows_origin(spec, start, event_size)
        n = writer.add_native_event(native, code, body, self._ROWS_OPS[code], origin)
        self.rows_at = (start, origin.first_index + n)

    def _rows_origin(self, spec: TableSpec, start: BinlogPosition, event_size: int) -> tuple[TableChangeWriter, RowsOrigin]:
        if self.txn is None:
            raise CaptureError(f"rows event at {start} outside any transaction")
        writer = self._writer_for(spec, start)
        at, first_index = self.rows_at
        first_index = first_index if at == start else 0
        return writer, RowsOrigin(self.file, self._file_sequence(), start.offset, self.txn.timestamp, self.txn.gtid,
                                  str(self.txn.start), event_size, first_index)

    def _read_write_rows(self, event, spec):
        return cr.INSERT, [self._row(r["values"], r["none_sources"], spec) for r in event_rows(event)], None

    def _read_delete_rows(self, event, spec):
        return cr.DELETE, [self._row(r["values"], r["none_sources"], spec) for r in event_rows(event)], None

    def _read_update_rows(self, event, spec):
        rows = event_rows(event)
        after = [self._row(r["after_values"], r["after_none_sources"], spec) for r in rows]
        before = [self._row(r["before_values"], r["before_none_sources"], spec) for r in rows]
        return cr.UPDATE, after, before

    # rows event type codes (v1: MariaDB, v2: MySQL) -> the change they carry
    _ROWS_OPS = {
        BINLOG.WRITE_ROWS_EVENT_V1: cr.INSERT, BINLOG.WRITE_ROWS_EVENT_V2: cr.INSERT,
        BINLOG.UPDATE_ROWS_EVENT_V1: cr.UPDATE, BINLOG.UPDATE_ROWS_EVENT_V2: cr.UPDATE,
        BINLOG.DELETE_ROWS_EVENT_V1: cr.DELETE, BINLOG.DELETE_ROWS_EVENT_V2: cr.DELETE,
    }

    _ROW_READERS = {
        WriteRowsEvent: _read_write_rows,
        DeleteRowsEvent: _read_delete_rows,
        UpdateRowsEvent: _read_update_rows,
    }

    def _row(self, values: dict, none_sources: dict, spec: TableSpec) -> tuple:
        row = tuple(values.values())
        # A None that is not SQL NULL is something the library could not represent: an empty SET
        # or the JSON document null (we restore them), a column missing from a partial row image
        # or a zero date (we refuse: writing NULL would silently change data).
        if none_sources and any(s != NONE_SOURCE.NULL for s in none_sources.values()):
            fixed = list(row)
            for i, name in enumerate(spec.names):
                source = none_sources.get(name)
                if source == NONE_SOURCE.EMPTY_SET:
                    fixed[i] = set()
                elif source == JSON_NULL_SOURCE:
                    fixed[i] = JSON_NULL
                elif source == NONE_SOURCE.COLS_BITMAP:
                    raise partial_image_error(f"{spec.database}.{spec.table}", name)
                elif source not in (None, NONE_SOURCE.NULL):
                    raise unrepresentable_value_error(f"{spec.database}.{spec.table}", name, source)
            row = tuple(fixed)
        return row

    def _writer_for(self, spec: TableSpec, start: BinlogPosition) -> TableChangeWriter:
        writer = self.writer.table_writer(spec)
        # (a table whose decoder changed without a DDL: its character set did, in the same way)
        if writer.spec is not spec and (writer.spec.signature != spec.signature or writer.spec.decoder != spec.decoder):
            raise CaptureError(
                f"{spec.database}.{spec.table} changed shape at {start} without a DDL statement in "
                "the binlog (was it altered with binlog disabled?); re-copy it with a resnapshot run "
                f"(conf {{\"resnapshot\": [\"{spec.database}.{spec.table}\"]}})"
            )
        return writer

    # -- segments -------------------------------------------------------------------------------

    def _emit_ddl(self, parsed: ParsedStatement, query: str, schema: str, txn: _Transaction,
                  after: BinlogPosition) -> None:
        before = after_ddl = None
        if self.executed is not None:
            before = str(self.executed)
            with_ddl = parse_gtid_set(self.writer.server_flavor, before)
            if txn.gtid:
                with_ddl.add(txn.gtid)
            after_ddl = str(with_ddl)
        self.writer.add_ddl(txn.start, after, schema, query, parsed.action, parsed.targets, txn.gtid, before,
                            after_ddl)

    def finish(self) -> ChangeBatch:
        end_set = str(self.executed) if self.executed is not None else None
        return self.writer.commit(self.position, self.start_gtid, self.last_gtid, self.start_gtid_set, end_set,
                                  self.end_time)

    _HANDLERS = {
        FormatDescriptionEvent: _on_format_description,
        MariadbGtidEvent: _on_mariadb_gtid,
        GtidEvent: _on_gtid,
        QueryEvent: _on_query,
        XidEvent: _on_xid,
        TableMapEvent: _on_table_map,
        WriteRowsEvent: _on_rows,
        UpdateRowsEvent: _on_rows,
        DeleteRowsEvent: _on_rows,
        PartialUpdateRowsEvent: _on_partial_rows,
    }
    # framed events the capture reads itself, by type code (handle_frame)
    _FRAME_HANDLERS = {
        **dict.fromkeys(_ROWS_OPS, _frame_rows),
        BINLOG.TABLE_MAP_EVENT: _frame_table_map,
        BINLOG.XID_EVENT: _frame_xid,
        BINLOG.MARIADB_GTID_EVENT: _frame_mariadb_gtid,
        BINLOG.GTID_LOG_EVENT: _frame_gtid,
        BINLOG.QUERY_EVENT: _frame_query,
    }
    # events mysql-replication does not decode, by type code
    _RAW_HANDLERS = {
        **dict.fromkeys(MARIADB_COMPRESSED, _on_mariadb_compressed),
        MYSQL_TRANSACTION_PAYLOAD: _on_transaction_payload,
        ANONYMOUS_GTID_LOG_EVENT: _on_anonymous_gtid,
        GTID_TAGGED_LOG_EVENT: _on_tagged_gtid,
    }
