"""Delta Lake tables as the follower: the leader's table ``db.t`` is the Delta table
``<location>/db/t``, and the pipeline's state is a few small Delta tables under
``<location>/_mysql_cdc/<pipeline>/`` (the checkpoint row holds every table's version: the
consistent cut, ``state.cut``). ``docs/lakehouse.md`` is the user's page.

- ``sink``: what the merge job writes (a ``MERGE`` per table, idempotent under the segment's
  transaction id; DDL with column mapping; changelog tables);
- ``state``: the ``StateStore`` on delta-rs (the Airflow side never starts Spark);
- ``hook``: the Airflow side (a location and its AWS connection); ``verify``: the cut's rows
  hashed against the leader's;
- ``submit``: the Delta and S3A jars and properties of its Spark jobs;
- ``sink.maintenance``: compaction and vacuum that keep the cut readable.

The pipelines file names it ``follower: {kind: delta, location: s3://bucket/lake, changelog: [...],
features: standard|portable, partition_by: {db.table glob: [columns]}, soft_deletes: [...], history:
[...], catalog: {metastore_uri: thrift://host:9083}}`` (``options``; the history modes:
``merge.soft_deletes``, ``merge.history``; the tables by name in a Hive Metastore: ``catalog``).
"""

from __future__ import annotations

from typing import Any, Mapping

from .. import FollowerSpec
from ..base import FollowerKind, SubmitNeeds
from .options import LakeOptions


class DeltaKind(FollowerKind):
    name = "delta"
    config_keys = frozenset({"location"}) | LakeOptions.KEYS
    maintained = True

    def reference(self, section: Mapping[str, Any], aws_conn_id: str | None) -> dict[str, Any]:
        from ...storage import normalize_uri

        location = section.get("location")
        if not isinstance(location, str) or not location.strip():
            raise ValueError(f"location: must be s3://bucket/prefix or file:///absolute/path, got {location!r}")
        try:
            location = normalize_uri(location.strip())
        except ValueError as exc:
            raise ValueError(f"location: {exc}") from None
        return {"kind": self.name, "location": location, "aws_conn_id": aws_conn_id,
                **LakeOptions.from_config(section).to_json()}

    def describe(self, reference: Mapping[str, Any]) -> str:
        catalog = reference.get("catalog")
        named = f", named in the Hive Metastore {catalog['metastore_uri']}" if catalog else ""
        return f"{self.name} at {reference['location']}{named}"

    def table_uri(self, reference: Mapping[str, Any], table: str) -> str:
        return f"{reference['location'].rstrip('/')}/{table.replace('.', '/', 1)}"

    def hook(self, reference: Mapping[str, Any]):
        from .hook import DeltaFollowerHook

        return DeltaFollowerHook(reference["location"], reference.get("aws_conn_id"), LakeOptions.from_json(reference))

    def state_store(self, settings: Mapping[str, Any]):
        from .state import DeltaStateStore

        return DeltaStateStore.from_settings(settings)

    def sink(self, settings: Mapping[str, Any], leader_flavor: str | None):
        from .sink import DeltaSink

        return DeltaSink.from_settings(settings, leader_flavor)

    def submit_needs(self, spark_line: str) -> SubmitNeeds:
        from .submit import submit_needs

        return submit_needs(spark_line)

    def maintain(self, spark: Any, settings: Mapping[str, Any], pipeline: str, retain_hours: float) -> list:
        """OPTIMIZE and VACUUM every table of the cut and the state tables (``sink.maintenance``)."""
        from .sink import DeltaSink
        from .sink.maintenance import maintain_lake

        sink = DeltaSink.from_settings(settings, None)
        sink.attach(lambda: spark)
        sink.spark()  # the lake's S3A settings on the session
        return maintain_lake(spark, sink.location, pipeline, retain_hours, sink.version)


KIND = DeltaKind()


def follower_spec(location, options: LakeOptions = LakeOptions()) -> FollowerSpec:
    """A Delta Lake follower at ``location`` (a ``storage.StorageSpec``: its S3 options are its
    secrets) whose tables are as ``options`` say."""
    return FollowerSpec(KIND.name, {"location": location.to_json(), **options.to_json()})
