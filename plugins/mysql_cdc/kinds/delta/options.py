"""What a Delta follower's tables are, as its section of the pipelines file says (besides where
they are): which tables get a changelog table, the table features they are created with, the
columns each table is partitioned by, which tables keep the rows the leader deleted, and which keep
every version of each row, and the catalog (a Hive Metastore) that names them. One value, built from the pipelines file on the Airflow side
(``LakeOptions.from_config``: a ``ValueError`` naming the bad key) and handed to the merge job in
its follower spec (``to_json``/``from_json``)."""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Mapping

from .catalog import MetastoreRef

# ``features``: what the lake's tables are created with (``sink.tables.TABLE_FEATURES``)
FEATURES = {
    "standard": "column mapping and deletion vectors: renames and drops in place, merges that write only "
                "the changed rows",
    "portable": "neither, so delta-rs's to_pyarrow_table/to_pandas and Polars read the tables; renames and "
                "drops rewrite the table",
}

PartitionBy = tuple[tuple[str, tuple[str, ...]], ...]  # (db.table glob, its partition columns), in the file's order


@dataclass(frozen=True)
class LakeOptions:
    changelog: tuple[str, ...] = ()  # db.table globs of the tables with a changelog table
    features: str = "standard"  # a key of FEATURES
    partition_by: PartitionBy = ()
    soft_deletes: tuple[str, ...] = ()  # db.table globs of the tables that keep their deleted rows
    history: tuple[str, ...] = ()  # db.table globs of the tables that keep every version of each row
    catalog: MetastoreRef | None = None  # the Hive Metastore the merge registers the tables in (``catalog``)

    KEYS = frozenset({"changelog", "features", "partition_by", "soft_deletes", "history", "catalog"})

    @classmethod
    def from_config(cls, section: Mapping[str, Any]) -> "LakeOptions":
        """The options of a ``follower`` section (its other keys are not read here)."""
        from ...merge import history
        from ...merge.soft_deletes import parse_globs

        return cls(_changelog(section.get("changelog", False)), _features(section.get("features", "standard")),
                   _partition_by(section.get("partition_by", {})), parse_globs(section.get("soft_deletes", False)),
                   history.parse_globs(section.get("history", False)), MetastoreRef.from_config(section.get("catalog")))

    def to_json(self) -> dict[str, Any]:
        return {"changelog": list(self.changelog), "features": self.features,
                "partition_by": {glob: list(columns) for glob, columns in self.partition_by},
                "soft_deletes": list(self.soft_deletes), "history": list(self.history),
                "catalog": {"metastore_uri": self.catalog.uri} if self.catalog else None}

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> "LakeOptions":
        return cls(tuple(value.get("changelog", ())), value.get("features", "standard"),
                   tuple((glob, tuple(columns)) for glob, columns in value.get("partition_by", {}).items()),
                   tuple(value.get("soft_deletes", ())), tuple(value.get("history", ())),
                   MetastoreRef.from_config(value.get("catalog")))

    def keeps_deleted(self, database: str, table: str) -> bool:
        """Whether the table keeps the rows the leader deleted (``merge.soft_deletes``)."""
        from ...merge.soft_deletes import keeps_deleted

        return keeps_deleted(self.soft_deletes, database, table)

    def keeps_history(self, database: str, table: str) -> bool:
        """Whether the table keeps every version of each row (``merge.history``)."""
        from ...merge.history import keeps_history

        return keeps_history(self.history, database, table)

    def logs(self, database: str, table: str) -> bool:
        """Whether the table has a changelog table."""
        return any(fnmatchcase(f"{database}.{table}", p) for p in self.changelog)

    def partition_columns(self, database: str, table: str) -> tuple[str, ...]:
        """The columns the table is partitioned by: the first ``partition_by`` glob that names it."""
        for glob, columns in self.partition_by:
            if fnmatchcase(f"{database}.{table}", glob):
                return columns
        return ()


def _globs(values: Any, field: str) -> tuple[str, ...]:
    from ...capture.filters import TableFilter

    try:
        return tuple(TableFilter(include=tuple(v.strip() for v in values)).include)
    except ValueError as exc:
        raise ValueError(f"{field}: {exc}") from None


def _changelog(value: Any) -> tuple[str, ...]:
    """``changelog``: true (every table), false, or a list of db.table globs."""
    if value is True:
        return ("*.*",)
    if value is False:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError("changelog: must be true, false or a list of db.table globs such as ['shop.*', '*.orders'], "
                         f"got {value!r}")
    return _globs(value, "changelog")


def _features(value: Any) -> str:
    if value not in FEATURES:
        choices = "; ".join(f"{k} ({v})" for k, v in FEATURES.items())
        raise ValueError(f"features: must be one of {choices}; got {value!r}")
    return value


def _partition_by(value: Any) -> PartitionBy:
    """``partition_by``: db.table globs to the leader columns their tables are partitioned by, such as
    ``{shop.orders: [region], "shop.events_*": [day]}``."""
    example = "such as {shop.orders: [region], 'shop.events_*': [day]}"
    if not isinstance(value, Mapping):
        raise ValueError(f"partition_by: must map db.table globs to lists of column names, {example}; got {value!r}")
    out = []
    for glob, columns in value.items():
        where = f"partition_by.{glob}"
        if not isinstance(glob, str):
            raise ValueError(f"partition_by: {glob!r} is not a db.table glob, {example}")
        if (not isinstance(columns, list) or not columns
                or not all(isinstance(c, str) and c.strip() for c in columns)):
            raise ValueError(f"{where}: must be a non-empty list of column names, {example}; got {columns!r}")
        names = [c.strip() for c in columns]
        if len({n.lower() for n in names}) != len(names):
            raise ValueError(f"{where}: names a column twice: {names}")
        out.append((_globs([glob], "partition_by")[0], tuple(names)))
    return tuple(out)
