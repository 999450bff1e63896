"""The compiled row decoder (``native/``, Rust through PyO3) behind the API capture uses.

This module is the decoders' only caller. The compiled part does one narrow thing: the bytes of
rows events and their table map in, Arrow arrays out, with no Python object per value.
mysql-replication still connects, asks for the dump and parses table maps; the events themselves
are cut by the compiled framer (``stream.binlog_stream``). For a table the compiled decoder takes,
``BinlogCapture`` never asks the library for the rows.

Which tables it takes: every column needs a ``NativePlan`` (``types.py``, beside the reference
converter of the same column, so both decoders agree on the Arrow type), and the pipeline's
``extract.decoder`` must be ``native`` (the default). ``python`` keeps the reference decoder for
every table: it is what the differential tests compare against.

What the compiled decoder cannot read stops the extract, with the error the reference path gives
for the same value (a zero date, a partial row image), never a NULL in its place.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pymysql

from ..contracts import change_row as cr
from ..native_core import require
from .stream.compressed import body_of, raw_event
from .events import CaptureError, SnapshotError, partial_image_error, unrepresentable_value_error, zero_date_error

DECODERS = ("native", "python")

def require_native():
    """The compiled core, for a table the pipeline's ``decoder: native`` (the default) gives it."""
    return require("the compiled row decoder (the pipeline's `decoder: native`, the default)",
                   "set `extract: {decoder: python}` (and `snapshot: {decoder: python}`) in the pipelines file "
                   "to use the pure-Python decoder")


_DATE_CODES = {14: 10}  # MYSQL_TYPE_NEWDATE -> MYSQL_TYPE_DATE


def event_body(event, checksum: bool) -> bytes:
    """The event without its 19-byte header and its checksum: what the compiled decoder reads."""
    return body_of(raw_event(event), checksum)


class NativeTable:
    """One table map event as the compiled decoder reads it, checked against the library's own
    reading of the same event (a disagreement about a column's type stops here, not in a value)."""

    def __init__(self, event, checksum: bool, qualified: str):
        require_native()
        try:
            self.table_map = require_native().TableMap(event_body(event, checksum))
        except require_native().DecodeError as exc:
            raise CaptureError(f"{qualified}: the compiled decoder cannot read its table map: {exc.args[-1]}") from None
        # (the two spell DATE differently: the old code 10 and NEWDATE 14 are one layout)
        library_types = [_DATE_CODES.get(c.type, c.type) for c in event.columns]
        native_types = [_DATE_CODES.get(t, t) for t in self.table_map.column_types]
        if native_types != library_types:
            raise CaptureError(
                f"{qualified}: the compiled decoder reads the column types {native_types} "
                f"where mysql-replication reads {library_types}; set `extract: {{decoder: python}}` and report it"
            )


class NativeRows:
    """The rows of one table's writer, decoded by the compiled decoder as events arrive and taken
    as Arrow columns when the writer flushes a chunk."""

    def __init__(self, spec):
        require_native()
        self.spec = spec
        self._decoder = require_native().RowsDecoder([(name, *t.native) for name, t in zip(spec.names, spec.types)])

    def push(self, table: NativeTable, event_type: int, body: bytes, where: str) -> int:
        """Decode one rows event (its body: no header, no checksum); returns its row count."""
        try:
            return self._decoder.push(table.table_map, event_type, body)
        except require_native().DecodeError as exc:
            raise self._error(*exc.args, where) from None

    def _error(self, reason: str, column: int, message: str, where: str) -> CaptureError:
        qualified = f"{self.spec.database}.{self.spec.table}"
        name = self.spec.names[column] if 0 <= column < len(self.spec.names) else None
        if reason == "partial_image":
            return partial_image_error(qualified, name)
        if reason == "zero_date":
            return unrepresentable_value_error(qualified, name, message)
        column_text = f".{name}" if name else ""
        return CaptureError(
            f"{qualified}{column_text}: the compiled decoder cannot read the rows event at {where} ({reason}: "
            f"{message}); nothing was written. Set `extract: {{decoder: python}}` in the pipelines file to read "
            "it with the pure-Python decoder, and report it"
        )

    @property
    def rows(self) -> int:
        return self._decoder.rows

    def take(self, schema: pa.Schema) -> tuple[list[pa.Array], pa.StructArray]:
        """The decoded rows' columns and their before images (a struct, NULL where a row has
        none), in ``schema``'s types; the decoder starts afresh."""
        decoded = pa.array(self._decoder.take())
        n = len(self.spec.names)
        columns = [decoded.field(i) for i in range(n)]
        before_type = schema.field(cr.BEFORE).type
        before = pa.StructArray.from_arrays(
            [decoded.field(n + i) for i in range(n)], fields=list(before_type), mask=pc.invert(decoded.field(2 * n))
        )
        return columns, before


