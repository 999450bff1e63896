"""A Delta Lake follower as the Airflow side reaches it: a location (``s3://`` through an AWS
connection, or ``file://``), read with delta-rs, never Spark."""

from __future__ import annotations

import asyncio
from functools import cached_property

from airflow.sdk import BaseHook

from ...contracts import ChangeBatch
from ...hooks.follower import FollowerHookBase
from ...hooks.storage import BatchStorageHook
from ...kinds import FollowerSpec
from ...monitor.verify import FollowerSides
from . import follower_spec
from .options import LakeOptions
from .state.location import LakeLocation
from .verify import checksum_sides


class DeltaFollowerHook(BaseHook, FollowerHookBase):
    """A Delta Lake follower at ``location`` (``s3://`` through ``aws_conn_id``, or ``file://``)."""

    hook_name = "MySQL CDC Delta Lake follower"

    def __init__(self, location: str, aws_conn_id: str | None = BatchStorageHook.default_conn_name,
                 options: LakeOptions = LakeOptions()):
        super().__init__()
        self.location = location
        self.aws_conn_id = aws_conn_id
        self.options = options  # what the lake's tables are (changelog, features, partitioning)

    def spec(self) -> FollowerSpec:
        """The location with the S3 options a process outside Airflow needs (the merge job)."""
        return follower_spec(BatchStorageHook(self.location, self.aws_conn_id).spec(), self.options)

    async def aspec(self) -> FollowerSpec:
        # the amazon provider's credential chain is blocking: a worker thread, not the event loop
        return await asyncio.to_thread(self.spec)

    @cached_property
    def lake(self) -> LakeLocation:
        """The location with its S3 options, read from the connection once per hook (a task)."""
        return LakeLocation(BatchStorageHook(self.location, self.aws_conn_id).spec())

    def table_uri(self, database: str, table: str) -> str:
        """The Delta table's own location (``s3://bucket/lake/shop/orders``): what a reader opens."""
        return self.lake.table_uri(database, table)

    def checksum_sides(self) -> FollowerSides:
        """The lake's tables at the consistent cut, hashed against the leader's rows."""
        return checksum_sides(self.lake, self.options.soft_deletes, self.options.history)

    def tables_to_copy(self, batch: ChangeBatch) -> dict[str, str]:
        """Tables of ``batch`` (``db.table`` -> why) whose changes the lake cannot take exactly, to copy
        again in this run (``sink.recopy``), reading the lake's schemas with delta-rs."""
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        from .sink.recopy import spark_type, tables_to_copy

        lake, schemas = self.lake, {}

        def columns(database: str, table: str) -> dict[str, str] | None:
            if (database, table) not in schemas:
                try:
                    fields = DeltaTable(lake.table_uri(database, table),
                                        storage_options=lake.storage_options()).schema().fields
                except TableNotFoundError:
                    schemas[(database, table)] = None
                else:
                    schemas[(database, table)] = {f.name.lower(): spark_type(str(getattr(f.type, "type", f.type)))
                                                  for f in fields}
            return schemas[(database, table)]

        return tables_to_copy(batch, columns)
