"""Merge-on-read for an Iceberg table: rows leave their data files through position delete files.

A keyed table's update or delete in copy-on-write reads every file that may hold one of the
segment's keys and writes it again without those rows: spread over a large table, ten thousand
updates rewrite the whole table. In merge-on-read (Iceberg's ``write.merge.mode=merge-on-read``,
what the follower's tables are created with) only the key columns of those files are read, to find
the rows' positions, and one small position delete file per data file names them (``file_path``,
``pos``, as Iceberg's spec defines it); the new rows are added as a data file. (Files of at least
``min_file_bytes``; a smaller file is rewritten, which costs no more: ``TableCommit.upsert``.) Every Iceberg
reader (Spark, Trino, pyiceberg and Polars through it, DuckDB's ``iceberg``) applies them; the
maintenance job's compaction rewrites the files that have deletes and drops the delete files.

pyiceberg (0.12) reads position deletes but writes none: it has no delete manifest writer and no
snapshot producer that adds delete files. ``RowDelta`` is the producer, an ``overwrite`` snapshot
of pyiceberg's own with the delete files added in a manifest of content ``deletes``.

Format version 2 only: version 3 replaces position delete files by deletion vectors, which
pyiceberg cannot write; a v3 (or v1) table is merged copy-on-write.
"""

from __future__ import annotations

import io
import posixpath
import struct
import uuid
from typing import TYPE_CHECKING, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io.pyarrow import ArrowScan, _read_deletes
from pyiceberg.manifest import (
    DataFile, DataFileContent, FileFormat, ManifestContent, ManifestEntry, ManifestEntryStatus, ManifestFile,
    ManifestWriterV2,
)
from pyiceberg.table import FileScanTask
from pyiceberg.table.snapshots import Operation
from pyiceberg.table.update.snapshot import _OverwriteFiles

if TYPE_CHECKING:
    from pyiceberg.table import Table

MERGE_MODE = "write.merge.mode"
MERGE_ON_READ = "merge-on-read"
# a table property of the follower's own: the smallest data file that gets a position delete file
# (a smaller one is rewritten: see ``TableCommit.upsert``)
MIN_FILE_BYTES = "mysql-cdc.merge-on-read.min-file-bytes"
DEFAULT_MIN_FILE_BYTES = 1024 * 1024
# Iceberg's reserved field ids of a position delete file's columns (the spec's "Position Delete Files")
FILE_PATH_ID = 2147483546
POS_ID = 2147483545
POSITION_DELETE_SCHEMA = pa.schema([
    pa.field("file_path", pa.string(), nullable=False, metadata={b"PARQUET:field_id": str(FILE_PATH_ID).encode()}),
    pa.field("pos", pa.int64(), nullable=False, metadata={b"PARQUET:field_id": str(POS_ID).encode()}),
])


def merges_on_read(table: "Table") -> bool:
    """Whether a keyed table's changed rows are deleted by position (the table's own
    ``write.merge.mode``; format version 2, the only one with position delete files pyiceberg reads
    and this module writes)."""
    return table.metadata.format_version == 2 and table.properties.get(MERGE_MODE) == MERGE_ON_READ


def min_file_bytes(table: "Table") -> int:
    """The smallest data file of ``table`` whose changed rows are deleted by position."""
    value = table.properties.get(MIN_FILE_BYTES, str(DEFAULT_MIN_FILE_BYTES))
    if not value.isdigit():
        raise ValueError(f"{'.'.join(table.name())}: table property {MIN_FILE_BYTES}={value!r} is not a number of bytes; "
                         f"set it to one (0: every file gets position deletes) or remove it "
                         f"(default {DEFAULT_MIN_FILE_BYTES})")
    return int(value)


def has_equality_deletes(tasks: Sequence[FileScanTask]) -> bool:
    return any(d.content == DataFileContent.EQUALITY_DELETES for task in tasks for d in task.delete_files)


def positions_of(table: "Table", task: FileScanTask, keys: pa.Table) -> pa.Array:
    """The positions (row numbers) in ``task``'s data file of the live rows whose key is one of
    ``keys`` (a table of the key columns, spelled as the table spells them). A row an earlier delete
    file deleted is not among them: a key updated again would otherwise be deleted again in every
    file that ever held it, once more per update."""
    names = keys.column_names
    # The file alone, without its delete files: a scan of one file, no filter, no deletes, yields
    # its rows in file order, so a row's index is its position. Columns are matched by field id
    # (a column renamed since the file was written is still found).
    held = ArrowScan(table.metadata, table.io, table.schema().select(*names), AlwaysTrue()).to_table(
        [FileScanTask(task.file)])
    if not held.num_rows:
        return pa.array([], pa.int64())
    positions = matching_positions(held, keys)
    deleted = _deleted_positions(table, task)
    if deleted is not None:
        positions = positions.filter(pc.invert(pc.is_in(positions, value_set=deleted)))
    return positions


def matching_positions(held: pa.Table, keys: pa.Table) -> pa.Array:
    """The positions (row numbers, ascending, int64) of ``held``'s rows whose key columns equal
    those of a row of ``keys`` (the same column names)."""
    names = keys.column_names
    # (one type per key on both sides: the scan gives the table's current types, which the batch's
    # keys have; cast in case a file's physical type differs)
    columns = [held.column(n).cast(keys.schema.field(n).type) for n in names]
    if len(names) == 1:
        # a one-column key: a mask of the file's rows, then its set bits. The join below needs a
        # column of positions as long as the file (5M rows: 40 MB of new memory, whose first
        # touch cost 0.13-0.24 s here, where the join itself took 30 ms; the mask, 60-80 ms in all)
        return pc.indices_nonzero(pc.is_in(columns[0], value_set=keys.column(0))).cast(pa.int64())
    indexed = pa.table([*columns, pa.array(np.arange(held.num_rows, dtype=np.int64))], names=[*names, "__pos"])
    found = indexed.join(keys, keys=names, join_type="left semi", use_threads=False)
    positions = found.column("__pos")
    return positions.take(pc.sort_indices(positions)).combine_chunks()


