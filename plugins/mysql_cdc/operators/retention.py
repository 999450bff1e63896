"""The pipeline's change batches kept no longer than its ``batches: {retain: ...}`` says."""

from __future__ import annotations

from functools import cached_property
from typing import Any, Sequence

from airflow.sdk import BaseOperator, Context

from ..hooks.follower import FollowerRef, follower_reference
from ..hooks.pipeline import CdcPipelineHook
from ..hooks.storage import BatchStorageHook
from ..text import plural


class CdcRetireBatchesOperator(BaseOperator):
    """Delete ``pipeline``'s applied change batches older than ``retain`` that nothing needs
    (``batch_retention``: never one not applied yet, the checkpoint's own or an unfinished
    snapshot's), log what went and what is kept, and return the pass's record as XCom.

    Runs at the end of every run, after the merge whatever became of it (trigger rule
    ``none_failed``: a run with nothing new still retires what has aged since)."""

    template_fields: Sequence[str] = ("aws_conn_id", "follower")
    ui_color = "#f3efe6"

    def __init__(self, *, pipeline: str, storage_uri: str, follower: FollowerRef, retain: str,
                 aws_conn_id: str | None = BatchStorageHook.default_conn_name, **kwargs: Any):
        kwargs.setdefault("trigger_rule", "none_failed")
        super().__init__(**kwargs)
        self.pipeline = pipeline
        self.storage_uri = storage_uri
        self.follower = follower_reference(follower)  # one JSON-safe reference (hooks.follower)
        self.retain = retain
        self.aws_conn_id = aws_conn_id

    @cached_property
    def hook(self) -> CdcPipelineHook:
        return CdcPipelineHook(self.pipeline, follower=self.follower, storage_uri=self.storage_uri,
                               aws_conn_id=self.aws_conn_id)

    def execute(self, context: Context) -> dict:
        record = self.hook.retire_batches(self.retain)
        self.log.info("pipeline %s: deleted %s (%.1f MiB) applied more than %s ago; kept %s (%.1f MiB)",
                      self.pipeline, plural(record.deleted_batches, "batch", "batches"), record.deleted_bytes / 2**20,
                      self.retain, plural(record.kept_batches, "batch", "batches"), record.kept_bytes / 2**20)
        return {k: v for k, v in vars(record).items() if k != "retired_ids"}
