"""Extract the pipeline's next binlog range (or a range to replay) into a change batch."""

from __future__ import annotations

import time
from functools import cached_property
from typing import Any, Sequence

from airflow.sdk import Asset, BaseOperator, Context
from airflow.sdk.exceptions import AirflowSkipException

from ..run_params import replay_range, resnapshot_tables
from ..capture.filters import TableFilter
from ..hooks.follower import DEFAULT_FOLLOWER_CONN_ID, FollowerRef, follower_reference
from ..hooks.leader import LeaderHook
from ..hooks.pipeline import CdcPipelineHook
from ..hooks.storage import BatchStorageHook
from ..pipeline_options import ExtractOptions, SnapshotOptions
from ..storage import batches_uri
from . import metrics
from .retries import fail_fast_when_permanent


def batches_asset(storage_uri: str, pipeline: str) -> Asset:
    return Asset(uri=batches_uri(storage_uri, pipeline), name=f"{pipeline}_batches")


class CdcExtractOperator(BaseOperator):
    """Write the batch of [checkpoint, leader position now) — or of the run's ``start``/``end``
    params — and return its manifest URIs (the XCom the merge reads): one, or for a run that
    copies tables two, the copy and the catch-up that brings every table to the copy's end.

    The first run of a pipeline writes its checkpoint at ``start_position`` first. An empty range
    writes nothing and skips the merge. A replay never moves the checkpoint, and one that
    starts after the checkpoint fails at once (it would leave a gap). The batch directory is the
    task's asset outlet; each batch is an asset event whose extra names it.
    """

    template_fields: Sequence[str] = ("leader_conn_id", "follower", "aws_conn_id", "start_position")
    ui_color = "#fdf1e3"

    def __init__(self, *, pipeline: str, storage_uri: str, leader_conn_id: str = LeaderHook.default_conn_name,
                 follower: FollowerRef = DEFAULT_FOLLOWER_CONN_ID,
                 aws_conn_id: str | None = BatchStorageHook.default_conn_name,
                 include: Sequence[str] = ("*.*",), exclude: Sequence[str] = (),
                 start_position: str = "snapshot", on_purged: str = "fail",
                 snapshot_options: SnapshotOptions = SnapshotOptions(),
                 extract_options: ExtractOptions = ExtractOptions(), **kwargs: Any):
        kwargs.setdefault("outlets", [batches_asset(storage_uri, pipeline)])
        super().__init__(**kwargs)
        self.pipeline = pipeline
        self.storage_uri = storage_uri
        self.leader_conn_id = leader_conn_id
        self.follower = follower_reference(follower)  # one JSON-safe reference (hooks.follower)
        self.aws_conn_id = aws_conn_id
        self.include = tuple(include)
        self.exclude = tuple(exclude)
        self.start_position = start_position
        self.on_purged = on_purged
        self.snapshot_options = snapshot_options
        self.extract_options = extract_options

    @cached_property
    def hook(self) -> CdcPipelineHook:
        return CdcPipelineHook(
            self.pipeline, self.leader_conn_id, self.follower, self.storage_uri, self.aws_conn_id,
            TableFilter(self.include, self.exclude), self.start_position, self.on_purged, self.snapshot_options,
            self.extract_options,
        )

    def execute(self, context: Context) -> list[str]:
        started = time.monotonic()
        with fail_fast_when_permanent():  # a bad range, a gap, binlog settings: no retry fixes them
            params = context["params"]
            result = self.hook.extract(replay_range(params), resnapshot_tables(params))
        if result.batch is None:
            raise AirflowSkipException(f"nothing to extract: {result.range} is empty")
        seconds = time.monotonic() - started
        self.hook.record_extract(result, context["run_id"], seconds)
        metrics.batch_extracted(self.pipeline, result.batch.row_count, seconds)
        for asset in self.outlets:
            context["outlet_events"][asset].extra = result.asset_extra()
        self.log.info("batch %s: %d rows in %d segments -> %s", result.batch.batch_id,
                      result.batch.row_count, len(result.batch.segments), result.manifest_uri)
        if result.catch_up is not None:
            self.log.info("catch-up batch %s: %d rows in %d segments -> %s", result.catch_up.batch_id,
                          result.catch_up.row_count, len(result.catch_up.segments), result.catch_up_uri)
        return result.manifest_uris
