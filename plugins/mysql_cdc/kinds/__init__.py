"""Follower kinds: the registry. A pipeline's follower is one kind, and everything outside a
kind's package reaches the kind through here, by its name, never by importing its modules.

``KINDS`` maps a kind's name to where its ``FollowerKind`` is (``module:attribute``, imported
when first asked for, so the Airflow side never imports a sink and the Spark job never imports
Airflow). ``FollowerSpec`` is how one follower is reached (its kind and that kind's settings,
secrets included): built on the Airflow side by the kind's hook and handed to the Spark jobs in
their 0600 secrets file (``job_secrets``).

Adding a kind: its package ``kinds/<kind>/`` (``FollowerKind`` in ``kinds.base``; its sink, state
store, hook, submit needs), and one line in ``KINDS``. ``tests/kinds`` runs the state store and
sink conformance suites against every kind in ``KINDS``; ``docs/architecture.md`` draws it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from importlib import import_module
from typing import TYPE_CHECKING, Any, Mapping

from .base import FollowerKind, SubmitNeeds

if TYPE_CHECKING:
    from ..contracts import ChangeBatch
    from ..merge.sink import Sink
    from ..state_store import StateStore

KINDS: dict[str, str] = {
    "mysql": "mysql_cdc.kinds.mysql:KIND",
    "delta": "mysql_cdc.kinds.delta:KIND",
    "iceberg": "mysql_cdc.kinds.iceberg:KIND",
}

# the kind of a pipeline's ``follower_conn_id: <connection>`` (the short form of ``follower:``)
CONNECTION_KIND = "mysql"

__all__ = ["CONNECTION_KIND", "KINDS", "FollowerKind", "FollowerSpec", "FollowerSpecError", "SubmitNeeds", "kind"]


class FollowerSpecError(ValueError):
    pass


@lru_cache(maxsize=None)
def kind(name: str) -> FollowerKind:
    """The kind called ``name``; a ``FollowerSpecError`` naming the known kinds otherwise."""
    if name not in KINDS:
        raise FollowerSpecError(f"follower kind {name!r} is unknown; the kinds are {sorted(KINDS)}")
    module, _, attribute = KINDS[name].partition(":")
    return getattr(import_module(module), attribute)


@dataclass(frozen=True)
class FollowerSpec:
    """A follower: its kind and that kind's settings. The settings hold its secrets (a password):
    the spec travels only in the Spark jobs' 0600 secrets file, never in XCom, argv or a log
    line (``repr`` leaves the settings out)."""

    kind: str
    settings: Mapping[str, Any] = field(repr=False)

    def __post_init__(self) -> None:
        kind(self.kind)  # an unknown kind fails here, naming the known ones

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "settings": dict(self.settings)}

    @classmethod
    def from_json(cls, body: Any, where: str) -> "FollowerSpec":
        if not isinstance(body, dict) or set(body) != {"kind", "settings"} or not isinstance(body["settings"], dict):
            raise FollowerSpecError(f"{where}: expected {{\"kind\": ..., \"settings\": {{...}}}}, got {body!r:.80}")
        try:
            return cls(body["kind"], body["settings"])
        except FollowerSpecError as exc:
            raise FollowerSpecError(f"{where}: {exc}") from None

    @property
    def follower_kind(self) -> FollowerKind:
        return kind(self.kind)

    def state_store(self) -> "StateStore":
        """The kind's state store for this follower."""
        return self.follower_kind.state_store(self.settings)

    def submit_needs(self, spark_line: str) -> SubmitNeeds:
        """The kind's spark-submit jars and properties on Spark ``spark_line`` (none for most kinds)."""
        return self.follower_kind.submit_needs(spark_line)

    def spark_needed(self, batch: "ChangeBatch", driver_net_rows: int) -> str | None:
        """Why the kind's merge job needs Spark for ``batch``, or None (``FollowerKind.spark_needed``)."""
        return self.follower_kind.spark_needed(batch, driver_net_rows)

    def sink(self, leader_flavor: str | None) -> "Sink":
        """The kind's sink for this follower (open it with ``with``); ``leader_flavor``: the batch's
        server flavor, for a sink that translates the leader's DDL."""
        return self.follower_kind.sink(self.settings, leader_flavor)
