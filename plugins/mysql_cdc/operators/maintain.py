"""A lake follower's maintenance (its kind's ``FollowerKind.maintain``: compaction, vacuum), as a Spark job."""

from __future__ import annotations

from functools import cached_property
from typing import Any, Sequence

from airflow.sdk import BaseOperator, Context

from ..hooks.merge_job import MergeJobHook
from ..hooks.storage import BatchStorageHook
from ..pipeline_options import MaintenanceOptions


class CdcLakeMaintenanceOperator(BaseOperator):
    """The follower kind's maintenance job (``spark_jobs/maintain_lake.py``) with the kind's jars, on
    ``spark_conn_id``: for a Delta Lake, ``OPTIMIZE`` and ``VACUUM RETAIN <retain_hours> HOURS`` of
    every table of the pipeline's consistent cut and its state tables, never breaking the cut."""

    template_fields: Sequence[str] = ("aws_conn_id", "spark_conn_id", "conf")
    ui_color = "#e8f1f8"

    def __init__(self, *, pipeline: str, follower: dict[str, Any], storage_uri: str,
                 aws_conn_id: str | None = BatchStorageHook.default_conn_name, spark_conn_id: str = "spark_default",
                 options: MaintenanceOptions = MaintenanceOptions(), conf: dict[str, Any] | None = None,
                 **kwargs: Any):
        super().__init__(**kwargs)
        self.pipeline = pipeline
        self.follower = dict(follower)  # the one reference (hooks.follower)
        self.storage_uri = storage_uri
        self.aws_conn_id = aws_conn_id
        self.spark_conn_id = spark_conn_id
        self.options = options
        self.conf = conf or {}

    @cached_property
    def hook(self) -> MergeJobHook:
        return MergeJobHook(self.follower, self.storage_uri, self.aws_conn_id, self.spark_conn_id)

    def execute(self, context: Context) -> None:
        self.hook.maintain(self.pipeline, self.options.retain_hours, f"mysql-cdc-maintain-{self.pipeline}", self.conf)

    def on_kill(self) -> None:
        self.hook.kill()
