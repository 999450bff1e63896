"""Binlog positions: the one definition of "where in the leader's history" used everywhere.

A position names the byte offset of an event boundary inside one binlog file, written
``FILE:OFFSET`` (``binlog.000003:1146``). Positions are totally ordered by the file's numeric
sequence and then the offset: the binlog base name never changes on one server, but file names
are compared by sequence so that ``binlog.1000000`` (seven digits after a long life) still sorts
after ``binlog.999999``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache, total_ordering
from ..errors import PermanentError

# FILE.SEQ:OFFSET. One definition: BinlogPosition.parse matches it, and the DAG's trigger form
# validates its params with it (JSON Schema ``pattern``), so both accept exactly the same text.
POSITION_PATTERN = r"^[^:\s]+\.[0-9]+:[0-9]+$"
_FILE_PATTERN = r"[^:\s]+\.[0-9]+"
_POSITION_RE = re.compile(POSITION_PATTERN)
_FILE_RE = re.compile(_FILE_PATTERN)


@lru_cache(maxsize=1024)
def _is_file_name(name: str) -> bool:
    # capture makes two positions per binlog event, all in a handful of files: checked once each
    return _FILE_RE.fullmatch(name) is not None


class InvalidPosition(ValueError, PermanentError):
    """A string that is not ``FILE:OFFSET`` was given where a binlog position was expected."""


@total_ordering
@dataclass(frozen=True)
class BinlogPosition:
    file: str
    offset: int

    def __post_init__(self) -> None:
        if not isinstance(self.file, str) or not _is_file_name(self.file):
            raise InvalidPosition(
                f"binlog file name {self.file!r} does not end in a numeric sequence "
                "(expected something like 'binlog.000003')"
            )
        if self.offset < 0:
            raise InvalidPosition(f"binlog offset must be >= 0, got {self.offset}")

    @classmethod
    def parse(cls, text: str) -> "BinlogPosition":
        text = (text or "").strip()
        if not _POSITION_RE.match(text):
            raise InvalidPosition(
                f"{text!r} is not a binlog position; write it as FILE:OFFSET, "
                "for example 'binlog.000003:1146' (see SHOW BINARY LOGS on the leader)"
            )
        file, _, offset = text.rpartition(":")
        return cls(file, int(offset))

    @property
    def sequence(self) -> int:
        return int(self.file.rsplit(".", 1)[1])

    @property
    def sort_key(self) -> tuple[int, int]:
        return (self.sequence, self.offset)

    def __lt__(self, other: "BinlogPosition") -> bool:
        if not isinstance(other, BinlogPosition):
            return NotImplemented
        return self.sort_key < other.sort_key

    def __str__(self) -> str:
        return f"{self.file}:{self.offset}"

    def token(self) -> str:
        """A fixed-width, lexicographically sortable rendering, used to name batches."""
        return f"{self.sequence:010d}.{self.offset:020d}"


@dataclass(frozen=True)
class PositionRange:
    """A half-open range ``[start, end)`` of the binlog; both ends are transaction boundaries."""

    start: BinlogPosition
    end: BinlogPosition

    def __post_init__(self) -> None:
        if self.end < self.start:
            raise InvalidPosition(
                f"range end {self.end} is before its start {self.start}; "
                "give the earlier position as start"
            )

    @property
    def empty(self) -> bool:
        return self.start == self.end

    def __str__(self) -> str:
        return f"[{self.start}, {self.end})"
