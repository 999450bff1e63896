"""What a merge did, per table: the job's summary, and the lines a user reads in the task log.

The merge job writes its outcome as JSON (``JobOutcome``: the summary of each batch it applied and,
when it failed, its error and whether a retry can fix it) to the file ``MYSQL_CDC_SUMMARY_FILE``
names, and each summary as a log line; the merge task reads it back, logs ``describe()`` at the end
of its log, under Spark's own lines, where a user looks after a run, and fails with the job's own
cause first. Plain Python: the Airflow side imports it without Spark.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from typing import Mapping, Sequence

from ..contracts import change_row as cr

SUMMARY_ENV = "MYSQL_CDC_SUMMARY_FILE"


@dataclass
class TableReport:
    table: str
    rows_in: int  # change rows of the table in the batch (a copy: rows copied)
    kind: str = "rows"  # "rows": changes applied; "snapshot": the table copied
    # (a copy: the changes its chunks lacked, applied after them)
    inserted: int = 0  # rows the follower gained: new keys (a keyless table: copies added)
    updated: int = 0  # existing rows replaced
    deleted: int = 0  # rows removed (a keyless table: copies removed)
    rows_written: int = 0  # rows deleted + inserted in the follower table (an update is both)
    stage_seconds: float = 0.0  # read, net and load into staging (executors)
    apply_seconds: float = 0.0  # the table's statements in the follower transaction

    @property
    def seconds(self) -> float:
        return self.stage_seconds + self.apply_seconds

    def count(self, copies_per_op: Mapping[str, int]) -> int:
        """Take the counts from the net rows' copies per op letter; returns the rows written."""
        self.inserted = copies_per_op.get(cr.INSERT, 0)
        self.updated = copies_per_op.get(cr.UPDATE, 0)
        self.deleted = copies_per_op.get(cr.DELETE, 0)
        return self.inserted + self.updated + self.deleted

    def describe(self) -> str:
        if self.kind == "snapshot":
            caught_up = (f", then caught up: {self._changes()}" if self.inserted or self.updated or self.deleted
                         else "")
            return f"{self.table}: copied {self.rows_in:,} rows{caught_up} in {self.seconds:.1f} s"
        return f"{self.table}: {self.rows_in:,} changes in -> {self._changes()} in {self.seconds:.1f} s"

    def _changes(self) -> str:
        return f"{self.inserted:,} inserted, {self.updated:,} updated, {self.deleted:,} deleted"

    def add_figures(self, other: "TableReport") -> None:
        """Count ``other``'s figures (rows, counts, seconds) into this report's."""
        for name in ("rows_in", "inserted", "updated", "deleted", "rows_written", "stage_seconds", "apply_seconds"):
            setattr(self, name, getattr(self, name) + getattr(other, name))


# A segment's tables the merge job logs one by one; of more, the ones with the most changes, and the
# others in one line. A batch of an OLTP schema may touch a thousand tables every interval: its
# every table is in the merge summary, which the merge task logs table by table (``describe``).
LOGGED_TABLES = 20


def segment_lines(reports: Sequence[TableReport], limit: int = LOGGED_TABLES) -> list[str]:
    """The job's log lines for a row segment's tables: one per table (with where its time went), in
    the segment's order; of more than ``limit`` tables, the ``limit`` with the most changes, then
    the others summed in one line."""
    busiest = sorted(range(len(reports)), key=lambda i: reports[i].rows_in, reverse=True)[:limit]
    shown = set(busiest)
    lines = [_segment_line(reports[i]) for i in sorted(shown)]
    others = [r for i, r in enumerate(reports) if i not in shown]
    if others:
        rest = TableReport(f"{len(others):,} more tables", 0)
        for report in others:
            rest.add_figures(report)
        lines.append(_segment_line(rest, "; each table in the merge summary"))
    return lines


def _segment_line(report: TableReport, note: str = "") -> str:
    return f"merged {report.describe()} (stage {report.stage_seconds:.2f} s, apply {report.apply_seconds:.2f} s{note})"


@dataclass
class MergeSummary:
    pipeline: str
    batch_id: str
    noop: bool
    checkpoint: str
    segments_applied: int = 0
    seconds: float = 0.0
    tables: list[TableReport] = field(default_factory=list)
    # (table, kind) -> its report in ``tables``, so ``add`` finds it without a scan (a batch may
    # touch thousands of tables); not part of the summary's JSON
    _index: dict = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._index = {(t.table, t.kind): t for t in self.tables}

    def add(self, report: TableReport) -> None:
        """Count a table's figures in, summed with its earlier ones (a DDL splits a batch into
        segments, each applied on its own: the user reads one line per table)."""
        existing = self._index.get((report.table, report.kind))
        if existing is None:
            self.tables.append(report)
            self._index[(report.table, report.kind)] = report
            return
        existing.add_figures(report)

    @property
    def net_rows(self) -> int:
        """Rows the follower's tables gained, changed or lost (after netting changes per key); a
        copied table counts its rows and then the changes its chunks lacked."""
        return sum((t.rows_in if t.kind == "snapshot" else 0) + t.inserted + t.updated + t.deleted for t in self.tables)

    def to_json(self) -> str:
        body = asdict(self)
        body.pop("_index")
        for report, data in zip(self.tables, body["tables"]):
            data["seconds"] = round(report.seconds, 3)
        return json.dumps(body, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "MergeSummary":
        body = json.loads(text)
        known = {f.name for f in fields(TableReport)}
        tables = [TableReport(**{k: v for k, v in t.items() if k in known}) for t in body.pop("tables")]
        return cls(**body, tables=tables)

    def describe(self) -> list[str]:
        """The summary as a user reads it: the batch, then one line per table."""
        if self.noop:
            return [f"batch {self.batch_id}: already applied (checkpoint {self.checkpoint}): nothing to do"]
        rows = sum(t.rows_in for t in self.tables)
        lines = [f"batch {self.batch_id}: {rows:,} rows in {len(self.tables)} table(s), {self.segments_applied} "
                 f"segment(s) applied in {self.seconds:.1f} s; checkpoint now {self.checkpoint}"]
        return lines + [f"  {t.describe()}" for t in self.tables]


@dataclass
class JobOutcome:
    """What one run of the merge job did: the summaries of the batches it applied, in order, and
    its error when it failed (``permanent``: no retry can fix it, ``mysql_cdc.retry_policy``;
    ``spark_refused``: a run without Spark stopped because the batch needs it, ``errors.SparkRefused``)."""

    summaries: list[MergeSummary] = field(default_factory=list)
    error: str | None = None
    permanent: bool = False
    spark_refused: bool = False

    def to_json(self) -> str:
        return json.dumps({"summaries": [json.loads(s.to_json()) for s in self.summaries], "error": self.error,
                           "permanent": self.permanent, "spark_refused": self.spark_refused}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "JobOutcome":
        body = json.loads(text)
        return cls([MergeSummary.from_json(json.dumps(s)) for s in body["summaries"]], body.get("error"),
                   bool(body.get("permanent")), bool(body.get("spark_refused")))

