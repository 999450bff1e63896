"""The sink's interface: the narrow commit API the merge job applies a batch through."""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Callable, Generic, Mapping, TypeVar

from ..contracts import ChangeBatch, Checkpoint, DdlSegment, RowSegment, SnapshotSegment, TableChanges
from ..storage import ObjectStore, StorageSpec

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from . import netting
    from .report import TableReport

log = logging.getLogger("mysql_cdc.merge")

# what a sink's ``check_tables`` returns for a table, and its writer takes back with the table's rows
Target = TypeVar("Target")


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
    the Parquet files as they are (``spark.read``). ``on_driver``: whether the job's driver may read
    those files itself, a unit at a time, rather than Spark's executors (``driverNetRows`` > 0: a
    copy streams, so its size needs no limit there; 0 is a driver that only drives)."""

    segment: SnapshotSegment
    caught_up: bool
    rows: Callable[[], tuple["DataFrame | None", tuple[int, int, int]]]
    on_driver: bool = False


@dataclass(frozen=True)
class ArrowRows:
    """A table's change rows and their net rows, netted here on the driver (``merge.netting``):
    ``netted`` as the netting left them (a net table, or picks of the change rows:
    ``netting.PickedNet``), ``net`` as a table, made from the picks on first use."""

    changes: "pa.Table"
    netted: "netting.Net"

    @cached_property
    def net(self) -> "pa.Table":
        from . import netting

        return netting.net_table(self.netted)


@dataclass(frozen=True)
class SparkRows:
    """A table's change rows and their net rows, read and netted by Spark's executors
    (``merge.transforms``)."""

    changes: "DataFrame"
    net: "DataFrame"


@dataclass(frozen=True)
class NetRows(Generic[Target]):
    """One table's rows in a row segment, as the merge hands them to a ``SegmentWriter``: its change
    rows after the follower's position and their net rows (one per key, with its op and count,
    ``contracts.change_row``), and the report the writer fills (inserted, updated, deleted).

    Where they were netted is the merge's choice, not the sink's: on the driver up to
    ``merge.netting.DRIVER_NET_ROWS`` change rows (``rows`` is ``ArrowRows``), by Spark's executors
    above it (``SparkRows``). A writer works in the form it likes: ``on_driver()`` gives the Arrow
    rows when there are any, ``in_spark()`` always gives DataFrames (made from the Arrow rows when
    the driver netted them)."""

    index: int  # in the segment's tables
    table: TableChanges
    target: Target  # what ``Sink.check_tables`` returned for the table
    rows: ArrowRows | SparkRows
    report: "TableReport"
    _in_spark: list = field(default_factory=list, compare=False, repr=False)  # ``in_spark``'s, once made

    def on_driver(self) -> ArrowRows | None:
        return self.rows if isinstance(self.rows, ArrowRows) else None

    def arrow_changes(self, without_inserts: bool = False) -> "pa.Table":
        """The change rows in Arrow: the driver's as they are, or Spark's collected to the driver
        (``without_inserts``: all but the inserts, which a reader of deletes and key moves, such as
        the soft-delete marks, does not need)."""
        if isinstance(self.rows, ArrowRows):
            return self.rows.changes
        changes = self.rows.changes
        if without_inserts:
            from pyspark.sql import functions as F

            from ..contracts import change_row as cr

            changes = changes.where(F.col(cr.OP) != cr.INSERT)
        return changes.toArrow()

    def in_spark(self, spark: "SparkSession") -> SparkRows:
        if isinstance(self.rows, SparkRows):
            return self.rows
        from .spark_read import spark_schema

        if not self._in_spark:
            # the schema the executors' read gives the same columns (an Arrow timestamp without a
            # zone is TIMESTAMP_NTZ there; createDataFrame alone would make it a zoned TIMESTAMP)
            self._in_spark.append(SparkRows(*(spark.createDataFrame(t, schema=spark_schema(t.schema))
                                              for t in (self.rows.changes, self.rows.net))))
        return self._in_spark[0]


class SegmentWriter(ABC, Generic[Target]):
    """One row segment's commit in the making, opened by ``Sink.segment`` with the checkpoint the
    segment starts from (``expected``). ``apply`` stages tables' net rows; ``commit`` applies every
    staged table and moves the checkpoint to ``done`` as one commit (refused when the checkpoint is
    no longer ``expected``). Leaving the ``with`` drops what was staged, after the commit or after a
    failure: nothing staged reaches the follower without the commit."""

    def __init__(self, job: BatchJob, segment: RowSegment, expected: Checkpoint):
        self.job = job
        self.segment = segment
        self.expected = expected

    @abstractmethod
    def apply(self, tables: list[NetRows[Target]]) -> None:
        """Stage these tables' net rows for the commit, filling their reports' counts. Called from
        several threads at once; the tables of one call were netted together (a writer may prepare
        them in one pass)."""

    @abstractmethod
    def commit(self, done: Checkpoint) -> dict[str, tuple[int, float]]:
        """Apply every staged table and move the checkpoint from ``expected`` to ``done``, as one
        commit; returns (rows written, seconds) per table (``TableChanges.qualified_name``)."""

    @abstractmethod
    def discard(self) -> None:
        """Drop what was staged (called when the ``with`` ends)."""

    def __enter__(self) -> "SegmentWriter[Target]":
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.discard()
        except Exception:  # noqa: BLE001 - the next attempt drops it; keep the real error
            log.warning("could not drop what was prepared for segment %d", self.segment.index, exc_info=True)


class Sink(ABC, Generic[Target]):
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

    def publish(self, pipeline: str) -> None:
        """Make what readers look the tables up in (a catalog) name the committed cut's tables. Called
        after every merge of a batch, a no-op replay included: a crash after the checkpoint moved
        and before this ran is repaired by the retry. Nothing by default (a kind whose catalog is
        committed with its tables)."""

    # -- row segments -----------------------------------------------------------------------------

    @abstractmethod
    def check_table(self, changes: TableChanges) -> Target:
        """The target of a table's changes, checked against the batch's columns (an
        ``merge.errors.FollowerSchemaError`` naming the repair when it cannot take them). What is
        returned is the sink's own: it comes back with the table's rows (``NetRows.target``)."""

    def check_tables(self, tables: list[TableChanges]) -> list[Target]:
        """``check_table`` of several tables (a sink may ask its follower once for all)."""
        return [self.check_table(t) for t in tables]

    def change_metadata(self, table: TableChanges) -> frozenset[str]:
        """Change-row metadata columns (``contracts.change_row``) this sink wants in the table's
        change rows beyond the merge's own (a changelog keeps them all); none by default. Naming
        ``_before`` asks for the whole before-image (``merge.reader.change_schema``)."""
        return frozenset()

    @abstractmethod
    def segment(self, job: BatchJob, segment: RowSegment, expected: Checkpoint) -> SegmentWriter[Target]:
        """The writer of one row segment's commit (``with sink.segment(...) as w: w.apply(rows);
        w.commit(done)``)."""

    # -- DDL and copies ---------------------------------------------------------------------------

    @abstractmethod
    def replay_ddl(self, batch: ChangeBatch, segment: DdlSegment, checkpoint: Checkpoint) -> Checkpoint:
        """Apply one DDL statement exactly once; returns the checkpoint after it."""

    def replays_ahead(self, segment: DdlSegment) -> bool:
        """Whether this sink may replay the statement ahead of row changes before it in the binlog
        (on other tables: ``merge.joined``), leaving the checkpoint where it is for the commit of
        the rows after it to move (``replay_ddl_ahead``). Only a sink whose replay of the statement
        is harmless when done again, after later rows of its tables were committed, can: a crash
        before that commit makes the retry replay it again from the old checkpoint. No by default:
        the sink then gets every segment in the batch's order."""
        return False

    def replay_ddl_ahead(self, batch: ChangeBatch, segment: DdlSegment, expected: Checkpoint) -> None:
        """Replay the statement now, without moving the checkpoint from ``expected``: the next row
        segment's commit (``SegmentWriter.commit``) records it with its own rows. Only called for a
        statement the sink ``replays_ahead``."""
        raise NotImplementedError(f"{type(self).__name__} replays no DDL ahead of rows")

    @abstractmethod
    def replace_table(self, job: BatchJob, copy: TableCopy, checkpoint: Checkpoint, done: Checkpoint | None,
                      report: "TableReport") -> None:
        """Put the copy in the table's place (creating the table from the leader's definition when it
        is missing or different) and record the table's position at the copy's; ``done`` also moves
        the pipeline's checkpoint (the last copy of a full snapshot). Readers see the old rows or
        the copy, never a part of it; a retry after a crash at any step finishes or redoes it."""
