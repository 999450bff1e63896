"""GTID sets: which transactions a binlog position has behind it, in a form any server can read.

A binlog position (``FILE:OFFSET``) means something on one server only; after a failover the new
leader's files have other names and offsets. The set of transactions executed up to a position
does not: it is how a pipeline finds its place on another server (``capture.failover``).

- **MySQL** (``gtid_executed``): per source UUID, and per tag (8.3+), intervals of transaction
  numbers: ``3e11fa47-...:1-5:11,3e11fa47-...:mytag:1-3``. A GTID ``uuid[:tag]:N`` is in the set
  when ``N`` is in one of its UUID and tag's intervals.
- **MariaDB** (``gtid_binlog_pos``): per replication domain, the last GTID ``domain-server-seqno``:
  ``0-1-100,1-2-7``. Sequence numbers grow in binlog order within a domain, so a GTID is in the
  state when its domain's last sequence number is at least its own.

The text forms are the servers' own, so a set reads the same in a checkpoint, a manifest and
``SELECT @@gtid_executed``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from ..errors import PermanentError

_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_MARIADB_GTID = re.compile(r"^(\d+)-(\d+)-(\d+)$")


class GtidSetError(ValueError, PermanentError):
    pass


@dataclass
class MySQLGtidSet:
    """``gtid_executed`` as intervals per (source UUID, tag); the tag is "" when untagged."""

    intervals: dict[tuple[str, str], list[list[int]]] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str | None) -> "MySQLGtidSet":
        result = cls()
        for part in filter(None, (p.strip() for p in (text or "").replace("\n", "").split(","))):
            source, *rest = part.split(":")
            if not _UUID.match(source) or not rest:
                raise GtidSetError(f"{part!r} is not a MySQL GTID set element (uuid:N-M[:tag:N-M])")
            tag = ""
            for item in rest:
                if re.match(r"^\d+(-\d+)?$", item):
                    low, _, high = item.partition("-")
                    result._add_interval((source.lower(), tag), int(low), int(high or low))
                elif re.match(r"^[a-z_][a-z0-9_]{0,31}$", item, re.IGNORECASE):
                    tag = item.lower()
                else:
                    raise GtidSetError(f"{part!r}: {item!r} is neither an interval nor a tag")
        return result

    @staticmethod
    def _split(gtid: str) -> tuple[tuple[str, str], int]:
        parts = gtid.split(":")
        if len(parts) not in (2, 3) or not _UUID.match(parts[0]) or not parts[-1].isdigit():
            raise GtidSetError(f"{gtid!r} is not a MySQL GTID (uuid:N or uuid:tag:N)")
        return (parts[0].lower(), parts[1].lower() if len(parts) == 3 else ""), int(parts[-1])

    def _add_interval(self, key: tuple[str, str], low: int, high: int) -> None:
        merged = []
        for start, end in sorted(self.intervals.get(key, []) + [[low, high]]):
            if merged and start <= merged[-1][1] + 1:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        self.intervals[key] = merged

    def add(self, gtid: str) -> None:
        key, number = self._split(gtid)
        self._add_interval(key, number, number)

    def __contains__(self, gtid: str) -> bool:
        key, number = self._split(gtid)
        return any(start <= number <= end for start, end in self.intervals.get(key, []))

    def covers(self, other: "MySQLGtidSet") -> bool:
        """Every transaction of ``other`` is in this set."""
        return all(
            any(s <= start and end <= e for s, e in self.intervals.get(key, []))
            for key, spans in other.intervals.items() for start, end in spans
        )

    def __str__(self) -> str:
        by_source: dict[str, list[str]] = {}
        for (source, tag), spans in sorted(self.intervals.items()):
            text = ":".join(f"{s}" if s == e else f"{s}-{e}" for s, e in spans)
            by_source.setdefault(source, []).append(f"{tag}:{text}" if tag else text)
        return ",".join(f"{source}:{':'.join(items)}" for source, items in by_source.items())


@dataclass
class MariaDBGtidState:
    """``gtid_binlog_pos``: the last GTID (server id, sequence number) per replication domain."""

    last: dict[int, tuple[int, int]] = field(default_factory=dict)

    @staticmethod
    def _split(gtid: str) -> tuple[int, int, int]:
        match = _MARIADB_GTID.match(gtid.strip())
        if not match:
            raise GtidSetError(f"{gtid!r} is not a MariaDB GTID (domain-server-seqno)")
        return int(match.group(1)), int(match.group(2)), int(match.group(3))

    @classmethod
    def parse(cls, text: str | None) -> "MariaDBGtidState":
        result = cls()
        for part in filter(None, (p.strip() for p in (text or "").split(","))):
            result.add(part)
        return result

    def add(self, gtid: str) -> None:
        domain, server, seqno = self._split(gtid)
        if seqno >= self.last.get(domain, (0, 0))[1]:
            self.last[domain] = (server, seqno)

    def __contains__(self, gtid: str) -> bool:
        domain, _, seqno = self._split(gtid)
        return seqno <= self.last.get(domain, (0, 0))[1]

    def covers(self, other: "MariaDBGtidState") -> bool:
        return all(seqno <= self.last.get(domain, (0, 0))[1] for domain, (_, seqno) in other.last.items())

    def __str__(self) -> str:
        return ",".join(f"{d}-{s}-{n}" for d, (s, n) in sorted(self.last.items()))


GtidSet = MySQLGtidSet | MariaDBGtidState
_KINDS = {"mysql": MySQLGtidSet, "mariadb": MariaDBGtidState}


def parse_gtid_set(flavor: str, text: str | None) -> GtidSet:
    """The set ``text`` in the notation of ``flavor`` ("mysql" or "mariadb")."""
    return _KINDS[flavor].parse(text)
