"""A verification's result: what the verify DAG found when it compared the follower with the
leader chunk by chunk (``monitor.verify``), as the state store keeps it and the API returns it."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from ..text import plural

OK, DRIFT, BEHIND = "ok", "drift", "behind"


@dataclass
class DriftedChunk:
    table: str
    index: int
    lo: Any
    hi: Any
    leader_rows: int
    follower_rows: int


@dataclass
class VerificationResult:
    pipeline: str
    started_at: dt.datetime
    finished_at: dt.datetime | None = None
    tables: int = 0
    chunks: int = 0
    rows: int = 0
    rechecked: int = 0
    drifted: list[DriftedChunk] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # tables the follower lacks
    # why nothing was compared: the follower had not reached the leader's position of the start
    # (a follower behind is not a follower that differs)
    behind: str | None = None

    @property
    def status(self) -> str:
        if self.behind is not None:
            return BEHIND
        return DRIFT if self.drifted or self.missing else OK

    @property
    def drifted_tables(self) -> list[str]:
        return sorted({c.table for c in self.drifted} | set(self.missing))

    def resnapshot_conf(self) -> dict:
        """The manual run's conf that repairs the drifted tables."""
        return {"resnapshot": self.drifted_tables}

    def describe(self) -> str:
        head = (f"{plural(self.tables, 'table')}, {plural(self.chunks, 'chunk')}, {self.rows:,} leader rows "
                f"compared, {plural(self.rechecked, 'chunk')} rechecked after a merge")
        if self.status == BEHIND:
            return f"pipeline {self.pipeline}: behind, not verified: {self.behind}"
        if self.status == OK:
            return f"pipeline {self.pipeline}: follower equals leader: {head}"
        return (f"pipeline {self.pipeline}: DRIFT in {', '.join(self.drifted_tables)} ({head}); repair with a manual "
                f"run with conf {json.dumps(self.resnapshot_conf())}")

    def to_json(self) -> dict:
        body = asdict(self)
        body.update(status=self.status, drifted_tables=self.drifted_tables, resnapshot=self.resnapshot_conf(),
                    started_at=_iso(self.started_at), finished_at=_iso(self.finished_at))
        body["drifted"] = [{**d, "lo": _plain(d["lo"]), "hi": _plain(d["hi"])} for d in body["drifted"]]
        return body

    @classmethod
    def from_json(cls, body: dict) -> "VerificationResult":
        return cls(
            pipeline=body["pipeline"], started_at=dt.datetime.fromisoformat(body["started_at"]),
            finished_at=dt.datetime.fromisoformat(body["finished_at"]) if body["finished_at"] else None,
            tables=body["tables"], chunks=body["chunks"], rows=body["rows"], rechecked=body["rechecked"],
            drifted=[DriftedChunk(**d) for d in body["drifted"]], missing=list(body["missing"]),
            behind=body.get("behind"),  # absent from results kept before it existed
        )


def _iso(value: dt.datetime | None) -> str | None:
    return value.astimezone(dt.timezone.utc).isoformat() if value else None


def _plain(value: Any) -> Any:
    """A chunk bound as JSON (bounds are key values: numbers, text, bytes or dates)."""
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    if isinstance(value, (dt.date, dt.datetime, dt.time, dt.timedelta)):
        return str(value)
    return value if value is None or isinstance(value, (int, float, str)) else str(value)
