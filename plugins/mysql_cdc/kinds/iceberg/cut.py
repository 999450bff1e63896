"""The consistent cut of an Iceberg follower, for readers: every table at the snapshot id the state
records with the checkpoint, so all of them stand at one transaction boundary of the leader (a
transaction that wrote two tables is seen whole or not at all, even while a merge is half done).

    from mysql_cdc.kinds.iceberg.cut import read_cut

    cut = read_cut(catalog, "shop_lake")       # catalog: a kinds.iceberg.catalog.CatalogRef
    cut.position                               # the leader's binlog position of the cut
    orders = cut.read("shop.orders")           # a pyarrow Table of the rows at the cut
    for statement in cut.spark_sql():          # Spark SQL: a temp view per table, VERSION AS OF its snapshot
        spark.sql(statement)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...contracts import BinlogPosition
from .catalog import CatalogRef


@dataclass(frozen=True)
class IcebergCut:
    """A pipeline's cut: its position and each table's snapshot id there."""

    catalog: CatalogRef
    pipeline: str
    position: BinlogPosition
    snapshots: dict[str, int]
    _opened: list = field(default_factory=list, compare=False, repr=False)

    def _catalog(self):
        if not self._opened:
            self._opened.append(self.catalog.open())
        return self._opened[0]

    def table(self, name: str):
        """The pyiceberg table of ``db.table`` (``scan(snapshot_id=cut.snapshots[name])`` reads it at the cut)."""
        return self._catalog().load_table(tuple(name.split(".", 1)))

    def read(self, name: str) -> Any:
        """The table's rows at the cut, a pyarrow Table (a ``KeyError`` for a table not in it)."""
        return self.table(name).scan(snapshot_id=self.snapshots[name]).to_arrow()

    def spark_sql(self, catalog_name: str | None = None) -> list[str]:
        """One ``CREATE OR REPLACE TEMP VIEW`` per table (named ``<db>__<table>``), each the table
        ``VERSION AS OF`` its cut snapshot, through the Spark catalog ``catalog_name`` (default: the
        catalog's own name, as the Spark configuration ``spark.sql.catalog.<name>`` calls it)."""
        prefix = catalog_name or self.catalog.name
        views = []
        for name, snapshot in sorted(self.snapshots.items()):
            database, table = name.split(".", 1)
            views.append(f"CREATE OR REPLACE TEMP VIEW `{database}__{table}` AS SELECT * FROM "
                         f"`{prefix}`.`{database}`.`{table}` VERSION AS OF {snapshot}")
        return views


def read_cut(catalog: CatalogRef, pipeline: str) -> IcebergCut:
    """The pipeline's cut, the checkpoint and the snapshot ids read in one consistent read of the
    catalog's server (a merge moving them meanwhile is seen whole or not at all)."""
    from ...contracts import require_checkpoint
    from ...server_state.checkpoint import read_checkpoint
    from .state import read_cut as read_snapshots

    conn = catalog.server.connect(autocommit=False)
    try:
        with conn.cursor() as cur:
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
        checkpoint = require_checkpoint(read_checkpoint(conn, pipeline), pipeline)
        snapshots = read_snapshots(conn, pipeline)
        conn.rollback()
    finally:
        conn.close()
    return IcebergCut(catalog, pipeline, checkpoint.position, snapshots)
