"""The change batch: the unit that capture writes and the merge job applies.

Layout under a storage root::

    <root>/<pipeline>/batches/<batch id>/manifest.json
    <root>/<pipeline>/batches/<batch id>/seg-00001/<db>.<table>/part-00000.parquet
    <root>/<pipeline>/batches/<batch id>/seg-00001/small-tables-00000.pack

A table's change rows are Parquet files. A table with a small file (a few hundred rows: most
tables of an OLTP application's interval) does not get an object of its own: its one Parquet file
is stored, whole and unchanged, inside a segment's pack with the other small tables' files, and the
manifest gives its byte range (``TableChanges.spans``). An object store charges a request per object
(tens of milliseconds, a few of CPU in the client): a thousand small tables in a thousand objects
cost a thousand PUTs and GETs; in packs, a few.

``manifest.json`` is written last and is the commit marker: a batch directory without it does
not exist (it is a crashed or in-progress extraction and is ignored, then overwritten).
Batch ids sort in binlog order because they are built from fixed-width position tokens.

The manifest lists the range, then the ordered segments of that range: a ``rows`` segment is a
run of row changes (per table: its files, row count, columns and key columns); a ``ddl`` segment
is one schema statement with its default schema. A DDL therefore splits a batch into several
follower commits, each of which leaves the follower consistent with the leader.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Sequence, Union

from .position import BinlogPosition, PositionRange
from ..errors import PermanentError

# 2: snapshot segments carry their chunks and catch-up changes; 3: end_time; 4: small tables' files in packs
FORMAT_VERSION = 4
MANIFEST_NAME = "manifest.json"


class ManifestError(ValueError, PermanentError):
    """manifest.json does not follow the change batch contract."""


@functools.cache
def _field_names(cls) -> frozenset[str]:
    # (once per class: a manifest of a thousand tables has several thousand objects to check)
    return frozenset(f.name for f in fields(cls))


def _strict(cls, data: dict[str, Any], where: str) -> dict[str, Any]:
    """Reject unknown and missing keys, naming them: a typo must not silently drop data. Every
    field is required, defaulted ones too: the writer always writes them all, so a manifest
    without one was not written by it."""
    if not isinstance(data, dict):
        raise ManifestError(f"{where}: expected an object, got {type(data).__name__}")
    names = _field_names(cls)
    if data.keys() == names:  # the usual case, in one comparison
        return data
    unknown = sorted(set(data) - names)
    if unknown:
        raise ManifestError(f"{where}: unknown field(s) {unknown}; known fields are {sorted(names)}")
    missing = sorted(names - set(data))
    if missing:
        raise ManifestError(f"{where}: missing field(s) {missing}")
    return data


@dataclass(frozen=True)
class ColumnSpec:
    """One table column as the binlog describes it (never today's information_schema)."""

    name: str
    mysql_type: str  # e.g. "bigint unsigned", "decimal(65,30)", "datetime(6)", "varchar"
    arrow_type: str  # str() of the pyarrow type used in the Parquet files
    nullable: bool = True

    def to_json(self) -> dict[str, Any]:
        # (not dataclasses.asdict: its deep copies cost a 1,000-table manifest a quarter of a second)
        return {"name": self.name, "mysql_type": self.mysql_type, "arrow_type": self.arrow_type,
                "nullable": self.nullable}


def _columns(data: dict[str, Any], where: str) -> tuple[ColumnSpec, ...]:
    return tuple(ColumnSpec(**_strict(ColumnSpec, c, f"{where}.columns[{i}]")) for i, c in enumerate(data["columns"]))


@dataclass(frozen=True)
class TableChanges:
    database: str
    table: str
    columns: tuple[ColumnSpec, ...]
    key_columns: tuple[str, ...]  # the primary key; empty means "apply by full before-image"
    files: tuple[str, ...]  # relative to the batch directory, in binlog order
    row_count: int
    # Empty: each of ``files`` is a Parquet file. Otherwise one (offset, length) per file: the
    # table's Parquet file is those bytes of that object (a pack of small tables' files).
    spans: tuple[tuple[int, int], ...] = ()

    def __post_init__(self) -> None:
        if self.spans and len(self.spans) != len(self.files):
            raise ManifestError(f"{self.qualified_name}: {len(self.spans)} spans for {len(self.files)} files")

    @property
    def qualified_name(self) -> str:
        return f"{self.database}.{self.table}"

    def file_spans(self) -> list[tuple[str, tuple[int, int] | None]]:
        """Each file with the byte range of the table's Parquet file in it (None: all of it)."""
        return list(zip(self.files, self.spans or [None] * len(self.files)))

    def to_json(self) -> dict[str, Any]:
        return {"database": self.database, "table": self.table, "columns": [c.to_json() for c in self.columns],
                "key_columns": list(self.key_columns), "files": list(self.files), "row_count": self.row_count,
                "spans": [list(s) for s in self.spans]}

    @classmethod
    def from_json(cls, data: dict[str, Any], where: str) -> "TableChanges":
        _strict(cls, data, where)
        columns = _columns(data, where)
        return cls(
            database=data["database"],
            table=data["table"],
            columns=columns,
            key_columns=tuple(data["key_columns"]),
            files=tuple(data["files"]),
            row_count=int(data["row_count"]),
            spans=_spans(data["spans"], where),
        )


def _spans(data: Any, where: str) -> tuple[tuple[int, int], ...]:
    if not isinstance(data, list) or not all(
            isinstance(s, list) and len(s) == 2 and all(isinstance(v, int) and v >= 0 for v in s) for s in data):
        raise ManifestError(f"{where}.spans: expected a list of [offset, length] pairs, got {data!r}")
    return tuple((s[0], s[1]) for s in data)


@dataclass(frozen=True)
class RowSegment:
    """A run of row changes between two transaction boundaries, with no DDL inside."""

    index: int
    start: BinlogPosition
    end: BinlogPosition
    tables: tuple[TableChanges, ...]
    gtid_set: str | None = None  # the leader's executed GTID set at ``end`` (see gtid_set)
    kind: str = "rows"

    @property
    def row_count(self) -> int:
        return sum(t.row_count for t in self.tables)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "index": self.index,
            "start": str(self.start),
            "end": str(self.end),
            "tables": [t.to_json() for t in self.tables],
            "gtid_set": self.gtid_set,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], where: str) -> "RowSegment":
        _strict(cls, data, where)
        return cls(
            index=int(data["index"]),
            start=BinlogPosition.parse(data["start"]),
            end=BinlogPosition.parse(data["end"]),
            tables=tuple(
                TableChanges.from_json(t, f"{where}.tables[{i}]") for i, t in enumerate(data["tables"])
            ),
            gtid_set=data["gtid_set"],
        )


