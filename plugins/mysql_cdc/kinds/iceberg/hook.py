"""An Iceberg follower as the Airflow side reaches it: the catalog's server through a ``mysql``
connection, the warehouse through an AWS connection (or ``file://``); read with pyiceberg, never Spark."""

from __future__ import annotations

import asyncio
from functools import cached_property
from typing import Any, Mapping

from airflow.sdk import BaseHook

from ...contracts import ChangeBatch
from ...hooks.connections import MySQLConnectionHook
from ...hooks.follower import FollowerHookBase
from ...hooks.storage import BatchStorageHook
from ...kinds import FollowerSpec
from ...monitor.verify import FollowerSides
from . import follower_spec
from .catalog import CatalogRef
from .verify import checksum_sides


class _CatalogServerHook(MySQLConnectionHook):
    role = "Iceberg catalog"


class IcebergFollowerHook(BaseHook, FollowerHookBase):
    """An Iceberg follower: the reference's catalog (``kinds.iceberg.IcebergKind.reference``)."""

    hook_name = "MySQL CDC Iceberg follower"

    def __init__(self, reference: Mapping[str, Any]):
        super().__init__()
        self.reference = dict(reference)

    @cached_property
    def catalog(self) -> CatalogRef:
        r = self.reference
        server = _CatalogServerHook(r["conn_id"]).settings
        warehouse = BatchStorageHook(r["warehouse"], r.get("aws_conn_id")).spec()
        return CatalogRef(r["catalog"], server, r["database"], warehouse)

    @property
    def soft_deletes(self) -> tuple[str, ...]:
        """The globs of the tables that keep their deleted rows (``merge.soft_deletes``)."""
        return tuple(self.reference.get("soft_deletes", ()))

    @property
    def history(self) -> tuple[str, ...]:
        """The globs of the tables that keep every version of each row (``merge.history``)."""
        return tuple(self.reference.get("history", ()))

    def spec(self) -> FollowerSpec:
        return follower_spec(self.catalog, self.soft_deletes, self.history)

    async def aspec(self) -> FollowerSpec:
        # the connections' lookups are blocking: a worker thread, not the event loop
        return await asyncio.to_thread(self.spec)

    def table_uri(self, database: str, table: str) -> str:
        return f"iceberg://{self.reference['catalog']}/{database}/{table}"

    def tables_to_copy(self, batch: ChangeBatch) -> dict[str, str]:
        """Tables of ``batch`` (``db.table`` -> why) whose changes the catalog cannot take exactly, to
        copy again in this run (``recopy``), reading the tables' schemas with pyiceberg."""
        from pyiceberg.exceptions import NoSuchTableError

        from ...merge.recopy import tables_to_copy
        from .recopy import ICEBERG_TYPES

        catalog, schemas = self.catalog.open(), {}

        def columns(database: str, table: str) -> dict[str, str] | None:
            if (database, table) not in schemas:
                try:
                    fields = catalog.load_table((database, table)).schema().fields
                except NoSuchTableError:
                    schemas[(database, table)] = None
                else:
                    schemas[(database, table)] = {f.name.lower(): str(f.field_type) for f in fields}
            return schemas[(database, table)]

        return tables_to_copy(batch, columns, ICEBERG_TYPES)

    def checksum_sides(self) -> FollowerSides:
        """The catalog's tables at the consistent cut, hashed against the leader's rows."""
        return checksum_sides(self.catalog, self.soft_deletes, self.history)
