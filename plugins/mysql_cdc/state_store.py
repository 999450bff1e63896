"""The state store's interface: one narrow API, one implementation per follower kind."""

from __future__ import annotations

import datetime as dt
from abc import ABC, abstractmethod
from typing import Any, Mapping

from .contracts import BinlogPosition, ChangeBatch, Checkpoint, TablePosition, TablePositions
from .contracts.history import BatchRecord, FailedTry
from .contracts.verification import VerificationResult


class StateStore(ABC):
    """A pipeline's state as the Airflow side sees it. Every method is one short unit of work
    that opens what it needs and commits what it writes; nothing is held between calls, so a
    store can be built in a task, a trigger's worker thread or a web request alike.

    The checkpoint moves here only where no follower row moves with it (its creation, an empty
    batch, a failover's rebase, a snapshot's start): the merge job moves it with the rows."""

    kind: str = ""

    @classmethod
    @abstractmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> "StateStore":
        """From a ``FollowerSpec``'s settings."""

    # -- checkpoint and table positions -----------------------------------------------------------

    @abstractmethod
    def checkpoint(self, pipeline: str) -> Checkpoint | None:
        """The pipeline's checkpoint; None before its first run created one."""

    @abstractmethod
    def table_positions(self, pipeline: str) -> TablePositions:
        """Where the tables a snapshot copied stand (none before any snapshot)."""

    @abstractmethod
    def initialize(self, first: Checkpoint) -> Checkpoint:
        """Create the pipeline's checkpoint as ``first`` unless one exists (two first runs may
        race: the one that comes second keeps the first one's); returns the one in force."""

    @abstractmethod
    def move(self, expected: Checkpoint, to: Checkpoint) -> bool:
        """Compare-and-set: move the checkpoint to ``to`` if it is still ``expected`` (position and
        pending DDL); False if it moved meanwhile."""

    @abstractmethod
    def start_snapshot(self, batch: ChangeBatch) -> Checkpoint:
        """Record a snapshot batch as unfinished: its tables ``copying`` (which holds back every
        stream batch until the copy is applied) and a first checkpoint at its position when the
        pipeline has none; returns the checkpoint in force."""

    @abstractmethod
    def rebase(self, expected: Checkpoint, position: BinlogPosition, leader_id: str) -> list[TablePosition]:
        """Express the checkpoint in another leader's binlog (a failover; ``position`` is where
        its GTID set is there), if it is still ``expected``; the table positions, positions on
        the old leader, are dropped, and those whose copies must be made again are returned."""

    # -- records of runs --------------------------------------------------------------------------

    @abstractmethod
    def record_extracted(self, record: BatchRecord) -> None:
        """The extract task's row of the run (a retried run overwrites its earlier attempt)."""

    @abstractmethod
    def record_merged(self, pipeline: str, run_id: str, net_rows: int, seconds: float) -> None:
        """Complete the run's row: merged, with the rows written and the seconds it took."""

    @abstractmethod
    def record_failed(self, pipeline: str, run_id: str, kind: str, error: str) -> None:
        """A task of the run failed: its row (created if the extract never wrote one) says why."""

    @abstractmethod
    def record_failed_try(self, failed: FailedTry) -> None:
        """A try of a run's task failed, retried or not."""

    @abstractmethod
    def history(self, pipeline: str, limit: int = 50) -> list[BatchRecord]:
        """The latest runs, newest first, each with its failed tries."""

    @abstractmethod
    def last_applied_time(self, pipeline: str) -> dt.datetime | None:
        """The leader's commit time (UTC) of the last transaction the follower applied, as far as
        the history knows it: the ``end_time`` of the latest merged stream batch."""

    @abstractmethod
    def record_verification(self, result: VerificationResult) -> None:
        """Keep a verification's result."""

    @abstractmethod
    def latest_verification(self, pipeline: str) -> VerificationResult | None:
        """The last verification's result, if any ran."""

    def table_versions(self, pipeline: str) -> dict[str, int] | None:
        """Each table's version at the checkpoint, for a follower whose tables have versions (a
        Delta Lake's consistent cut); None for one whose tables do not."""
        return None
