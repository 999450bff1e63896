"""Follower kinds: what a pipeline's follower is, and which state store and sink serve it.

A follower kind is two implementations, each one module of its own: a state store
(``mysql_cdc.state``: the checkpoint, positions, history and verification results, read by the
Airflow side) and a sink (``mysql_cdc.sinks``: what the Spark job writes a batch with). ``KINDS``
names them; ``FollowerSpec`` is how one follower is reached, built on the Airflow side from its
connection (``hooks.follower``) and handed to the merge job in its secrets file.

Adding a kind: its ``state/<kind>`` and ``sinks/<kind>`` modules, a line in ``KINDS``, how the
pipelines file names it (``pipeline_config``) and how its spec is built from connections
(``hooks.follower``). Nothing else changes: the sensor, trigger, lag, verify and UI see the
store's interface, the merge job the sink's. ``docs/architecture.md`` draws it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from importlib import import_module
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from .settings import MySQLSettings
    from .sinks.base import Sink
    from .state.base import StateStore
    from .storage import StorageSpec

MYSQL = "mysql"
DELTA = "delta"


@dataclass(frozen=True)
class FollowerKind:
    """Where a kind's implementations are (``module:name``, imported when first used, so the
    Airflow side never imports a sink and the Spark job never imports Airflow): its state store,
    its sink, and (optional) what its merge job needs from spark-submit (``SubmitNeeds``)."""

    state_store: str
    sink: str
    submit_needs: str | None = None


@dataclass(frozen=True)
class SubmitNeeds:
    """What a follower kind's merge job needs on its spark-submit command line: jars (local
    paths) and Spark properties. Never a secret: the command line is logged."""

    jars: tuple[str, ...] = ()
    conf: tuple[tuple[str, str], ...] = ()


KINDS: dict[str, FollowerKind] = {
    MYSQL: FollowerKind("mysql_cdc.state.mysql:MySQLStateStore", "mysql_cdc.sinks.mysql:MySQLSink"),
    DELTA: FollowerKind("mysql_cdc.state.delta:DeltaStateStore", "mysql_cdc.sinks.delta:DeltaSink",
                        "mysql_cdc.state.delta.packages:submit_needs"),
}


class FollowerSpecError(ValueError):
    pass


@dataclass(frozen=True)
class FollowerSpec:
    """A follower: its kind and that kind's settings. The settings hold its secrets (a password):
    the spec travels only in the merge job's 0600 secrets file, never in XCom, argv or a log
    line (``repr`` leaves the settings out)."""

    kind: str
    settings: Mapping[str, Any] = field(repr=False)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise FollowerSpecError(f"follower kind {self.kind!r} is unknown; the kinds are {sorted(KINDS)}")

    @classmethod
    def mysql(cls, settings: "MySQLSettings") -> "FollowerSpec":
        return cls(MYSQL, asdict(settings))

    @classmethod
    def delta(cls, location: "StorageSpec", changelog: tuple[str, ...] = ()) -> "FollowerSpec":
        """A Delta Lake follower at ``location`` (its S3 options are its secrets); ``changelog``:
        db.table globs of the tables that get a changelog table."""
        return cls(DELTA, {"location": location.to_json(), "changelog": list(changelog)})

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

    def _load(self, what: str):
        module, _, name = getattr(KINDS[self.kind], what).partition(":")
        return getattr(import_module(module), name)

    def state_store(self) -> "StateStore":
        """The kind's state store for this follower."""
        return self._load("state_store").from_settings(self.settings)

    def submit_needs(self) -> SubmitNeeds:
        """The kind's spark-submit jars and properties (none for most kinds)."""
        return self._load("submit_needs")() if KINDS[self.kind].submit_needs else SubmitNeeds()

    def sink(self, leader_flavor: str | None) -> "Sink":
        """The kind's sink for this follower (open it with ``with``); ``leader_flavor``: the batch's
        server flavor, for a sink that translates the leader's DDL."""
        return self._load("sink").from_settings(self.settings, leader_flavor)
