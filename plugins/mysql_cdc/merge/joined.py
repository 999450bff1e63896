"""Row segments joined into one commit where the rules allow (``join_segments``).

A DDL statement splits a batch into segments, and each row segment costs a sink a round: every
table it touches opened, staged and committed, then the checkpoint moved. An OLTP schema's
interval often has a few DDL statements between its transactions (a table created, a column
added), each on a table the rows around it do not touch; paying a round per segment then costs
the tables touched on both sides of the DDL a commit each time.

Statements on different tables commute: a DDL on tables that the row segments before it (since
the last commit) do not touch may run first, and those row segments then join the ones after it
in one commit. The checkpoint cannot stand between them (the rows before the DDL are not applied
yet when the DDL is), so it moves once, past all of them, with the joined segment's commit: a
sink that replays a DDL ahead must replay it again harmlessly when a crash before that commit
makes the retry start from the old checkpoint (``Sink.replays_ahead``). A sink that cannot gets
the segments one by one, as the batch lists them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Sequence

from ..contracts import DdlSegment, RowSegment, Segment, TableChanges


@dataclass(frozen=True)
class JoinedRows:
    """Row segments committed as one (``rows``: their tables' files joined, from the first one's
    start to the last one's end), after the DDL statements between them (``ddl_ahead``: on other
    tables, in binlog order) are replayed ahead of them."""

    ddl_ahead: tuple[DdlSegment, ...]
    rows: RowSegment
    parts: int  # the batch's segments this stands for (row and DDL)
    kind: str = "joined_rows"


def _names(table: TableChanges) -> tuple[str, str]:
    # (MySQL compares table names by case on most servers, not on all: joining less is safe)
    return table.database.lower(), table.table.lower()


def _touches(ddl: DdlSegment, tables: set[tuple[str, str]]) -> bool:
    """Whether the statement names a table of ``tables``, or a database one of them is in."""
    for target in ddl.targets:
        database = target.database.lower()
        if target.table is None:
            if any(db == database for db, _ in tables):
                return True
        elif (database, target.table.lower()) in tables:
            return True
    return False


def join_rows(segments: Sequence[RowSegment]) -> RowSegment | None:
    """One row segment with the rows of ``segments`` (in binlog order: a table's files one
    segment's after the other's), or None when a table's changes cannot be one table's: other
    columns or keys (a DDL on it between them: ``join_segments`` never joins across one), or its
    files in packs in one segment and objects of their own in another (a table's spans are all
    or none)."""
    tables: dict[tuple[str, str], TableChanges] = {}
    for segment in segments:
        for table in segment.tables:
            have = tables.get(_names(table))
            if have is None:
                tables[_names(table)] = table
                continue
            if (have.columns, have.key_columns, bool(have.spans)) != (table.columns, table.key_columns,
                                                                      bool(table.spans)):
                return None
            tables[_names(table)] = replace(have, files=have.files + table.files,
                                            row_count=have.row_count + table.row_count,
                                            spans=have.spans + table.spans)
    first, last = segments[0], segments[-1]
    return RowSegment(first.index, first.start, last.end, tuple(tables.values()), last.gtid_set)


class _Joining:
    """The row segments being joined (``joined``: their rows as one segment, kept as they come) and
    the DDL between them; ``waiting``: DDL since the last row segment, replayed ahead only if
    another row segment joins after it."""

    def __init__(self) -> None:
        self.joined: RowSegment | None = None
        self.parts = 0  # row segments in ``joined``
        self.ahead: list[DdlSegment] = []
        self.waiting: list[DdlSegment] = []
        self.tables: set[tuple[str, str]] = set()

    def add(self, segment: RowSegment) -> bool:
        """Join ``segment`` to the rows (False: its tables' changes cannot join theirs)."""
        joined = segment if self.joined is None else join_rows([self.joined, segment])
        if joined is None:
            return False
        self.joined, self.parts = joined, self.parts + 1
        self.ahead += self.waiting
        self.waiting = []
        self.tables |= {_names(t) for t in segment.tables}
        return True

    def applied(self) -> list[Segment | JoinedRows]:
        """What to apply for them: the rows (joined, after the DDL between them), then the DDL
        waiting after them, in binlog order."""
        out: list[Segment | JoinedRows] = []
        if self.parts == 1:
            out.append(self.joined)
        elif self.parts:
            out.append(JoinedRows(tuple(self.ahead), self.joined, self.parts + len(self.ahead)))
        return out + self.waiting


def join_segments(segments: Sequence[Segment],
                  replays_ahead: Callable[[DdlSegment], bool]) -> list[Segment | JoinedRows]:
    """The segments to apply, in order, with consecutive row segments joined where only DDL
    statements on other tables stand between them, each one a sink ``replays_ahead``."""
    out: list[Segment | JoinedRows] = []
    joining = _Joining()
    for segment in segments:
        if isinstance(segment, RowSegment):
            if not joining.add(segment):
                out += joining.applied()
                joining = _Joining()
                joining.add(segment)
        elif (isinstance(segment, DdlSegment) and joining.parts and not _touches(segment, joining.tables)
              and replays_ahead(segment)):
            joining.waiting.append(segment)
        else:
            out += joining.applied()
            joining = _Joining()
            out.append(segment)
    return out + joining.applied()