@dataclass(frozen=True)
class DdlTarget:
    """A database, or a table of a database, that a DDL statement creates, changes or drops."""

    database: str
    table: str | None = None  # None for CREATE/DROP DATABASE


@dataclass(frozen=True)
class DdlSegment:
    """One schema statement, replayed on the follower with its default schema."""

    index: int
    start: BinlogPosition  # where the statement's transaction begins
    end: BinlogPosition  # the transaction boundary right after it
    schema: str  # the session's default schema when the leader ran it ('' for none)
    statement: str
    action: str  # e.g. "create_table", "alter_table", "drop_database" (see capture.ddl)
    targets: tuple[DdlTarget, ...]
    gtid: str | None = None
    gtid_set: str | None = None  # the leader's executed GTID set at ``end``
    kind: str = "ddl"

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "index": self.index,
            "start": str(self.start),
            "end": str(self.end),
            "schema": self.schema,
            "statement": self.statement,
            "action": self.action,
            "targets": [asdict(t) for t in self.targets],
            "gtid": self.gtid,
            "gtid_set": self.gtid_set,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], where: str) -> "DdlSegment":
        _strict(cls, data, where)
        return cls(
            index=int(data["index"]),
            start=BinlogPosition.parse(data["start"]),
            end=BinlogPosition.parse(data["end"]),
            schema=data["schema"],
            statement=data["statement"],
            action=data["action"],
            targets=tuple(
                DdlTarget(**_strict(DdlTarget, t, f"{where}.targets[{i}]"))
                for i, t in enumerate(data["targets"])
            ),
            gtid=data["gtid"],
            gtid_set=data["gtid_set"],
        )


@dataclass(frozen=True)
class SnapshotChunk:
    """One key range of a table, copied in its own read view consistent with the binlog position
    ``at``: the rows whose split column is in ``[lo, hi)`` (None: unbounded on that side)."""

    index: int
    lo: int | None
    hi: int | None
    at: BinlogPosition
    row_count: int

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "lo": self.lo, "hi": self.hi, "at": str(self.at), "row_count": self.row_count}

    @classmethod
    def from_json(cls, data: dict[str, Any], where: str) -> "SnapshotChunk":
        _strict(cls, data, where)
        bound = (lambda v: None if v is None else int(v))
        return cls(int(data["index"]), bound(data["lo"]), bound(data["hi"]), BinlogPosition.parse(data["at"]),
                   int(data["row_count"]))


