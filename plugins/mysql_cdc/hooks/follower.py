"""The follower as the Airflow side reaches it: the hook of the pipeline's follower kind.

Only the merge job writes follower data. The Airflow side reads the pipeline's state, and moves
the checkpoint only where no row moves with it: its creation before the first merge, an empty
batch, a failover's rebase, a snapshot's start. What a hook offers is ``FollowerHookBase``; each
kind's package has its own (``kinds/<kind>/hook.py``), found through the registry.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from functools import cached_property
from typing import TYPE_CHECKING, Any, Mapping, Union

from ..kinds import CONNECTION_KIND, FollowerSpec, kind

if TYPE_CHECKING:
    from ..contracts import ChangeBatch
    from ..monitor.verify import FollowerSides
    from ..state_store import StateStore


# the Airflow connection of a MySQL follower when a pipeline names none
DEFAULT_FOLLOWER_CONN_ID = "mysql_follower"


class FollowerHookBase(ABC):
    """What the Airflow side asks of a follower, whatever its kind."""

    @abstractmethod
    def spec(self) -> FollowerSpec:
        """The follower's kind and settings (secrets included: for the Spark jobs' secrets file)."""

    @abstractmethod
    async def aspec(self) -> FollowerSpec:
        """The same for triggers, without blocking the triggerer's event loop."""

    @cached_property
    def state(self) -> "StateStore":
        """The pipeline state store of this follower."""
        return self.spec().state_store()

    @abstractmethod
    def checksum_sides(self) -> "FollowerSides":
        """How a verification compares this follower with the leader (``monitor.verify``)."""

    @abstractmethod
    def table_uri(self, database: str, table: str) -> str:
        """The follower table of the leader's ``database.table`` as an Airflow asset names it (the
        merge task's asset events, ``table_assets``)."""

    def tables_to_copy(self, batch: "ChangeBatch") -> dict[str, str]:
        """Tables of ``batch`` (``db.table`` -> why) whose changes this follower cannot take
        exactly, to copy again in this run instead of merging: none by default."""
        return {}


# One reference to a pipeline's follower, as operators, sensors and triggers carry it (JSON-safe, no
# secret): the kind's own form, ``{"kind": "delta", "location": ..., ...}``
# (``pipeline_config.PipelineConfig.follower_reference``), or a MySQL connection id, the short form.
FollowerRef = Union[str, Mapping[str, Any], None]


def follower_reference(follower: FollowerRef) -> dict[str, Any]:
    """The reference as a mapping: a connection id (or None: the default one) is a MySQL follower."""
    if follower is None or isinstance(follower, str):  # the short form: the connection kind's own reference
        return kind(CONNECTION_KIND).reference({"conn_id": follower or DEFAULT_FOLLOWER_CONN_ID}, None)
    return dict(follower)


def follower_hook(follower: FollowerRef) -> FollowerHookBase:
    """The hook of a pipeline's follower, by its kind (``kinds.KINDS``)."""
    reference = follower_reference(follower)
    return kind(reference.get("kind", "")).hook(reference)
