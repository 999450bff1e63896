"""Compressed binlog events, inflated into the plain events mysql-replication decodes.

mysql-replication knows neither kind and hands them over as ``NotImplementedEvent``; skipping them
would drop every change they hold. Both formats keep the plain event inside:

- **MariaDB** (``log_bin_compress=ON``): ``QUERY_COMPRESSED_EVENT`` and the ``*_ROWS_COMPRESSED_EVENT``
  types are a query or rows event whose query text, or rows data, is one compressed block:
  a header byte (``0x80 | n``, algorithm 0 = zlib in bits 4-6), the uncompressed length in ``n``
  big-endian bytes, then a zlib stream. Everything before the block (post-header, status
  variables, column count and bitmaps) is as in the plain event. Inflating rebuilds the plain
  event: its type, its size, the block decompressed, a new CRC32.
- **MySQL** (``binlog_transaction_compression=ON``, 8.0.20+): one ``TRANSACTION_PAYLOAD_EVENT``
  holds a whole transaction's events (BEGIN, table maps, rows, XID) as a zstd frame, behind a few
  header fields (type, length, value; packed integers) ended by field 0. The inner events have
  their common header and no checksum.

Inflated events are parsed by the library's own ``BinLogPacketWrapper``, with the settings of the
stream that read the compressed one (its table map, its checksum setting, the format description
it saw), so they decode exactly like events that were never compressed.
"""

from __future__ import annotations

import struct
import zlib
from typing import Iterator

from pymysql.protocol import MysqlPacket
from pymysqlreplication.constants import BINLOG
from pymysqlreplication.packet import BinLogPacketWrapper
from ...errors import PermanentError

HEADER_SIZE = 19
CHECKSUM_SIZE = 4

MARIADB_QUERY_COMPRESSED = 0xA5
# compressed type -> (plain type, is an update: two column bitmaps)
_MARIADB_ROWS = {
    0xA6: (BINLOG.WRITE_ROWS_EVENT_V1, False),
    0xA7: (BINLOG.UPDATE_ROWS_EVENT_V1, True),
    0xA8: (BINLOG.DELETE_ROWS_EVENT_V1, False),
    0xA9: (BINLOG.WRITE_ROWS_EVENT_V2, False),
    0xAA: (BINLOG.UPDATE_ROWS_EVENT_V2, True),
    0xAB: (BINLOG.DELETE_ROWS_EVENT_V2, False),
}
MARIADB_COMPRESSED = frozenset({MARIADB_QUERY_COMPRESSED, *_MARIADB_ROWS})
MYSQL_TRANSACTION_PAYLOAD = 0x28

# TRANSACTION_PAYLOAD_EVENT header fields (MySQL's Transaction_payload_event)
_PAYLOAD_END, _PAYLOAD_SIZE, _PAYLOAD_COMPRESSION, _PAYLOAD_UNCOMPRESSED_SIZE = 0, 1, 2, 3
_COMPRESSION_ZSTD, _COMPRESSION_NONE = 0, 255

# The stream's private settings BinLogPacketWrapper needs, in its argument order (as fetchone
# passes them). Looked up by name: a library upgrade that renames one fails here, loudly.
_WRAPPER_SETTINGS = (
    "use_checksum", "allowed_events_in_packet", "only_tables", "ignored_tables", "only_schemas",
    "ignored_schemas", "freeze_schema", "ignore_decode_errors", "verify_checksum", "optional_meta_data",
    "enable_logging", "use_column_name_cache", "post_header_lengths",
)


class CompressedEventError(ValueError, PermanentError):
    """A compressed event this module cannot inflate."""


def raw_event(event) -> bytes:
    """The whole event as the server sent it (header, body, checksum), from its packet."""
    data = event.packet.packet.get_all_data()
    return bytes(data[1:])  # the first byte is the protocol's OK marker


def body_of(raw: bytes, checksum: bool) -> bytes:
    """An event's body: its bytes (``raw_event``, or as framed) without the header and checksum."""
    return raw[HEADER_SIZE:len(raw) - (CHECKSUM_SIZE if checksum else 0)]


def _packed_int(data: bytes, at: int) -> tuple[int, int]:
    """MySQL's length-encoded integer at ``at``: (value, next offset)."""
    first = data[at]
    if first < 251:
        return first, at + 1
    width = {252: 2, 253: 3, 254: 8}.get(first)
    if width is None:
        raise CompressedEventError(f"bad packed integer prefix {first:#x}")
    return int.from_bytes(data[at + 1:at + 1 + width], "little"), at + 1 + width


def _inflate_block(block: bytes) -> bytes:
    head = block[0]
    if not head & 0x80 or (head >> 4) & 0x07 != 0:
        raise CompressedEventError(f"compression header {head:#04x}: not a zlib block")
    lenlen = head & 0x07
    length = int.from_bytes(block[1:1 + lenlen], "big")
    data = zlib.decompress(block[1 + lenlen:])
    if len(data) != length:
        raise CompressedEventError(f"the block inflates to {len(data)} bytes, its header says {length}")
    return data


