"""The follower as the Airflow side reaches it: its spec (kind and settings, from the Airflow
connection) and its state store (``mysql_cdc.state``).

Only the merge job writes follower data. The Airflow side reads the pipeline's state, and moves
the checkpoint only where no row moves with it: its creation before the first merge, an empty
batch, a failover's rebase, a snapshot's start.
"""

from __future__ import annotations

import asyncio
from functools import cached_property
from typing import Any, Mapping

from airflow.sdk import BaseHook

from ..contracts import ChangeBatch
from ..followers import DELTA, KINDS, MYSQL, FollowerSpec
from ..settings import MySQLSettings
from ..state import StateStore
from ..state.delta.location import LakeLocation
from .connections import MySQLConnectionHook
from .storage import BatchStorageHook


class FollowerHook(MySQLConnectionHook):
    """A MySQL follower, from a ``mysql`` connection."""

    default_conn_name = "mysql_follower"
    hook_name = "MySQL CDC follower"
    role = "follower"

    def spec(self) -> FollowerSpec:
        """The follower's kind and settings (secrets included: for the merge job's secrets file)."""
        return FollowerSpec.mysql(self.settings)

    async def aspec(self) -> FollowerSpec:
        """The same for triggers, without blocking the triggerer's event loop."""
        return FollowerSpec.mysql(await self.asettings())

    @cached_property
    def state(self) -> StateStore:
        """The pipeline state store of this follower."""
        return self.spec().state_store()

    def compared(self) -> MySQLSettings:
        """What a verification compares with the leader (``monitor.verify``): this server."""
        return self.settings

    def tables_to_copy(self, batch: ChangeBatch) -> dict[str, str]:
        """Tables of ``batch`` to copy again instead of merging: none (the server replays every DDL)."""
        return {}


class DeltaFollowerHook(BaseHook):
    """A Delta Lake follower at ``location`` (``s3://`` through ``aws_conn_id``, or ``file://``)."""

    hook_name = "MySQL CDC Delta Lake follower"

    def __init__(self, location: str, aws_conn_id: str | None = BatchStorageHook.default_conn_name,
                 changelog: tuple[str, ...] = ()):
        super().__init__()
        self.location = location
        self.aws_conn_id = aws_conn_id
        self.changelog = tuple(changelog)  # db.table globs of the tables with a changelog table

    def spec(self) -> FollowerSpec:
        """The location with the S3 options a process outside Airflow needs (the merge job)."""
        return FollowerSpec.delta(BatchStorageHook(self.location, self.aws_conn_id).spec(), self.changelog)

    async def aspec(self) -> FollowerSpec:
        # the amazon provider's credential chain is blocking: a worker thread, not the event loop
        return await asyncio.to_thread(self.spec)

    @cached_property
    def state(self) -> StateStore:
        return self.spec().state_store()

    def compared(self) -> LakeLocation:
        """What a verification compares with the leader (``monitor.verify``): the lake's tables."""
        return LakeLocation(BatchStorageHook(self.location, self.aws_conn_id).spec())

    def tables_to_copy(self, batch: ChangeBatch) -> dict[str, str]:
        """Tables of ``batch`` (``db.table`` -> why) whose changes the lake cannot take exactly, to copy
        again in this run (``sinks.delta.recopy``), reading the lake's schemas with delta-rs."""
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        from ..sinks.delta.recopy import spark_type, tables_to_copy

        lake, schemas = self.compared(), {}

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


def follower_hook(follower_conn_id: str | None, follower: Mapping[str, Any] | None = None
                  ) -> FollowerHook | DeltaFollowerHook:
    """The hook of a pipeline's follower: a MySQL server by its connection id, or the follower the
    pipelines file describes (``pipeline_config.FollowerConfig.to_json``: JSON-safe, so operators
    and triggers carry it as it is)."""
    if follower is None or follower.get("kind", MYSQL) == MYSQL:
        return FollowerHook(follower_conn_id)
    if follower.get("kind") == DELTA:
        return DeltaFollowerHook(follower["location"], follower.get("aws_conn_id"), follower.get("changelog", ()))
    raise ValueError(f"follower kind {follower.get('kind')!r} is unknown; the kinds are {sorted(KINDS)}")
