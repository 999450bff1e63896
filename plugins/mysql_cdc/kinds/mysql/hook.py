"""A MySQL follower as the Airflow side reaches it: a ``mysql`` Airflow connection."""

from __future__ import annotations

from ...hooks.connections import MySQLConnectionHook
from ...hooks.follower import DEFAULT_FOLLOWER_CONN_ID, FollowerHookBase
from ...kinds import FollowerSpec
from . import follower_spec
from ...monitor.verify import FollowerSides
from .verify import checksum_sides

class FollowerHook(MySQLConnectionHook, FollowerHookBase):
    """A MySQL follower, from a ``mysql`` connection."""

    default_conn_name = DEFAULT_FOLLOWER_CONN_ID
    hook_name = "MySQL CDC follower"
    role = "follower"

    def spec(self) -> FollowerSpec:
        return follower_spec(self.settings)

    async def aspec(self) -> FollowerSpec:
        return follower_spec(await self.asettings())

    def checksum_sides(self) -> FollowerSides:
        """This server, summing its own chunks."""
        return checksum_sides(self.settings)

    def table_uri(self, database: str, table: str) -> str:
        """``mysql://host:port/database/table``, the form of the mysql provider's assets."""
        settings = self.settings
        return f"mysql://{settings.host}:{settings.port}/{database}/{table}"
