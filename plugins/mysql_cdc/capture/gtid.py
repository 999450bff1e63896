"""The GTID of MySQL's ``GTID_TAGGED_LOG_EVENT`` (8.3+: ``uuid:tag:N``), which mysql-replication
does not decode.

The event body is a ``mysql::serialization`` message: a format version, the message size and the
last non-ignorable field id, then ``(field id, value)`` pairs in id order. Integers are
variable-length: the count of trailing 1 bits of the first byte, plus one, is the number of bytes,
and the little-endian number they make, shifted right by that count, is the value (nine bytes when
the first byte is 0xff: the value is the eight after it). Signed integers are zigzag-encoded.
Fields 0-3 are the flags, the source UUID (16 integers, one per byte), the transaction number
(signed) and the tag (a length, then its bytes); nothing after them is needed here.
"""

from __future__ import annotations

import re
import uuid


class GtidDecodeError(ValueError):
    pass


def _unsigned(data: bytes, at: int) -> tuple[int, int]:
    first = data[at]
    if first == 0xFF:
        return int.from_bytes(data[at + 1:at + 9], "little"), at + 9
    size = 1
    while first & (1 << (size - 1)):
        size += 1
    value = int.from_bytes(data[at:at + size], "little") >> size
    return value, at + size


def _signed(data: bytes, at: int) -> tuple[int, int]:
    value, at = _unsigned(data, at)
    return (value >> 1) ^ -(value & 1), at


_FLAGS, _UUID, _GNO, _TAG = 0, 1, 2, 3


def tagged_gtid(body: bytes) -> str:
    """``uuid:tag:N`` from the body (after the common header, before the checksum) of the event."""
    try:
        at = 0
        for _ in range(3):  # format version, message size, last non-ignorable field id
            _, at = _unsigned(body, at)
        source, gno, tag = None, None, ""
        while at < len(body) and (source is None or gno is None or not tag):
            field, at = _unsigned(body, at)
            if field == _FLAGS:
                _, at = _unsigned(body, at)
            elif field == _UUID:
                raw = bytearray()
                for _ in range(16):
                    byte, at = _unsigned(body, at)
                    raw.append(byte)
                source = uuid.UUID(bytes=bytes(raw))
            elif field == _GNO:
                gno, at = _signed(body, at)
            elif field == _TAG:
                length, at = _unsigned(body, at)
                tag = body[at:at + length].decode("ascii")
                at += length
            else:
                break
    except (IndexError, UnicodeDecodeError) as exc:
        raise GtidDecodeError(f"GTID_TAGGED_LOG_EVENT body does not decode: {exc}") from None
    if source is None or gno is None:
        raise GtidDecodeError("GTID_TAGGED_LOG_EVENT without a source UUID or transaction number")
    return f"{source}:{tag}:{gno}" if tag else f"{source}:{gno}"


# -- GTIDs in SHOW BINLOG EVENTS ------------------------------------------------------------------

# MySQL: "SET @@SESSION.GTID_NEXT= 'uuid[:tag]:N'"; MariaDB: "BEGIN GTID d-s-n" ("GTID d-s-n" for
# a DDL, which is its own transaction)
_INFO_GTID = re.compile(r"GTID_NEXT\s*=\s*'([^']+)'|^(?:BEGIN )?GTID (\d+-\d+-\d+)")
# the set a binlog file starts with: MySQL's Previous_gtids, MariaDB's Gtid_list ("[0-1-4,1-2-7]")
FILE_START_SETS = {"Previous_gtids": lambda info: info.replace("\n", ""),
                   "Gtid_list": lambda info: info.strip().strip("[]")}


def event_gtid(info: str) -> str | None:
    """The GTID a SHOW BINLOG EVENTS ``Info`` begins a transaction with, if it does."""
    match = _INFO_GTID.search(info or "")
    if not match or match.group(1) in ("AUTOMATIC", "ANONYMOUS"):
        return None
    return match.group(1) or match.group(2)
