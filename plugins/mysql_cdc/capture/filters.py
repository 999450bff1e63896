"""Which leader tables a pipeline captures: ``db.table`` globs (fnmatch, case-sensitive)."""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase

from ..contracts import RESERVED_SCHEMA, DdlTarget

# Never captured: the server's own schemas, and the follower checkpoint schema (a follower can be
# another pipeline's leader).
SYSTEM_DATABASES = frozenset({"mysql", "information_schema", "performance_schema", "sys", RESERVED_SCHEMA})


def _check(pattern: str, field: str) -> str:
    if pattern.count(".") != 1 or not all(pattern.split(".")):
        raise ValueError(
            f"{field}: {pattern!r} is not a db.table glob (examples: 'shop.*', '*.orders', 'flvDb.pet')"
        )
    return pattern


@dataclass(frozen=True)
class TableFilter:
    include: tuple[str, ...] = ("*.*",)
    exclude: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "include", tuple(_check(p, "include") for p in self.include))
        object.__setattr__(self, "exclude", tuple(_check(p, "exclude") for p in self.exclude))

    def captures_table(self, database: str, table: str) -> bool:
        if database in SYSTEM_DATABASES:
            return False
        name = f"{database}.{table}"
        return any(fnmatchcase(name, p) for p in self.include) and not any(
            fnmatchcase(name, p) for p in self.exclude
        )

    def captures_database(self, database: str) -> bool:
        """A database is captured when some include glob can match tables in it and no exclude
        glob removes all of them (``db.*``)."""
        if database in SYSTEM_DATABASES:
            return False
        included = any(fnmatchcase(database, p.split(".")[0]) for p in self.include)
        wholly_excluded = any(
            fnmatchcase(database, p.split(".")[0]) and p.split(".")[1] == "*" for p in self.exclude
        )
        return included and not wholly_excluded

    def captures(self, target: DdlTarget) -> bool:
        if target.table is None:
            return self.captures_database(target.database)
        return self.captures_table(target.database, target.table)
