"""A MySQL or MariaDB server as the follower: the leader's table ``db.t`` is the table ``db.t`` on
the follower, and the pipeline's state is the follower's own ``_mysql_cdc`` schema, written in
the same transaction as the rows it covers.

- ``sink``: what the merge job writes a batch with (``LOAD DATA`` staging, one follower
  transaction per segment, DDL translated between flavors);
- ``state``: the ``StateStore`` on the ``_mysql_cdc`` schema;
- ``hook``: the Airflow side (a ``mysql`` connection); ``verify``: chunks summed in the server.

The pipelines file names it ``follower: {kind: mysql, conn_id: <connection>}``, or
``follower_conn_id: <connection>`` for short.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..base import FollowerKind, netted_by_spark
from .. import FollowerSpec


class MySQLKind(FollowerKind):
    name = "mysql"
    config_keys = frozenset({"conn_id"})

    def reference(self, section: Mapping[str, Any], aws_conn_id: str | None) -> dict[str, Any]:
        conn_id = section.get("conn_id")
        if not isinstance(conn_id, str) or not conn_id.strip():
            raise ValueError(f"conn_id: must be the follower's Airflow connection id, got {conn_id!r}")
        return {"kind": self.name, "conn_id": conn_id.strip()}

    def describe(self, reference: Mapping[str, Any]) -> str:
        return str(reference["conn_id"])

    def hook(self, reference: Mapping[str, Any]):
        from .hook import FollowerHook

        return FollowerHook(reference.get("conn_id"))

    def state_store(self, settings: Mapping[str, Any]):
        from ...server_state import MySQLStateStore

        return MySQLStateStore.from_settings(settings)

    def sink(self, settings: Mapping[str, Any], leader_flavor: str | None):
        from .sink import MySQLSink

        return MySQLSink.from_settings(settings, leader_flavor)

    def spark_needed(self, batch, driver_net_rows: int) -> str | None:
        """Spark's executors do what the driver does not: net a table of more than
        ``driver_net_rows`` change rows in a segment, and fold a copy's catch-up into its chunks.
        (DDL is replayed on the follower; a small table's rows, and a copy with nothing to fold in,
        go from the driver.) A copy of a table with triggers or foreign keys is loaded through Spark
        too, which only the follower knows: the job then stops before touching it."""
        caught_up = [s for s in batch.segments
                     if s.kind == "snapshot" and s.catch_up is not None and s.catch_up.files]
        if caught_up:
            return f"{caught_up[0].qualified_name}: its copy has changes to fold in"
        return netted_by_spark(batch, driver_net_rows)


KIND = MySQLKind()


def follower_spec(settings) -> FollowerSpec:
    """The spec of a MySQL follower reached with ``settings`` (``mysql_server.MySQLSettings``)."""
    from dataclasses import asdict

    return FollowerSpec(KIND.name, asdict(settings))
