"""Apache Iceberg tables as the follower: the leader's table ``db.t`` is the Iceberg table ``db.t``
of a catalog the user names, an Iceberg JDBC catalog in a MySQL/MariaDB database (``catalog``),
which Spark, Trino and Flink open by name with Iceberg's own ``JdbcCatalog``, and Python with
pyiceberg's ``SqlCatalog``.

- ``sink``: what the merge job writes, from the driver through pyiceberg (``commit``: one snapshot
  per table and segment, carrying the pipeline and the binlog position; ``ddl``: Iceberg's schema
  evolution and the catalog's create, rename, drop); ``types``: the leader's columns, exactly;
- ``state``: the MySQL follower's state tables on the catalog's server, and the consistent cut
  (each table's snapshot id at the checkpoint) moved with the checkpoint in one transaction;
- ``hook``: the Airflow side (the catalog's ``mysql`` connection, the warehouse's AWS
  connection); ``verify``: the cut's rows hashed against the leader's; ``cut``: its reader;
- ``maintenance``: compaction, snapshot expiry that keeps the cut, orphan files.

The pipelines file names it ``follower: {kind: iceberg, catalog: <name>, conn_id: <mysql connection of
the catalog's server>, database: <the catalog's database>, warehouse: s3://bucket/prefix}``, and
optionally ``soft_deletes: true`` (or ``db.table`` globs): tables that keep the rows the leader
deleted, marked (``merge.soft_deletes``), and ``history``: tables that keep every version of each
row (``merge.history``).
"""

from __future__ import annotations

from typing import Any, Mapping

from .. import FollowerSpec
from ..base import FollowerKind, netted_by_spark

_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"


class IcebergKind(FollowerKind):
    name = "iceberg"
    config_keys = frozenset({"catalog", "conn_id", "database", "warehouse", "soft_deletes", "history"})
    maintained = True

    def reference(self, section: Mapping[str, Any], aws_conn_id: str | None) -> dict[str, Any]:
        import re

        from ...merge import history
        from ...merge.soft_deletes import parse_globs
        from ...storage import normalize_uri

        for key in ("catalog", "conn_id", "database", "warehouse"):
            value = section.get(key)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"{key}: required for an iceberg follower ({_HELP[key]}), got {value!r}")
        for key in ("catalog", "database"):
            if not re.match(_NAME, section[key].strip()):
                raise ValueError(f"{key}: {section[key]!r} is not a plain name (letters, digits, _)")
        try:
            warehouse = normalize_uri(section["warehouse"].strip())
        except ValueError as exc:
            raise ValueError(f"warehouse: {exc}") from None
        return {"kind": self.name, "catalog": section["catalog"].strip(), "conn_id": section["conn_id"].strip(),
                "database": section["database"].strip(), "warehouse": warehouse, "aws_conn_id": aws_conn_id,
                "soft_deletes": list(parse_globs(section.get("soft_deletes", False))),
                "history": list(history.parse_globs(section.get("history", False)))}

    def describe(self, reference: Mapping[str, Any]) -> str:
        return f"{self.name} catalog {reference['catalog']} ({reference['conn_id']}), warehouse {reference['warehouse']}"

    def table_uri(self, reference: Mapping[str, Any], table: str) -> str:
        return f"iceberg://{reference['catalog']}/{table.replace('.', '/', 1)}"

    def hook(self, reference: Mapping[str, Any]):
        from .hook import IcebergFollowerHook

        return IcebergFollowerHook(reference)

    def state_store(self, settings: Mapping[str, Any]):
        from .state import IcebergStateStore

        return IcebergStateStore.from_settings(settings)

    def sink(self, settings: Mapping[str, Any], leader_flavor: str | None):
        from .sink import IcebergSink

        return IcebergSink.from_settings(settings, leader_flavor)

    def spark_needed(self, batch, driver_net_rows: int) -> str | None:
        """Tables and DDL are written with pyiceberg from the driver; Spark reads a copy's rows and
        nets a table of more than ``driver_net_rows`` change rows."""
        copies = [s for s in batch.segments if s.kind == "snapshot"]
        if copies:
            return f"{copies[0].qualified_name}: a copy's rows are read by Spark"
        return netted_by_spark(batch, driver_net_rows)

    def maintain(self, spark: Any, settings: Mapping[str, Any], pipeline: str, retain_hours: float) -> list:
        """Compaction, snapshot expiry and orphan removal of every table of the cut, from the driver
        (``maintenance``; the job's Spark session is not used)."""
        from .catalog import CatalogRef
        from .maintenance import maintain_catalog

        return maintain_catalog(CatalogRef.from_json(settings["catalog"]), pipeline, retain_hours)


_HELP = {
    "catalog": "the catalog's name, as engines call it: Spark's spark.sql.catalog.<name>",
    "conn_id": "the Airflow mysql connection of the server holding the catalog's database",
    "database": "the database holding the catalog's tables iceberg_tables and iceberg_namespace_properties",
    "warehouse": "s3://bucket/prefix or file:///path under which new tables' files go",
}

KIND = IcebergKind()


def follower_spec(catalog, soft_deletes: tuple[str, ...] = (), history: tuple[str, ...] = ()) -> FollowerSpec:
    """An Iceberg follower in ``catalog`` (a ``catalog.CatalogRef``: its server's password and its
    warehouse's S3 options are its secrets) whose tables named by the ``soft_deletes`` globs keep
    their deleted rows, and those named by the ``history`` globs every version of each row."""
    return FollowerSpec(KIND.name, {"catalog": catalog.to_json(), "soft_deletes": list(soft_deletes),
                                    "history": list(history)})
