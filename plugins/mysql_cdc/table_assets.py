"""Airflow asset events for the follower tables a merge changed, so a downstream DAG schedules on
``shop.orders`` being updated (``schedule=[Asset("s3://lake/cdc/shop/orders")]``).

The tables a pipeline will change are not known when the DAG file is parsed, so the merge task's
outlet is an ``AssetAlias`` (``pipeline_alias``), and the task adds one asset event per table it
changed through it; Airflow then creates the table's asset on its first event and schedules the
DAGs that wait on it (or on the alias: every table of the pipeline). An asset's URI is the follower
table as its kind names it (``FollowerHookBase.table_uri``); the event's extra says what happened.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from .contracts import ChangeBatch, DdlSegment
from .merge.report import MergeSummary


def pipeline_alias(pipeline: str) -> str:
    """The name of the asset alias the merge task of ``pipeline`` emits its tables' events through."""
    return f"mysql-cdc/{pipeline}"


@dataclass
class TableChange:
    """What one merge task did to one follower table, over the batches it applied."""

    table: str  # the leader's db.table
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    copied: bool = False  # copied from the leader (a snapshot, a resnapshot, a copy within the run)
    ddl: list[str] = field(default_factory=list)  # DDL statements' actions that targeted it, in order

    def extra(self, pipeline: str, position: str, batches: list[str], version: int | None) -> dict[str, Any]:
        extra = {"pipeline": pipeline, "table": self.table, "position": position, "batches": batches,
                 "inserted": self.inserted, "updated": self.updated, "deleted": self.deleted,
                 "copied": self.copied, "ddl": self.ddl}
        if version is not None:
            extra["version"] = version  # the table's version at the batch's end (a lake's consistent cut)
        return extra


def changed_tables(summaries: Iterable[MergeSummary], batches: Iterable[ChangeBatch]) -> dict[str, TableChange]:
    """The tables the summaries' batches changed (db.table -> what happened), in the order first
    met: rows applied (netting to at least one row inserted, updated or deleted: changes that
    cancel out leave a table as it was), tables copied, and tables a DDL statement targeted."""
    changes: dict[str, TableChange] = {}
    for summary in summaries:
        for report in summary.tables:
            if report.kind == "snapshot" or report.inserted or report.updated or report.deleted:
                change = changes.setdefault(report.table, TableChange(report.table))
                change.inserted += report.inserted
                change.updated += report.updated
                change.deleted += report.deleted
                change.copied = change.copied or report.kind == "snapshot"
    for batch in batches:
        for segment in batch.segments:
            if isinstance(segment, DdlSegment):
                for target in segment.targets:
                    if target.table is not None:
                        name = f"{target.database}.{target.table}"
                        changes.setdefault(name, TableChange(name)).ddl.append(segment.action)
    return changes


def table_events(pipeline: str, summaries: list[MergeSummary], batches: list[ChangeBatch],
                 table_uri: Callable[[str, str], str],
                 versions: Mapping[str, int] | None) -> list[tuple[str, dict[str, Any]]]:
    """(asset URI, event extra) for each table the merge changed; ``versions``: the tables'
    versions after it (a lake's cut), None for a follower without versions."""
    applied = [s for s in summaries if not s.noop]
    if not applied:
        return []
    position = applied[-1].checkpoint
    batch_ids = [s.batch_id for s in applied]
    return [(table_uri(*name.split(".", 1)),
             change.extra(pipeline, position, batch_ids, (versions or {}).get(name)))
            for name, change in changed_tables(applied, [b for b in batches if b.batch_id in batch_ids]).items()]
