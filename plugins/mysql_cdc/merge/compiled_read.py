"""The compiled reader of small Parquet files (``native/src/parquet_files.rs``) behind the API the
driver's path uses (``reader.read_tables``); this module is its only caller.

A batch that touches a thousand tables holds a thousand small files, and reading one with pyarrow
costs about half a millisecond of fixed work whatever its rows: the footer, the schema, a reader
per column. Rust's ``parquet`` crate does the same work in well under half of that, and reads all
of a group's files in one call, outside the GIL, on ``THREADS`` threads. Each file comes back as
one record batch through the Arrow PyCapsule interface (no copy).

It reads only. What the file must hold (the manifest's columns and types) is checked by the
caller for both readers alike, and pyarrow's reading (``reader._row_groups``) stays the reference
the tests compare this one against (``reader.read_tables(..., compiled=False)``). The extension is
part of the install (``make setup`` builds it; ``native_core`` says how when it is missing).
"""

from __future__ import annotations

from typing import Callable, Sequence

import pyarrow as pa

from ..native_core import require

# Threads the compiled reader reads a group's files on: the driver's two cores (the follower's
# server, on its own host in production, takes the rest of a busy machine)
THREADS = 2


def read_files(files: Sequence[pa.Buffer], columns: Sequence[list[str]], where: Callable[[int], str]) -> list[pa.Table]:
    """Each whole Parquet file in ``files`` (its bytes), the columns ``columns[i]`` of file i (names,
    or ``struct.field`` paths as ``reader.parquet_columns`` gives them), as a table in the file's
    column order; ``where(i)`` names file i in the error a file that is not Parquet raises (made
    only then: a thousand files' names would cost more than the error path ever does)."""
    # a pa.Buffer offers its bytes as signed chars: the same bytes, viewed as the unsigned ones Rust takes
    views = [memoryview(f).cast("B") for f in files]
    core = require("the merge driver's Parquet reader")
    try:
        batches = core.read_files(views, list(columns), THREADS)
    except core.ParquetError as exc:
        index, message = exc.args
        raise ValueError(f"{where(index)}: not a Parquet file the merge can read ({message})") from None
    return [pa.Table.from_batches([pa.record_batch(b)]) for b in batches]
