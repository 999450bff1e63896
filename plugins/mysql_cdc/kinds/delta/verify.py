"""How a Delta Lake follower is verified: its tables at the pipeline's consistent cut, read with
delta-rs and hashed in the leader's chunks (``monitor.row_checksums``: the same canonical text per
value on both sides), against the leader's rows hashed the same way."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

from ...monitor.chunks import Chunk, ChunkSum, TableShape
from ...monitor.row_checksums import LeaderRowChecksums, aggregate, row_crc
from ...monitor.verify import ChecksumSides, FollowerSides
from .state.location import LakeLocation


def checksum_sides(location: LakeLocation) -> FollowerSides:
    """The leader's rows hashed here, against the lake's at the cut."""
    return lambda leader_conn, pipeline: ChecksumSides(LeaderRowChecksums(leader_conn),
                                                       LakeChecksums(location, pipeline))


class LakeChecksums:
    """A Delta Lake follower's tables at the pipeline's consistent cut (``state.cut``), read
    with delta-rs, in the leader's chunks (``LeaderRowChecksums.chunks``)."""

    def __init__(self, location: LakeLocation, pipeline: str):
        self.location = location
        self.pipeline = pipeline
        self._cut = None
        self._tables: dict[str, Any] = {}

    def refresh(self) -> None:
        """Read the cut again (a recheck after the next merge)."""
        self._cut, self._tables = None, {}

    def _rows(self, shape: TableShape):
        """The table's rows at the cut as a pyarrow Table, None when the cut has no such table."""
        from .state.cut import read_cut_at

        if self._cut is None:
            self._cut = read_cut_at(self.location, self.pipeline)
        if shape.name not in self._tables:
            self._tables[shape.name] = _plain_views(self._cut.read(shape.name)) if shape.name in self._cut.versions \
                else None
        return self._tables[shape.name]

    def chunk_sum(self, shape: TableShape, chunk: Chunk) -> ChunkSum | None:
        import pyarrow.compute as pc

        rows = self._rows(shape)
        if rows is None:
            return None
        if shape.split_column is not None:
            key = rows.column(shape.split_column)
            mask = None
            for bound, compare in ((chunk.lo, pc.greater_equal), (chunk.hi, pc.less)):
                if bound is not None:
                    test = compare(key, _lake_scalar(bound, key.type))
                    mask = test if mask is None else pc.and_(mask, test)
            if mask is not None:
                rows = rows.filter(pc.fill_null(mask, False))
        # A column the leader added and no row has carried since is not in the lake yet (the
        # binlog brings a table's columns with its rows): its values are NULL there, as a reader
        # of the lake sees them; with a default other than NULL the chunk differs.
        columns = [rows.column(c).to_pylist() if c in rows.column_names else [None] * rows.num_rows
                   for c in shape.columns]
        return aggregate(row_crc(values, shape.types) for values in zip(*columns))


def _plain_views(rows):
    """delta-rs's query engine returns strings and binaries as Arrow views, which pyarrow cannot
    filter yet: the same values as plain strings and binaries."""
    import pyarrow as pa

    plain = {pa.string_view(): pa.large_string(), pa.binary_view(): pa.large_binary()}
    if not any(f.type in plain for f in rows.schema):
        return rows
    return rows.cast(pa.schema([f.with_type(plain.get(f.type, f.type)) for f in rows.schema]))


def _lake_scalar(bound: Any, arrow_type):
    """A chunk bound (a leader value) as a scalar of the lake column's type."""
    import pyarrow as pa

    if isinstance(bound, dt.timedelta):  # TIME: the lake's microseconds
        bound = (bound.days * 86_400 + bound.seconds) * 1_000_000 + bound.microseconds
    elif isinstance(bound, dt.datetime) and getattr(arrow_type, "tz", None):  # TIMESTAMP: read in UTC
        bound = bound.replace(tzinfo=dt.timezone.utc)
    elif isinstance(bound, int) and pa.types.is_decimal(arrow_type):  # BIGINT UNSIGNED
        bound = Decimal(bound)
    return pa.scalar(bound, type=arrow_type)
