"""Small files, old snapshots and orphan files of an Iceberg follower, for every table of the
pipeline's consistent cut, from the maintenance job's driver (pyiceberg; no Spark job).

- compaction: every merge adds a file per table, and a position delete file per file holding a
  changed row; the table's small files, and every file with deletes (them applied), are rewritten
  into files of its target size in one snapshot that changes no row and holds no delete file.
- snapshot expiry: a snapshot older than ``retain_hours`` goes only if it is an ancestor of the
  cut's snapshot: the cut, and everything committed after it (a merge past the cut, whose retry
  finds its position in them), always stay.
- orphan files: files under the table's location that no remaining snapshot, manifest or metadata
  file names, older than ``retain_hours`` (a crashed merge's files; the files of expired
  snapshots; a file being written now is younger).
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass

from .catalog import CatalogRef
from .commit import TableCommit, snapshot_total
from .cut import read_cut

log = logging.getLogger("mysql_cdc.maintenance")

MIN_RETAIN_HOURS = 1.0  # below it a reader of an older snapshot may lose its files mid-read
SMALL_FILE_BYTES = 64 * 1024 * 1024  # a file below it is rewritten with the table's other small ones


@dataclass
class TableMaintenance:
    table: str
    files_before: int
    files_after: int
    snapshots_expired: int
    orphans_removed: int


def maintain_catalog(catalog: CatalogRef, pipeline: str, retain_hours: float,
                     now: dt.datetime | None = None) -> list[TableMaintenance]:
    """Compact, expire and remove orphans of every table of the pipeline's cut; ``now`` is the
    clock the retention is counted from."""
    if retain_hours < MIN_RETAIN_HOURS:
        raise ValueError(f"retain_hours {retain_hours} is below {MIN_RETAIN_HOURS}: a reader of an older snapshot "
                         "would lose its files while it reads")
    cutoff = (now or dt.datetime.now(dt.timezone.utc)) - dt.timedelta(hours=retain_hours)
    cut = read_cut(catalog, pipeline)
    done = []
    for name, snapshot_id in sorted(cut.snapshots.items()):
        table = cut.table(name)
        before = _data_files(table)
        table = _compact(table)
        table, expired = _expire(table, snapshot_id, cutoff)
        removed = _remove_orphans(table, cutoff)
        done.append(TableMaintenance(name, len(before), len(_data_files(table)), expired, removed))
        log.info("%s: %d files -> %d, %d snapshots expired, %d orphan files removed", name, len(before),
                 done[-1].files_after, expired, removed)
    return done


def _data_files(table) -> list:
    from pyiceberg.expressions import AlwaysTrue

    return list(table.scan(row_filter=AlwaysTrue()).plan_files()) if table.current_snapshot() else []


def _compact(table):
    """The table's small files rewritten together, and every file a delete file applies to
    rewritten with its deletes applied, the delete files then left out of the table (those whose
    data files a merge rewrote since, too)."""
    tasks = _data_files(table)
    deleting = [task for task in tasks if task.delete_files]
    small = [task for task in tasks if not task.delete_files and task.file.file_size_in_bytes < SMALL_FILE_BYTES]
    rewritten = [*deleting, *(small if len(small) >= 2 else [])]
    has_delete_files = snapshot_total(table, "total-delete-files") not in (0, None)
    if not rewritten and not has_delete_files:
        return table
    change = TableCommit(table, None)
    change.rewrite(rewritten, drop_delete_files=has_delete_files)
    change.commit()
    return change.table


def _expire(table, cut_snapshot: int, cutoff: dt.datetime) -> tuple[object, int]:
    """Expire the cut snapshot's ancestors older than ``cutoff``; returns the table and how many."""
    from pyiceberg.table.snapshots import ancestors_of

    snapshot = table.snapshot_by_id(cut_snapshot)
    if snapshot is None:
        return table, 0  # the table was made anew after the cut (a copy): its history is the new one's
    cutoff_ms = int(cutoff.timestamp() * 1000)
    old = [s.snapshot_id for s in ancestors_of(snapshot, table.metadata)
           if s.snapshot_id != cut_snapshot and s.timestamp_ms < cutoff_ms]
    if old:
        table.maintenance.expire_snapshots().by_ids(old).commit()
        table = table.refresh()
    return table, len(old)


def _referenced(table) -> set[str]:
    """The paths of every file the table's metadata names: the metadata files, each snapshot's
    manifest list, its manifests and their data files (deleted entries included)."""
    from pyiceberg.io.pyarrow import PyArrowFileIO

    io = table.io
    names = {table.metadata_location, *(m.metadata_file for m in table.metadata.metadata_log)}
    for snapshot in table.snapshots():
        names.add(snapshot.manifest_list)
        for manifest in snapshot.manifests(io):
            names.add(manifest.manifest_path)
            names.update(e.data_file.file_path for e in manifest.fetch_manifest_entry(io, discard_deleted=False))
    return {PyArrowFileIO.parse_location(n)[2] for n in names}


def _remove_orphans(table, cutoff: dt.datetime) -> int:
    from pyarrow.fs import FileSelector, FileType
    from pyiceberg.io.pyarrow import PyArrowFileIO

    scheme, netloc, path = PyArrowFileIO.parse_location(table.location())
    fs = table.io.fs_by_scheme(scheme, netloc)
    referenced = _referenced(table)
    removed = 0
    for info in fs.get_file_info(FileSelector(path, recursive=True, allow_not_found=True)):
        if info.type != FileType.File or info.path in referenced:
            continue
        if info.mtime is not None and info.mtime.replace(tzinfo=info.mtime.tzinfo or dt.timezone.utc) >= cutoff:
            continue  # young: a commit may be about to name it
        fs.delete_file(info.path)
        removed += 1
    return removed
