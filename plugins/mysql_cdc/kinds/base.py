"""What a follower kind is: ``FollowerKind``, the one object everything outside a kind's package
asks (the registry in ``mysql_cdc.kinds`` finds it by name).

A kind's package owns every part of that kind of follower:

- ``sink``: what the merge job writes a batch with (``merge.sink.Sink``), Spark side only;
- ``state``: its ``StateStore`` (checkpoint, table positions, history, verification results);
- ``hook``: its Airflow-side hook: the spec the merge job gets, the state store, the verification
  side, the tables a batch must copy again;
- ``submit``: what its merge job needs on the spark-submit command line (jars, properties);
- its maintenance job, if it has one, and its type mapping.

The methods below import the heavy parts on first use, so the Airflow side never imports Spark and
the Spark job never imports Airflow.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from ..contracts import ChangeBatch
    from ..merge.sink import Sink
    from ..state_store import StateStore


@dataclass(frozen=True)
class SubmitNeeds:
    """What a follower kind's merge job needs on its spark-submit command line: jars (local
    paths) and Spark properties. Never a secret: the command line is logged."""

    jars: tuple[str, ...] = ()
    conf: tuple[tuple[str, str], ...] = ()


def netted_by_spark(batch: "ChangeBatch", driver_net_rows: int) -> str | None:
    """Why a batch's rows need Spark, or None: a table with more than ``driver_net_rows`` change
    rows in a segment is read and netted by the executors (``merge.job``), whatever the kind."""
    for segment in batch.segments:
        big = [t.qualified_name for t in segment.tables if t.row_count > driver_net_rows] \
            if segment.kind == "rows" else []
        if big:
            return (f"{', '.join(big[:3])}{' and more' if len(big) > 3 else ''}: more than "
                    f"{driver_net_rows:,} change rows in a segment (spark.mysql_cdc.driverNetRows)")
    return None


class FollowerKind(ABC):
    """One kind of follower (a MySQL server, a Delta Lake, ...)."""

    name: str
    # the pipelines file's keys of the kind's ``follower:`` section, besides ``kind``
    config_keys: frozenset[str] = frozenset()
    # whether the kind has a maintenance job (compaction, expiry): the DAG file then builds the
    # pipeline's ``<name>_maintain`` DAG, which runs ``maintain`` in ``spark_jobs/maintain_follower.py``
    maintained: bool = False

    # -- the pipelines file and the Airflow side -----------------------------------------------------

    @abstractmethod
    def reference(self, section: Mapping[str, Any], aws_conn_id: str | None) -> dict[str, Any]:
        """The follower as operators and triggers carry it (JSON-safe, no secret), from the
        pipelines file's checked ``follower`` section; a ``ValueError`` names the bad key."""

    @abstractmethod
    def describe(self, reference: Mapping[str, Any]) -> str:
        """The follower in a line for people (``delta at s3://lake``)."""

    def table_uri(self, reference: Mapping[str, Any], table: str) -> str:
        """Where a reader finds the follower's table ``db.t`` (a lake's path; a server's name)."""
        return table

    @abstractmethod
    def hook(self, reference: Mapping[str, Any]) -> Any:
        """The kind's Airflow hook for ``reference`` (``hooks.follower.FollowerHookBase``)."""

    # -- the merge job ---------------------------------------------------------------------------

    @abstractmethod
    def state_store(self, settings: Mapping[str, Any]) -> "StateStore":
        """The kind's state store, from a ``FollowerSpec``'s settings."""

    @abstractmethod
    def sink(self, settings: Mapping[str, Any], leader_flavor: str | None) -> "Sink":
        """The kind's sink (open it with ``with``); ``leader_flavor``: the batch's server flavor."""

    def submit_needs(self, spark_line: str) -> SubmitNeeds:
        """The jars and Spark properties its merge job needs on Spark ``spark_line`` (``"4.1"``;
        ``mysql_cdc.spark_lines``): none by default."""
        return SubmitNeeds()

    def spark_needed(self, batch: "ChangeBatch", driver_net_rows: int) -> str | None:
        """Why the merge job needs Spark for ``batch`` (a phrase for the task log), or None when its
        sink applies every segment of it without ever starting a session, so the merge task may
        run the job without spark-submit (``merge: {spark: when_needed}``). ``driver_net_rows``:
        the job's ``spark.mysql_cdc.driverNetRows``. The job stops, changing nothing more, if it
        reaches for Spark all the same (``merge.session.SparkRefused``). By default always."""
        return f"a {self.name} follower's merge runs in Spark"

    def maintain(self, spark: Any, settings: Mapping[str, Any], pipeline: str, retain_hours: float) -> list:
        """Run the kind's maintenance in the maintenance job; returns what was done per table."""
        raise NotImplementedError(f"a {self.name} follower has no maintenance job")