@dataclass(frozen=True)
class SnapshotSegment:
    """One table copied from the leader, consistent with the binlog position ``at``.

    Its files hold the table's rows (its own columns only, no change metadata). Applying it
    replaces the follower table's rows with them and records ``at`` as the table's own position:
    the table's changes at or before ``at`` are in the copy, so the stream skips them
    (``contracts.replay``). ``full`` marks a copy of every table of the pipeline, which moves
    the pipeline's own position to the batch's start once all of them are applied.

    A large table is copied in ``chunks``, key ranges of ``split_column`` each read in its own
    read view at its own position (so the copy runs in parallel and resumes chunk by chunk).
    ``catch_up`` holds the table's change rows between the earliest chunk's position and ``at``
    (the latest): the merge folds into each chunk's rows the ones after that chunk's own position
    (``merge.transforms.after_copies``, ``fold_catch_up``), which brings every chunk to ``at``
    before anything is loaded.
    """

    index: int
    at: BinlogPosition
    database: str
    table: str
    create_database: str  # the leader's SHOW CREATE DATABASE
    create_table: str  # the leader's SHOW CREATE TABLE
    columns: tuple[ColumnSpec, ...]
    key_columns: tuple[str, ...]
    files: tuple[str, ...]
    row_count: int
    full: bool
    split_column: str | None = None
    chunks: tuple[SnapshotChunk, ...] = ()
    catch_up: TableChanges | None = None
    kind: str = "snapshot"

    @property
    def start(self) -> BinlogPosition:
        return self.at

    @property
    def end(self) -> BinlogPosition:
        return self.at

    @property
    def qualified_name(self) -> str:
        return f"{self.database}.{self.table}"

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind, "index": self.index, "at": str(self.at), "database": self.database,
            "table": self.table, "create_database": self.create_database, "create_table": self.create_table,
            "columns": [c.to_json() for c in self.columns], "key_columns": list(self.key_columns),
            "files": list(self.files), "row_count": self.row_count, "full": self.full,
            "split_column": self.split_column, "chunks": [c.to_json() for c in self.chunks],
            "catch_up": self.catch_up.to_json() if self.catch_up is not None else None,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], where: str) -> "SnapshotSegment":
        _strict(cls, data, where)
        catch_up = data["catch_up"]
        return cls(
            index=int(data["index"]),
            at=BinlogPosition.parse(data["at"]),
            database=data["database"],
            table=data["table"],
            create_database=data["create_database"],
            create_table=data["create_table"],
            columns=_columns(data, where),
            key_columns=tuple(data["key_columns"]),
            files=tuple(data["files"]),
            row_count=int(data["row_count"]),
            full=bool(data["full"]),
            split_column=data["split_column"],
            chunks=tuple(SnapshotChunk.from_json(c, f"{where}.chunks[{i}]") for i, c in enumerate(data["chunks"])),
            catch_up=TableChanges.from_json(catch_up, f"{where}.catch_up") if catch_up is not None else None,
        )

    def as_table_changes(self) -> TableChanges:
        """The table's shape in the form the follower checks take."""
        return TableChanges(self.database, self.table, self.columns, self.key_columns, self.files, self.row_count)


def _without_packs(data: dict[str, Any]) -> dict[str, Any]:
    """A format-3 manifest as format 4 has it: the same, with no table's files in a pack."""
    def tables(segment: Any) -> list:
        if not isinstance(segment, dict):
            return []
        if segment.get("kind") == "rows":
            return segment.get("tables") or []
        catch_up = segment.get("catch_up") if segment.get("kind") == "snapshot" else None
        return [catch_up] if catch_up else []

    data = json.loads(json.dumps(data))  # a copy: the caller's stays as it was read
    for segment in data.get("segments") or []:
        for table in tables(segment):
            if isinstance(table, dict):
                table.setdefault("spans", [])
    data["format_version"] = FORMAT_VERSION
    return data


Segment = Union[RowSegment, DdlSegment, SnapshotSegment]
_SEGMENT_KINDS = {"rows": RowSegment, "ddl": DdlSegment, "snapshot": SnapshotSegment}


def batch_id_for(range_: PositionRange) -> str:
    """Sortable in binlog order; the same range always gets the same id (re-extraction overwrites)."""
    return f"{range_.start.token()}-{range_.end.token()}"


SNAPSHOT_MARK = "-snapshot-"


def tables_digest(tables: Sequence[str]) -> str:
    return hashlib.sha1("\n".join(sorted(tables)).encode()).hexdigest()[:10]


def snapshot_batch_id(at: BinlogPosition, tables: Sequence[str]) -> str:
    """A snapshot's batch id: the position its copy starts from (so it sorts in binlog order,
    after the stream batches that start there) and a digest of the tables it copies."""
    return f"{at.token()}{SNAPSHOT_MARK}{tables_digest(tables)}"