def _event_bytes(header: bytes, event_type: int, body: bytes, checksum: bool) -> bytes:
    size = HEADER_SIZE + len(body) + (CHECKSUM_SIZE if checksum else 0)
    # header: timestamp(4) type(1) server_id(4) event_size(4) log_pos(4) flags(2)
    new_header = header[:4] + bytes([event_type]) + header[5:9] + struct.pack("<I", size) + header[13:19]
    event = new_header + body
    return event + struct.pack("<I", zlib.crc32(event)) if checksum else event


class EventInflater:
    """Inflates compressed events read by ``stream`` (a BinLogStreamReader)."""

    def __init__(self, stream):
        self.stream = stream

    def _settings(self) -> list:
        values = []
        for name in _WRAPPER_SETTINGS:
            key = f"_BinLogStreamReader__{name}"
            if not hasattr(self.stream, key):
                raise CompressedEventError(
                    f"mysql-replication's BinLogStreamReader has no {name!r} setting any more: "
                    "compressed events cannot be decoded with this version; pin the version in requirements.txt"
                )
            values.append(getattr(self.stream, key))
        return values

    @property
    def checksum(self) -> bool:
        return bool(self.stream._BinLogStreamReader__use_checksum)

    def parse(self, event_bytes: bytes):
        """A plain event's bytes -> the library's event object (table maps recorded as it does)."""
        stream = self.stream
        wrapper = BinLogPacketWrapper(
            MysqlPacket(b"\x00" + event_bytes, "utf8"), stream.table_map, stream._ctl_connection,
            stream.mysql_version, *self._settings(),
        )
        if wrapper.event_type == BINLOG.TABLE_MAP_EVENT and wrapper.event is not None:
            stream.table_map[wrapper.event.table_id] = wrapper.event.get_table()
        return wrapper.event

    # -- MariaDB ------------------------------------------------------------------------------

    def mariadb(self, event):
        """The plain query or rows event inside a MariaDB compressed event."""
        raw = raw_event(event)
        header = raw[:HEADER_SIZE]
        body = body_of(raw, self.checksum)
        kind = raw[4]
        if kind == MARIADB_QUERY_COMPRESSED:
            plain_type, plain_body = BINLOG.QUERY_EVENT, self._query_body(body)
        else:
            plain_type, update = _MARIADB_ROWS[kind]
            plain_body = self._rows_body(body, plain_type, update)
        return self.parse(_event_bytes(header, plain_type, plain_body, self.checksum))

    @staticmethod
    def _query_body(body: bytes) -> bytes:
        # post-header: thread id (4), exec time (4), db length (1), error code (2), status vars length (2)
        db_len = body[8]
        status_len = struct.unpack_from("<H", body, 11)[0]
        text_at = 13 + status_len + db_len + 1  # status vars, db name, its NUL
        return body[:text_at] + _inflate_block(body[text_at:])

    def _rows_body(self, body: bytes, plain_type: int, update: bool) -> bytes:
        # post-header: table id (6) and flags (2); v2 events add the extra-data block, whose
        # 2-byte length counts itself
        at = 8
        if plain_type in (BINLOG.WRITE_ROWS_EVENT_V2, BINLOG.UPDATE_ROWS_EVENT_V2, BINLOG.DELETE_ROWS_EVENT_V2):
            at += struct.unpack_from("<H", body, 8)[0]
        width, at = _packed_int(body, at)
        at += ((width + 7) // 8) * (2 if update else 1)  # column bitmap(s)
        return body[:at] + _inflate_block(body[at:])

    # -- MySQL --------------------------------------------------------------------------------

    def mysql_payload(self, event) -> Iterator:
        """The events inside a TRANSACTION_PAYLOAD_EVENT, in order."""
        body = body_of(raw_event(event), self.checksum)
        fields, at = {}, 0
        while True:
            field, at = _packed_int(body, at)
            if field == _PAYLOAD_END:
                break
            length, at = _packed_int(body, at)
            fields[field], _ = _packed_int(body[at:at + length], 0)
            at += length
        compression = fields.get(_PAYLOAD_COMPRESSION, _COMPRESSION_NONE)
        payload = body[at:]
        if compression == _COMPRESSION_ZSTD:
            import zstandard

            payload = zstandard.ZstdDecompressor().decompress(
                payload, max_output_size=fields.get(_PAYLOAD_UNCOMPRESSED_SIZE, 0) or 1 << 30
            )
        elif compression != _COMPRESSION_NONE:
            raise CompressedEventError(f"transaction payload compressed with unknown algorithm {compression}")
        if _PAYLOAD_UNCOMPRESSED_SIZE in fields and len(payload) != fields[_PAYLOAD_UNCOMPRESSED_SIZE]:
            raise CompressedEventError(
                f"the transaction payload inflates to {len(payload)} bytes, its header says "
                f"{fields[_PAYLOAD_UNCOMPRESSED_SIZE]}"
            )
        at = 0
        while at < len(payload):
            size = struct.unpack_from("<I", payload, at + 9)[0]
            inner = payload[at:at + size]
            at += size
            # inner events carry no checksum; the wrapper expects one when the stream has them
            yield self.parse(_event_bytes(inner[:HEADER_SIZE], inner[4], inner[HEADER_SIZE:], self.checksum))