def _deleted_positions(table: "Table", task: FileScanTask) -> pa.Array | None:
    """The positions of ``task``'s data file its delete files delete (None: none applies)."""
    path = task.file.file_path
    found = [positions for delete_file in task.delete_files
             for file, positions in _read_deletes(table.io, delete_file).items() if file == path]
    return pa.chunked_array([c for p in found for c in p.chunks], pa.int64()).combine_chunks() if found else None


def write_position_deletes(table: "Table", data_file: DataFile, positions: pa.Array, commit_uuid: uuid.UUID,
                           number: int) -> DataFile:
    """A position delete file deleting ``positions`` of ``data_file``, written beside it (its
    partition's directory), bound to it by its ``file_path`` bounds (readers then apply it to that
    file only)."""
    positions = positions.cast(pa.int64())
    rows = pa.Table.from_arrays([pa.array([data_file.file_path] * len(positions), pa.string()), positions],
                                schema=POSITION_DELETE_SCHEMA)
    buffer = io.BytesIO()
    pq.write_table(rows, buffer)
    body = buffer.getvalue()
    path = posixpath.join(posixpath.dirname(data_file.file_path), f"{commit_uuid}-deletes-{number:05d}.parquet")
    with table.io.new_output(path).create(overwrite=True) as out:
        out.write(body)
    low, high = pc.min_max(positions).values()
    path_bound = data_file.file_path.encode()
    delete_file = DataFile.from_args(
        content=DataFileContent.POSITION_DELETES, file_path=path, file_format=FileFormat.PARQUET,
        partition=data_file.partition, record_count=len(positions), file_size_in_bytes=len(body),
        lower_bounds={FILE_PATH_ID: path_bound, POS_ID: struct.pack("<q", low.as_py())},
        upper_bounds={FILE_PATH_ID: path_bound, POS_ID: struct.pack("<q", high.as_py())},
    )
    delete_file.spec_id = data_file.spec_id
    return delete_file


class _DeleteManifestWriter(ManifestWriterV2):
    """A v2 manifest of delete files (pyiceberg's writer writes data files only)."""

    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


class RowDelta(_OverwriteFiles):
    """pyiceberg's ``overwrite`` snapshot producer (data files added and removed as its own) that
    also adds position delete files and, when told, leaves out every delete file of the table (a
    compaction that rewrote every file they apply to)."""

    def __init__(self, transaction, io, snapshot_properties: dict[str, str], commit_uuid: uuid.UUID,
                 delete_files: Sequence[DataFile], drop_delete_files: bool):
        assert all(f.content == DataFileContent.POSITION_DELETES for f in delete_files)
        exists = transaction.table_metadata.current_snapshot() is not None
        super().__init__(operation=Operation.OVERWRITE if exists else Operation.APPEND, transaction=transaction,
                         io=io, commit_uuid=commit_uuid, snapshot_properties=snapshot_properties)
        self._delete_files = list(delete_files)
        self._drop_delete_files = drop_delete_files

    def _delete_manifests(self) -> list[ManifestFile]:
        by_spec: dict[int, list[DataFile]] = {}
        for delete_file in self._delete_files:
            by_spec.setdefault(delete_file.spec_id, []).append(delete_file)
        manifests = []
        for spec_id, files in by_spec.items():
            with _DeleteManifestWriter(self.spec(spec_id), self.schema(), self.new_manifest_output(),
                                       self._snapshot_id, self._compression) as writer:
                for delete_file in files:
                    writer.add(ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=self._snapshot_id,
                                                       sequence_number=None, file_sequence_number=None,
                                                       data_file=delete_file))
            manifests.append(writer.to_manifest_file())
        return manifests

    def _dropped_delete_files(self) -> list[DataFile]:
        parent = self._transaction.table_metadata.snapshot_by_name(self._target_branch)
        if not self._drop_delete_files or parent is None:
            return []
        return [entry.data_file for manifest in parent.manifests(self._io) if manifest.content == ManifestContent.DELETES
                for entry in manifest.fetch_manifest_entry(self._io, discard_deleted=True)]

    def _existing_manifests(self) -> list[ManifestFile]:
        # pyiceberg keeps a delete manifest as it is (none of its files is among the data files
        # removed); a compaction that rewrote every file they apply to leaves them all out
        kept = super()._existing_manifests()
        if self._drop_delete_files:
            kept = [m for m in kept if m.content != ManifestContent.DELETES]
        return kept

    def _manifests(self) -> list[ManifestFile]:
        return [*super()._manifests(), *self._delete_manifests()]

    def _summary(self, snapshot_properties: dict[str, str] = {}):  # noqa: B006 (pyiceberg's signature)
        # pyiceberg's summary counts what it is given by content (data files, position deletes):
        # the added and dropped delete files are given with the data files, for this call only
        added, removed = self._added_data_files, self._deleted_data_files
        self._added_data_files = [*added, *self._delete_files]
        self._deleted_data_files = {*removed, *self._dropped_delete_files()}
        try:
            return super()._summary(snapshot_properties)
        finally:
            self._added_data_files, self._deleted_data_files = added, removed
