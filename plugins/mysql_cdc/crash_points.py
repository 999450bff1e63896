"""Fault injection, a test hook: ``MYSQL_CDC_CRASH_AT=<point>`` makes the process die at that
point with ``os._exit(137)`` (what a SIGKILL or an OOM kill looks like: no cleanup, no rollback
from our side, open connections simply vanish). The tests use it to prove exactly-once apply and
a copy that resumes.

Merge points: ``after_staging`` (staging tables and load files prepared, follower transaction not
begun), ``before_commit`` (follower transaction done but not committed), ``after_ddl`` (a DDL ran,
the checkpoint still carries its pending marker; or a DDL replayed ahead of rows, the checkpoint
not moved: ``merge.joined``), ``before_swap`` (a snapshot's shadow table
loaded, the table's position marked swapping), ``after_swap`` (the shadow renamed into the
table's place, the table's position not yet done), ``between_batches`` (a run's copy applied,
its catch-up not begun), ``in_executor`` (an executor's Python worker reading the batch's
files: the executor dies, Spark's task fails and the job with it). A lake follower's points (Delta, Iceberg): ``between_tables`` (a table of a
segment committed: its tables commit concurrently, so others may be committed or under way), ``before_checkpoint`` (every table committed, the checkpoint
not), ``before_catalog_sync`` (a Delta follower with a catalog: the checkpoint moved, the catalog's
entries not yet synced to it). Snapshot copy points: ``copy_planned`` (the
plan written, no chunk copied), ``copy_after_chunk`` (one chunk's record written),
``copy_before_manifest`` (every chunk and catch-up written, the manifest not). ``<point>@<n>``
crashes the n-th time the process reaches the point (``between_tables@3``: after a segment's third
table), so a test can stop at every step of a loop. Leave the variable unset in production.
"""

from __future__ import annotations

import os
import sys
import threading

CRASH_ENV = "MYSQL_CDC_CRASH_AT"
CRASH_POINTS = ("after_staging", "before_commit", "after_ddl", "before_swap", "after_swap", "between_batches",
                "in_executor", "between_tables", "before_checkpoint", "before_catalog_sync", "copy_planned",
                "copy_after_chunk", "copy_before_manifest")


_reached: dict[str, int] = {}  # point -> times this process reached it
_counting = threading.Lock()  # a point may be reached from several threads (a segment's commits)


def crash_point(name: str) -> None:
    assert name in CRASH_POINTS, name
    wanted = os.environ.get(CRASH_ENV)
    if wanted is None or wanted.partition("@")[0] != name:
        return
    with _counting:
        _reached[name] = _reached.get(name, 0) + 1
        reached = _reached[name]
    point, _, nth = wanted.partition("@")
    if reached == int(nth or 1):
        sys.stderr.write(f"{CRASH_ENV}={wanted}: crashing on purpose (test hook)\n")
        sys.stderr.flush()
        os._exit(137)
