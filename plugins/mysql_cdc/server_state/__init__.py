"""A pipeline's state in a MySQL/MariaDB server: its ``_mysql_cdc`` schema (checkpoint, table
positions, records of runs), for the follower kinds whose state lives in such a server.

A MySQL follower keeps it in the follower itself: beside the rows, so the merge job moves the
checkpoint in the transaction that writes them (``kinds.mysql.sink`` uses ``checkpoint``'s
functions on its own connection). An Iceberg follower keeps it on its catalog's server
(``kinds.iceberg.state``), with the consistent cut beside the checkpoint.
"""

from __future__ import annotations

import datetime as dt
from contextlib import contextmanager
from typing import Iterator

from ..contracts import BinlogPosition, ChangeBatch, Checkpoint, TablePosition, TablePositions
from ..contracts.history import BatchRecord, FailedTry
from ..contracts.verification import VerificationResult
from ..mysql_server import MySQLSettings
from ..state_store import StateStore
from . import checkpoint as _checkpoint
from . import history as _history
from .schema import STATE_SCHEMA


class MySQLStateStore(StateStore):
    kind = "mysql"

    def __init__(self, settings: MySQLSettings):
        self.settings = settings

    @classmethod
    def from_settings(cls, settings) -> "MySQLStateStore":
        """From a ``FollowerSpec``'s settings (``MySQLSettings``'s fields)."""
        return cls(MySQLSettings(**settings))

    @contextmanager
    def _session(self) -> Iterator:
        """A follower session for one unit of work; a connection failure says it is the follower."""
        import pymysql

        try:
            conn = self.settings.connect()
        except pymysql.err.OperationalError as exc:
            raise ConnectionError(f"cannot connect to {self.settings.describe('follower')}: {exc.args[-1]}") from None
        try:
            yield conn
        finally:
            conn.close()

    def describe(self) -> str:
        return f"`{STATE_SCHEMA}` on {self.settings.describe('follower')}"

    # -- checkpoint and table positions -----------------------------------------------------------

    def checkpoint(self, pipeline: str) -> Checkpoint | None:
        with self._session() as conn:
            return _checkpoint.read_checkpoint(conn, pipeline)

    def table_positions(self, pipeline: str) -> TablePositions:
        with self._session() as conn:
            return _checkpoint.read_table_positions(conn, pipeline)

    def initialize(self, first: Checkpoint) -> Checkpoint:
        with self._session() as conn:
            return _checkpoint.initialize_checkpoint(conn, first)

    def move(self, expected: Checkpoint, to: Checkpoint) -> bool:
        with self._session() as conn:
            return _checkpoint.move_checkpoint(conn, expected, to)

    def start_snapshot(self, batch: ChangeBatch) -> Checkpoint:
        with self._session() as conn:
            return _checkpoint.start_snapshot(conn, batch)

    def rebase(self, expected: Checkpoint, position: BinlogPosition, leader_id: str) -> list[TablePosition]:
        with self._session() as conn:
            return _checkpoint.rebase_checkpoint(conn, expected, position, leader_id)

    # -- records of runs --------------------------------------------------------------------------

    def record_extracted(self, record: BatchRecord) -> None:
        with self._session() as conn:
            _history.record_extracted(conn, record)

    def record_merged(self, pipeline: str, run_id: str, net_rows: int, seconds: float) -> None:
        with self._session() as conn:
            _history.record_merged(conn, pipeline, run_id, net_rows, seconds)

    def record_failed(self, pipeline: str, run_id: str, kind: str, error: str) -> None:
        with self._session() as conn:
            _history.record_failed(conn, pipeline, run_id, kind, error)

    def record_failed_try(self, failed: FailedTry) -> None:
        with self._session() as conn:
            _history.record_failed_try(conn, failed)

    def history(self, pipeline: str, limit: int = 50) -> list[BatchRecord]:
        with self._session() as conn:
            return _history.read_history(conn, pipeline, limit)

    def last_applied_time(self, pipeline: str) -> dt.datetime | None:
        with self._session() as conn:
            return _history.last_applied_time(conn, pipeline)

    def record_verification(self, result: VerificationResult) -> None:
        with self._session() as conn:
            _history.record_verification(conn, result)

    def latest_verification(self, pipeline: str) -> VerificationResult | None:
        with self._session() as conn:
            return _history.latest_verification(conn, pipeline)
