"""The sink's interface: the narrow commit API the merge job applies a batch through."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ..contracts import ChangeBatch, Checkpoint, DdlSegment, RowSegment, SnapshotSegment, TableChanges
from ..storage import ObjectStore, StorageSpec

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from .report import TableReport


@dataclass(frozen=True)
class BatchJob:
    """The batch being applied, as a sink sees it: Spark (started on first use), the batch store
    (open, and as a spec for executors) and the batch."""

    spark: Callable[[], "SparkSession"]
    storage: StorageSpec
    store: ObjectStore
    batch: ChangeBatch


@dataclass(frozen=True)
class TableCopy:
    """A snapshot's copy of one table, as the merge job hands it to a sink. ``rows()``: the copy
    caught up to one position (its chunks with the changes each lacks folded in), as a
    DataFrame of inserts (None: nothing to load), and the catch-up's inserted, updated and
    deleted keys. ``caught_up``: whether there is a catch-up at all; without one a sink may load
    the Parquet files as they are (``spark.read``)."""

    segment: SnapshotSegment
    caught_up: bool
    rows: Callable[[], tuple["DataFrame | None", tuple[int, int, int]]]


@dataclass(frozen=True)
class NetTable:
    """One table of a row segment netted on the driver (``merge.netting``), as ``stage_net_tables``
    takes it."""

    index: int  # in the segment's tables
    target: Any  # what ``check_table`` returned for it
    changes: "pa.Table"  # its change rows after the follower's position
    net: "pa.Table"  # their net rows
    report: "TableReport"


class Sink(ABC):
    """One follower, written by one merge job. Opened per job (``with``); every commit carries
    the checkpoint it expects to find (``expected``) and the one it leaves (``done``), so two
    merges of one pipeline cannot both move it, and the checkpoint always covers exactly the
    rows committed with it. A sink writes; where the follower stands is read from the kind's
    ``StateStore``."""

    @classmethod
    @abstractmethod
    def from_settings(cls, settings: Mapping[str, Any], leader_flavor: str | None) -> "Sink":
        """From a ``FollowerSpec``'s settings; ``leader_flavor``: the batch's server flavor."""

    def close(self) -> None:
        pass

    def __enter__(self) -> "Sink":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- the job ------------------------------------------------------------------------------------

    @abstractmethod
    def begin(self, job: BatchJob) -> None:
        """Remove what a crashed attempt of the pipeline left behind (staging, scratch files)."""

    @abstractmethod
    def advance(self, expected: Checkpoint, done: Checkpoint) -> None:
        """Move the checkpoint alone (the batch ends with transactions that touched no captured
        table)."""

    # -- row segments -----------------------------------------------------------------------------

    @abstractmethod
    def check_table(self, changes: TableChanges) -> Any:
        """The target of a table's changes, checked against the batch's columns (an
        ``merge.errors.FollowerSchemaError`` naming the repair when it cannot take them). What is
        returned is the sink's own and goes back to it in ``stage_rows``."""

    def check_tables(self, tables: list[TableChanges]) -> list[Any]:
        """``check_table`` of several tables (a sink may ask its follower once for all)."""
        return [self.check_table(t) for t in tables]

    def change_metadata(self, table: TableChanges) -> frozenset[str]:
        """Change-row metadata columns (``contracts.change_row``) this sink wants in the table's
        change rows beyond the merge's own (a changelog keeps them all); none by default. Naming
        ``_before`` asks for the whole before-image (``merge.reader.change_schema``)."""
        return frozenset()

    @abstractmethod
    def stage_rows(self, job: BatchJob, segment: RowSegment, index: int, target: Any, changes: "DataFrame",
                   net: "DataFrame", report: "TableReport") -> Any:
        """Prepare one table's net rows (``net``: ``merge.transforms.net_changes`` of ``changes``,
        its change rows after the follower's position) for the segment's commit, filling the
        report's inserted, updated and deleted counts; called for several tables at once, from
        threads. Returns what ``commit_rows`` takes for the table."""

    def takes_driver_rows(self, table: TableChanges) -> bool:
        """Whether ``stage_net_tables`` takes this table's rows netted on the driver (``merge.netting``:
        the merge job then runs no read-and-net Spark job for it). The job asks only for tables
        within its own limit (``netting.DRIVER_NET_ROWS``); a sink says where its own handover
        stops paying. None by default."""
        return False

    def stage_net_tables(self, job: BatchJob, segment: RowSegment, tables: list["NetTable"]) -> list[Any]:
        """``stage_rows`` for tables netted on the driver, several at once (a sink may prepare them in
        one pass): each ``NetTable`` holds, as Arrow, what ``stage_rows`` gets as DataFrames. Returns
        what ``commit_rows`` takes for each table, in their order. Only called for tables
        ``takes_driver_rows`` takes."""
        raise NotImplementedError(f"{type(self).__name__} stages net rows from Spark only")

    @abstractmethod
    def commit_rows(self, job: BatchJob, expected: Checkpoint, staged: list, done: Checkpoint) -> dict[str, tuple[int, float]]:
        """Apply every staged table of the segment and move the checkpoint to ``done``, as one
        commit; returns (rows written, seconds) per table (``TableChanges.qualified_name``)."""

    @abstractmethod
    def discard_segment(self, job: BatchJob, segment: RowSegment | SnapshotSegment) -> None:
        """Drop what was prepared for the segment (after its commit, or after a failure)."""

    # -- DDL and copies ---------------------------------------------------------------------------

    @abstractmethod
    def replay_ddl(self, batch: ChangeBatch, segment: DdlSegment, checkpoint: Checkpoint) -> Checkpoint:
        """Apply one DDL statement exactly once; returns the checkpoint after it."""

    @abstractmethod
    def replace_table(self, job: BatchJob, copy: TableCopy, checkpoint: Checkpoint, done: Checkpoint | None,
                      report: "TableReport") -> None:
        """Put the copy in the table's place (creating the table from the leader's definition when it
        is missing or different) and record the table's position at the copy's; ``done`` also moves
        the pipeline's checkpoint (the last copy of a full snapshot). Readers see the old rows or
        the copy, never a part of it; a retry after a crash at any step finishes or redoes it."""
