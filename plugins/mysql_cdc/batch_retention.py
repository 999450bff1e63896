"""How long change batches are kept: the pipelines file's ``batches: {retain: 7d}``.

A batch is deleted only when all of these hold (``retired``, a pure function of the stored
batches and the pipeline's state):

- it is older than ``retain``: its newest object was written more than that long ago (a batch an
  extraction, a snapshot or a replay is still writing, or has just rewritten, is young);
- it is applied: its range ends at or before the checkpoint (a batch read from an earlier leader
  counts as applied: after a failover the stream reads the new leader from the checkpoint);
- nothing still needs it: it is not the batch the checkpoint was last moved by, nor a snapshot
  whose copy is unfinished (``TablePositions.pending_batch``, which the next run finishes from it).

A directory without a manifest (a crashed extraction) holds no batch: it goes once it is older
than ``retain``. Nothing else under the pipeline's prefix is touched (the merge's scratch files
are its own to remove).

Each pass writes ``<pipeline>/batch-retention.json`` (``RetentionRecord``): what is kept (batches,
bytes: the CDC page shows it) and the ids deleted lately, so a merge asked for a deleted batch
says that retention deleted it and how to read its range again (``storage.read_manifest``).
A replay run never needs an old batch: it reads its range from the binlog again.

Why a task of the pipeline and not only an S3 lifecycle rule: a rule deletes by age alone, so a
pipeline stopped for longer than the rule would lose batches it has not applied yet, and an
unfinished snapshot's copy. A rule is a fine backstop set well above ``retain``
(docs/batch-format.md).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import asdict, dataclass, field

from .contracts import MANIFEST_NAME, ChangeBatch, Checkpoint, TablePositions, batch_prefix, batches_prefix
from .contracts.replay import same_leader
from .storage import ObjectStore, StoredObject

_DURATION = re.compile(r"^\s*(\d+)\s*([mhdw])\s*$")
_UNIT = {"m": dt.timedelta(minutes=1), "h": dt.timedelta(hours=1), "d": dt.timedelta(days=1),
         "w": dt.timedelta(weeks=1)}
MIN_RETAIN = dt.timedelta(hours=1)
RECORD_NAME = "batch-retention.json"
_RETIRED_IDS_KEPT = 10_000  # ids of deleted batches the record remembers (the latest)


def parse_retain(value: str) -> dt.timedelta:
    """``"7d"``, ``"36h"``, ``"90m"``, ``"2w"`` as a duration of at least ``MIN_RETAIN`` (a merge
    retried within the hour must still find its batch)."""
    match = _DURATION.match(value) if isinstance(value, str) else None
    if match is None:
        raise ValueError(f"must be a duration such as '7d', '36h' or '90m' (or null: keep every batch), got {value!r}")
    duration = int(match.group(1)) * _UNIT[match.group(2)]
    if duration < MIN_RETAIN:
        raise ValueError(f"must be at least 1h (a merge retried within the hour must still find its batch), "
                         f"got {value!r}")
    return duration


@dataclass(frozen=True)
class StoredBatch:
    """One directory under the pipeline's ``batches/``: its batch (None: no manifest, no batch), its
    bytes and when its newest object was written."""

    batch_id: str
    batch: ChangeBatch | None
    size: int
    newest: dt.datetime


def stored_batches(store: ObjectStore, pipeline: str) -> list[StoredBatch]:
    """Every batch directory of the pipeline, in id (binlog) order, from one listing plus a read
    of each manifest."""
    prefix = batches_prefix(pipeline)
    by_id: dict[str, list[StoredObject]] = {}
    for obj in store.list_objects(prefix):
        by_id.setdefault(obj.key[len(prefix):].split("/", 1)[0], []).append(obj)
    stored = []
    for batch_id, objects in sorted(by_id.items()):
        has_manifest = any(o.key == f"{batch_prefix(pipeline, batch_id)}/{MANIFEST_NAME}" for o in objects)
        batch = None
        if has_manifest:
            batch = ChangeBatch.from_json(store.get_bytes(f"{batch_prefix(pipeline, batch_id)}/{MANIFEST_NAME}"))
        stored.append(StoredBatch(batch_id, batch, sum(o.size for o in objects), max(o.modified for o in objects)))
    return stored


def _needed(batch: ChangeBatch, checkpoint: Checkpoint | None, positions: TablePositions) -> str | None:
    """Why the pipeline still needs a committed batch (None: it does not)."""
    if checkpoint is None:
        return "the pipeline has no checkpoint yet: nothing is applied"
    if batch.batch_id == positions.pending_batch():
        return "its snapshot copy is unfinished: the next run finishes it from this batch"
    if batch.batch_id == checkpoint.batch_id:
        return "the checkpoint was last moved by it"
    if same_leader(checkpoint, batch) and batch.end > checkpoint.position:
        return f"not applied yet (it ends at {batch.end}, the checkpoint is at {checkpoint.position})"
    return None


def retired(stored: list[StoredBatch], checkpoint: Checkpoint | None, positions: TablePositions,
            retain: dt.timedelta, now: dt.datetime) -> list[StoredBatch]:
    """The stored batches retention deletes now (the module's rules)."""
    old = [s for s in stored if s.newest <= now - retain]
    return [s for s in old if s.batch is None or _needed(s.batch, checkpoint, positions) is None]


@dataclass
class RetentionRecord:
    """``<pipeline>/batch-retention.json``: the last pass of retention over the pipeline's batches."""

    retain: str
    ran_at: str  # ISO 8601, UTC
    kept_batches: int
    kept_bytes: int
    deleted_batches: int  # by the last pass
    deleted_bytes: int
    retired_ids: list[str] = field(default_factory=list)  # the latest deleted ids, oldest first

    @staticmethod
    def key(pipeline: str) -> str:
        return f"{pipeline}/{RECORD_NAME}"

    @classmethod
    def read(cls, store: ObjectStore, pipeline: str) -> "RetentionRecord | None":
        key = cls.key(pipeline)
        return cls(**json.loads(store.get_bytes(key))) if store.exists(key) else None

    def write(self, store: ObjectStore, pipeline: str) -> None:
        store.put_bytes(self.key(pipeline), json.dumps(asdict(self), indent=1).encode())


def retire_batches(store: ObjectStore, pipeline: str, checkpoint: Checkpoint | None, positions: TablePositions,
                   retain: str, now: dt.datetime | None = None) -> RetentionRecord:
    """Delete the pipeline's batches ``retired`` says may go, and write the record of the pass.
    The checkpoint and positions are read by the caller before the listing: a batch committed
    after them is younger than ``retain`` and stays."""
    now = now or dt.datetime.now(dt.timezone.utc)
    stored = stored_batches(store, pipeline)
    going = retired(stored, checkpoint, positions, parse_retain(retain), now)
    for s in going:
        # the manifest first: from then on the batch does not exist, even if a delete fails halfway
        store.delete_prefix(f"{batch_prefix(pipeline, s.batch_id)}/{MANIFEST_NAME}")
        store.delete_prefix(batch_prefix(pipeline, s.batch_id) + "/")
    earlier = RetentionRecord.read(store, pipeline)
    retired_ids = (earlier.retired_ids if earlier else []) + [s.batch_id for s in going if s.batch is not None]
    going_ids = {s.batch_id for s in going}
    kept = [s for s in stored if s.batch_id not in going_ids]
    record = RetentionRecord(retain, now.isoformat(timespec="seconds"), len(kept), sum(s.size for s in kept),
                             len(going), sum(s.size for s in going), retired_ids[-_RETIRED_IDS_KEPT:])
    record.write(store, pipeline)
    return record


def deleted_batch_note(store: ObjectStore, pipeline: str, batch_id: str) -> str:
    """Why a batch's manifest may be missing, and what to do, for the error that says so."""
    record = RetentionRecord.read(store, pipeline)
    replay = "trigger a run of the pipeline's DAG with its range as 'start' and 'end' to read it from the binlog again"
    if record is not None and batch_id in record.retired_ids:
        return (f"it was applied and then deleted by the pipeline's retention setting `batches: {{retain: "
                f"{record.retain}}}`; {replay}, or raise `retain` in the pipelines file")
    why = "the extraction did not finish, or the URI is wrong"
    if record is not None:
        why += f", or it was deleted by the retention setting `batches: {{retain: {record.retain}}}`"
    return f"{why}; {replay}"