# -- a snapshot copy's rows: a SELECT's row packets ----------------------------------------------

_RESULT_PLANS = {  # the Arrow type a copied column has (snapshot.snapshot_column) -> how its text reads
    pa.int8(): "int8", pa.int16(): "int16", pa.int32(): "int32", pa.int64(): "int64",
    pa.float32(): "float32", pa.float64(): "float64", pa.date32(): "date", pa.timestamp("us"): "datetime",
    pa.timestamp("us", tz="UTC"): "timestamp", pa.duration("us"): "time", pa.string(): "text",
    pa.binary(): "binary",
}
_READ_BYTES = 1 << 20  # what one read of the socket asks for


def result_plan(name: str, arrow_type: pa.DataType) -> tuple[str, str, int, list]:
    """``(name, kind, number, names)``: how the compiled decoder reads a copied column's text."""
    if pa.types.is_decimal(arrow_type):
        return name, "decimal", arrow_type.precision * 100 + arrow_type.scale, []
    return name, _RESULT_PLANS[arrow_type], 0, []


class ResultRows:
    """A ``SELECT``'s rows read off a PyMySQL connection by the compiled decoder, in Arrow record
    batches of ``chunk_rows`` rows (fewer when they reach ``chunk_bytes``) in ``schema``'s types.
    The reference is PyMySQL's own parsing (``SnapshotTableWriter.write``), in batches of
    ``chunk_rows``: the two write the same Parquet parts.

    PyMySQL sends the query and reads the column definitions (``Connection.query`` with
    ``unbuffered``, as its unbuffered cursor does). From the first row on the decoder reads the
    connection's bytes itself, so PyMySQL is told its result is finished: it must not read those
    packets too. PyMySQL is pinned in requirements.txt; ``tests/capture/test_native_copy.py``
    reads every type both ways."""

    def __init__(self, conn, schema: pa.Schema, chunk_rows: int, chunk_bytes: int, qualified: str):
        require_native()
        self.conn, self.schema, self.qualified = conn, schema, qualified
        self.chunk_rows, self.chunk_bytes = chunk_rows, chunk_bytes

    def read(self, sql: str):
        """Yield the rows of ``sql`` as record batches; raises what the server or a value raises."""
        conn = self.conn
        conn.query(sql, unbuffered=True)
        result = conn._result
        if not result.unbuffered_active or len(result.fields) != len(self.schema):
            raise SnapshotError(f"{self.qualified}: the copy's SELECT returned {result.field_count} columns where "
                               f"{len(self.schema)} were asked for")
        decoder = require_native().ResultRowsDecoder([result_plan(f.name, f.type) for f in self.schema], conn._next_seq_id,
                                            self.chunk_rows, self.chunk_bytes)
        result.unbuffered_active, conn._result = False, None  # the rows are the decoder's to read now
        try:
            while True:
                if decoder.full:
                    yield self._batch(decoder)
                    decoder.feed(b"")  # the bytes it kept when the batch filled
                elif decoder.done:
                    break
                else:
                    data = conn._rfile.read1(_READ_BYTES)
                    if not data:
                        raise pymysql.err.OperationalError(2013, "Lost connection to MySQL server during query")
                    decoder.feed(data)
        except require_native().DecodeError as exc:
            conn._force_close()  # the rest of the rows were not read: the connection cannot be reused
            raise self._error(*exc.args) from None
        except OSError as exc:  # as PyMySQL reports a failed read
            conn._force_close()
            raise pymysql.err.OperationalError(2013, f"Lost connection to MySQL server during query ({exc})") from exc
        except BaseException:
            conn._force_close()
            raise
        if decoder.error is not None:
            pymysql.err.raise_mysql_exception(decoder.error)
        if decoder.rows:
            yield self._batch(decoder)
        conn._next_seq_id = decoder.seq
        if decoder.status & 8:  # SERVER_MORE_RESULTS_EXISTS: one SELECT has one result
            conn._force_close()
            raise SnapshotError(f"{self.qualified}: the copy's SELECT returned more than one result")

    def _batch(self, decoder) -> pa.RecordBatch:
        decoded = pa.array(decoder.take())
        return pa.RecordBatch.from_arrays([decoded.field(i) for i in range(len(self.schema))], schema=self.schema)

    def _error(self, reason: str, column: int, message: str) -> SnapshotError:
        name = self.schema.field(column).name if 0 <= column < len(self.schema) else None
        if reason == "zero_date":
            return zero_date_error(name, message)
        column_text = f".{name}" if name else ""
        return SnapshotError(
            f"{self.qualified}{column_text}: the compiled decoder cannot read a copied row ({reason}: {message}); "
            "nothing was written. Set `snapshot: {decoder: python}` in the pipelines file to read it with "
            "PyMySQL, and report it"
        )
