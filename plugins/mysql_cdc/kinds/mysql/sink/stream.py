"""Small tables' statements sent to the follower while the segment's other tables are prepared.

The follower's own work for a small table (its DELETE and INSERT, ``statements``) is about a
millisecond; the driver's (reading, netting, encoding the table) a few. Sent only at the commit,
a batch of a thousand small tables paid both one after the other. Instead, the segment's first
statement table starts a ``StatementSender``: its thread begins the segment's transaction with
the checkpoint's lock (``Follower.lock_checkpoint``) and sends the tables' statements as they are
prepared, while the driver prepares the next ones (the thread waits on the server, outside the
GIL). The commit (``Follower.apply_rows``) then waits for the last statements, checks that the
checkpoint the lock found is the one the job planned with, applies the other tables and commits:
still one transaction, so a crash at any point leaves the follower as it was.

Whatever sends what, nothing is committed but by ``apply_rows``: a failed segment is rolled back
(``MySQLSink.discard_segment``) before its session does anything else.
"""

from __future__ import annotations

import queue
import threading
from typing import TYPE_CHECKING

from ....contracts import Checkpoint
from .rows import apply_statements
from .tables import StagedTable

if TYPE_CHECKING:
    from .follower import Follower

_DONE = None  # put last: no more tables


class StatementSender:
    """A thread that owns the follower session from the segment's first statement table to the
    commit: it begins the transaction, then sends whatever tables are ready, as many per round
    trip as ``limit`` bytes of SQL allow."""

    def __init__(self, follower: Follower, pipeline: str, limit: int):
        self.follower, self.pipeline, self.limit = follower, pipeline, limit
        self.checkpoint: Checkpoint | None = None  # as the transaction's lock found it
        self.applied: dict[str, tuple[int, float]] = {}
        self.error: BaseException | None = None
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._run, name=f"mysql-cdc statements {pipeline}", daemon=True)
        self._thread.start()

    def put(self, staged: StagedTable) -> None:
        self._queue.put(staged)

    def finish(self) -> dict[str, tuple[int, float]]:
        """Wait until every table put is sent; returns (rows written, seconds) per table. Raises
        the first error (a statement refused, a count off): the transaction is then the caller's
        to roll back."""
        self._queue.put(_DONE)
        self._thread.join()
        if self.error is not None:
            raise self.error
        return self.applied

    def _ready(self, first: StagedTable) -> tuple[list[StagedTable], bool]:
        """``first`` and the tables after it, until a round trip's worth (a quarter of ``limit``
        bytes of SQL) is together; and whether the last table has been put. Round trips of a few
        tables would each wait for the GIL the preparing threads hold (up to Python's 5 ms switch
        interval): a thousand of them cost more than the follower's work."""
        tables, size = [first], first.statements.size
        while size < self.limit // 4:
            staged = self._queue.get()
            if staged is _DONE:
                return tables, True
            tables.append(staged)
            size += staged.statements.size
        return tables, False

    def _run(self) -> None:
        try:
            self.checkpoint = self.follower.lock_checkpoint(self.pipeline)
            with self.follower.conn.cursor() as cur:
                while True:
                    first = self._queue.get()
                    if first is _DONE:
                        return
                    tables, done = self._ready(first)
                    for name, (rows, seconds) in apply_statements(cur, tables, self.limit).items():
                        before = self.applied.get(name, (0, 0.0))
                        self.applied[name] = (before[0] + rows, before[1] + seconds)
                    if done:
                        return
        except BaseException as exc:  # noqa: BLE001 - handed to finish(), in the caller's thread
            self.error = exc
