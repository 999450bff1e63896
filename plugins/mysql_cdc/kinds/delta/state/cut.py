"""The consistent cut: every table of a Delta Lake follower as of the last complete batch.

The merge job commits a segment's tables first and the pipeline's state row last; the state row
records each table's Delta version at its position. Reading every table at the version the
latest state row names gives the leader's tables at one transaction boundary: a transaction that
wrote two tables is seen whole or not at all, even while a merge is half done (its new table
versions are not in the state row yet).

With delta-rs::

    from mysql_cdc.kinds.delta.state.cut import read_cut
    cut = read_cut("s3://bucket/lake", "shop", s3_options={"endpoint_url": ..., ...})
    cut.position, cut.tables["shop.orders"]          # a deltalake.DeltaTable at its cut version

With Spark SQL (the versions from ``cut.versions``, or from the state table itself)::

    SELECT table_versions FROM delta.`s3a://bucket/lake/_mysql_cdc/shop/checkpoint`;
    SELECT * FROM delta.`s3a://bucket/lake/shop/orders` VERSION AS OF 42;

``spark_sql(cut)`` writes those statements out for every table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ....contracts import BinlogPosition
from ....storage import StorageSpec
from .location import LakeLocation
from .tables import CHECKPOINT, StateTables


@dataclass(frozen=True)
class ConsistentCut:
    pipeline: str
    position: BinlogPosition
    versions: dict[str, int]  # "db.table" -> Delta version
    location: LakeLocation

    @property
    def tables(self) -> dict[str, Any]:
        """Every table at its cut version, as ``deltalake.DeltaTable``."""
        from deltalake import DeltaTable

        return {name: DeltaTable(self.location.table_uri(*name.split(".", 1)), version=version,
                                 storage_options=self.location.storage_options())
                for name, version in self.versions.items()}

    def read(self, name: str):
        """One table's rows at the cut as a pyarrow Table (through delta-rs's query engine, which
        reads column-mapped tables by their logical names)."""
        import pyarrow as pa
        from deltalake import QueryBuilder

        table = self.tables[name]
        return pa.table(QueryBuilder().register("t", table).execute("SELECT * FROM t").read_all())


def read_cut(location: str, pipeline: str, s3_options: dict[str, Any] | None = None) -> ConsistentCut:
    """The cut of ``pipeline`` at ``location`` (``file:///...`` or ``s3://...``; ``s3_options``
    as the batch store takes them: endpoint_url, region_name, aws_access_key_id, ...)."""
    return read_cut_at(LakeLocation(StorageSpec(location, s3_options or {})), pipeline)


def read_cut_at(lake: LakeLocation, pipeline: str) -> ConsistentCut:
    """The same, for a ``LakeLocation``."""
    row = StateTables(lake).read_state(pipeline)
    if row is None:
        raise LookupError(f"pipeline {pipeline!r} has no state at {lake.state_uri(pipeline, CHECKPOINT)}")
    return ConsistentCut(pipeline, row.checkpoint.position, row.versions, lake)


def spark_sql(cut: ConsistentCut) -> list[str]:
    """One ``CREATE OR REPLACE TEMP VIEW`` per table, reading it ``VERSION AS OF`` its cut."""
    statements = []
    for name, version in sorted(cut.versions.items()):
        database, table = name.split(".", 1)
        path = cut.location.spark_path(cut.location.table_uri(database, table))
        statements.append(f"CREATE OR REPLACE TEMP VIEW `{database}__{table}` AS "
                          f"SELECT * FROM delta.`{path}` VERSION AS OF {version}")
    return statements