def batch_prefix(pipeline: str, batch_id: str) -> str:
    return f"{pipeline}/batches/{batch_id}"


def batches_prefix(pipeline: str) -> str:
    return f"{pipeline}/batches/"


@dataclass(frozen=True)
class ChangeBatch:
    """The contents of manifest.json."""

    pipeline: str
    batch_id: str
    start: BinlogPosition
    end: BinlogPosition
    segments: tuple[Segment, ...]
    start_gtid: str | None = None  # GTID of the last transaction before ``start``, if known
    end_gtid: str | None = None  # GTID of the last transaction inside the batch
    # the leader's executed GTID sets at ``start`` and ``end`` (None: the leader has no GTIDs),
    # and which server the positions are on (MySQL server_uuid, MariaDB server_id): a position
    # means something on one server only, a GTID set on any (capture.failover)
    start_gtid_set: str | None = None
    end_gtid_set: str | None = None
    leader_id: str | None = None
    # when the last transaction of the range committed, on the leader's clock (Unix seconds,
    # from its binlog event header); None when the range holds no transaction (or is a copy).
    # How far behind a follower is = now - this time of the last batch it applied (monitor.lag)
    end_time: int | None = None
    server_flavor: str = "mariadb"  # "mariadb" or "mysql": DDL dialect of ``statement``s
    format_version: int = FORMAT_VERSION
    row_count: int = field(default=0)

    @property
    def range(self) -> PositionRange:
        return PositionRange(self.start, self.end)

    @property
    def is_snapshot(self) -> bool:
        return any(isinstance(s, SnapshotSegment) for s in self.segments)

    @property
    def prefix(self) -> str:
        return batch_prefix(self.pipeline, self.batch_id)

    def to_json(self) -> str:
        body = {
            "format_version": self.format_version,
            "pipeline": self.pipeline,
            "batch_id": self.batch_id,
            "start": str(self.start),
            "end": str(self.end),
            "start_gtid": self.start_gtid,
            "end_gtid": self.end_gtid,
            "start_gtid_set": self.start_gtid_set,
            "end_gtid_set": self.end_gtid_set,
            "leader_id": self.leader_id,
            "end_time": self.end_time,
            "server_flavor": self.server_flavor,
            "row_count": self.row_count,
            "segments": [s.to_json() for s in self.segments],
        }
        # sort_keys + fixed separators: re-extracting a range yields a byte-identical manifest.
        # Compact (`jq .` shows it indented): json's C encoder takes a manifest of a thousand tables
        # in 40 ms, its pure-Python one (any indent) in 150-200 ms.
        return json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n"

    @classmethod
    def from_json(cls, text: str | bytes) -> "ChangeBatch":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ManifestError(f"manifest.json is not valid JSON: {exc}") from exc
        # the version first: a manifest of another version has other fields
        version = data.get("format_version") if isinstance(data, dict) else None
        if version == 3:  # a batch extracted before an upgrade is merged after it: format 4 without packs
            data, version = _without_packs(data), FORMAT_VERSION
        if isinstance(data, dict) and "format_version" in data and version != FORMAT_VERSION:
            fix = ("upgrade mysql-cdc" if not isinstance(version, int) or version > FORMAT_VERSION else
                   "it was written by an older mysql-cdc: extract its range again (a run with start and end), "
                   "or for a snapshot batch run a resnapshot of its tables")
            raise ManifestError(
                f"manifest format_version {version} is not supported (this code reads version {FORMAT_VERSION}); "
                f"{fix}"
            )
        _strict(cls, data, "manifest")
        segments = []
        for i, seg in enumerate(data["segments"]):
            kind = seg.get("kind") if isinstance(seg, dict) else None
            if kind not in _SEGMENT_KINDS:
                raise ManifestError(f"manifest.segments[{i}].kind: {kind!r} is not one of {sorted(_SEGMENT_KINDS)}")
            segments.append(_SEGMENT_KINDS[kind].from_json(seg, f"manifest.segments[{i}]"))
        return cls(
            pipeline=data["pipeline"],
            batch_id=data["batch_id"],
            start=BinlogPosition.parse(data["start"]),
            end=BinlogPosition.parse(data["end"]),
            segments=tuple(segments),
            start_gtid=data["start_gtid"],
            end_gtid=data["end_gtid"],
            start_gtid_set=data["start_gtid_set"],
            end_gtid_set=data["end_gtid_set"],
            leader_id=data["leader_id"],
            end_time=None if data["end_time"] is None else int(data["end_time"]),
            server_flavor=data["server_flavor"],
            format_version=data["format_version"],
            row_count=int(data["row_count"]),
        )
