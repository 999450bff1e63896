"""Type stub of mysql-cdc's compiled core (``native/src``, Rust through PyO3).

Imported only through ``mysql_cdc.native_core``; its callers are ``mysql_cdc.capture.native``
(the row decoders and the event framer) and ``mysql_cdc.merge.compiled_read`` (the Parquet reader).
"""

from typing import Any, Sequence

class DecodeError(ValueError):
    """args: (reason, column index or -1, message)."""

class ParquetError(ValueError):
    """args: (index of the file, message)."""

class TableMap:
    """A table map event's body (without header and checksum), as the decoders read it."""

    def __init__(self, body: bytes) -> None: ...
    @property
    def column_count(self) -> int: ...
    @property
    def column_types(self) -> list[int]: ...

class DecodedRows:
    """Decoded rows as one Arrow record batch (the Arrow PyCapsule interface: no copy)."""

    def __arrow_c_array__(self, requested_schema: Any = None) -> tuple[Any, Any]: ...
    def __len__(self) -> int: ...

class RowsDecoder:
    """``columns``: one ``(name, kind, number, names, unsigned)`` per column, in table order."""

    def __init__(self, columns: list[tuple[str, str, int, list[str] | None, bool]]) -> None: ...
    def push(self, table: TableMap, event_type: int, body: bytes) -> int:
        """Decode one rows event (without header and checksum); returns its row count."""
    @property
    def rows(self) -> int: ...
    def take(self) -> DecodedRows: ...

class ResultRowsDecoder:
    """A ``SELECT``'s row packets: ``columns`` one ``(name, kind, number, names)`` per column;
    ``seq`` the first row packet's sequence number; full at ``batch_rows`` or ``batch_bytes``."""

    def __init__(self, columns: list[tuple[str, str, int, list[str] | None]], seq: int, batch_rows: int,
                 batch_bytes: int) -> None: ...
    def feed(self, data: bytes) -> None: ...
    @property
    def full(self) -> bool: ...
    @property
    def done(self) -> bool: ...
    @property
    def error(self) -> bytes | None: ...
    @property
    def status(self) -> int: ...
    @property
    def seq(self) -> int: ...
    @property
    def rows(self) -> int: ...
    def take(self) -> DecodedRows: ...

class EventFrames:
    """The binlog dump's packets cut into events; ``seq`` the next packet's sequence number."""

    def __init__(self, seq: int) -> None: ...
    def feed(self, data: bytes) -> list[tuple[int, int, int, int, bytes]]:
        """The events ``data`` completes: ``(type, timestamp, log_pos, size, event)``, ``event``
        the server's bytes (header, body, checksum)."""
    @property
    def done(self) -> bool: ...
    @property
    def error(self) -> bytes | None: ...
    @property
    def seq(self) -> int: ...

def read_files(files: Sequence[memoryview], columns: Sequence[list[str]], threads: int) -> list[DecodedRows]:
    """Each whole Parquet file, its columns ``columns[i]``, on ``threads`` threads."""
