"""Apply a change batch to the follower: the Spark merge job, through ``MergeJobHook``."""

from __future__ import annotations

import json
import time
from functools import cached_property
from typing import Any, Sequence

from airflow.sdk import Asset, AssetAlias, BaseOperator, Context
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from ..hooks.follower import DEFAULT_FOLLOWER_CONN_ID, FollowerRef, follower_reference
from ..hooks.merge_job import ADVANCE, SKIP, MergeJobHook
from ..hooks.storage import BatchStorageHook
from ..pipeline_options import SPARK_ALWAYS, MergeOptions
from . import metrics
from .retries import fail_fast_when_permanent
from ..table_assets import pipeline_alias


class CdcMergeOperator(BaseOperator):
    """``spark-submit --py-files mysql_cdc.zip merge_batch.py --manifest-uri <uri> [--manifest-uri <uri>]``.

    ``manifest_uri``: a manifest URI, or a list applied in order; usually the extract task's XCom
    (``extract.output``: a copy's run gives the copy and its catch-up). A batch the
    checkpoint already covers is skipped without starting Spark; one that captured nothing only
    moves the checkpoint; anything else is submitted to the Spark connection ``spark_conn_id``
    (client deploy mode) with ``conf`` as its Spark properties. ``spark``: ``"when_needed"`` merges
    a batch the follower kind can apply without Spark with this worker's Python alone, no
    spark-submit (the pipeline's ``merge.spark``). See ``hooks.merge_job``.
    """

    template_fields: Sequence[str] = ("manifest_uri", "follower", "aws_conn_id", "spark_conn_id", "conf")
    template_fields_renderers = {"conf": "json"}
    ui_color = "#e4f0e8"

    def __init__(self, *, manifest_uri: str | Sequence[str], storage_uri: str,
                 follower: FollowerRef = DEFAULT_FOLLOWER_CONN_ID,
                 aws_conn_id: str | None = BatchStorageHook.default_conn_name,
                 spark_conn_id: str = "spark_default", conf: dict[str, Any] | None = None,
                 name: str = "mysql-cdc-merge", pipeline: str | None = None, spark: str = SPARK_ALWAYS,
                 **kwargs: Any):
        if pipeline:  # an asset event per table changed, through the pipeline's alias (``table_assets``)
            kwargs.setdefault("outlets", [AssetAlias(pipeline_alias(pipeline))])
        super().__init__(**kwargs)
        self.pipeline = pipeline  # for the failure callback's history row (the batch names its own)
        self.manifest_uri = manifest_uri
        self.storage_uri = storage_uri
        self.follower = follower_reference(follower)  # one JSON-safe reference (hooks.follower)
        self.aws_conn_id = aws_conn_id
        self.spark_conn_id = spark_conn_id
        self.conf = conf or {}
        self.name = name
        self.spark = MergeOptions(spark=spark).spark  # checked: "always" or "when_needed"

    @cached_property
    def hook(self) -> MergeJobHook:
        return MergeJobHook(self.follower, self.storage_uri, self.aws_conn_id, self.spark_conn_id)

    def execute(self, context: Context) -> list[dict] | None:
        uris = [self.manifest_uri] if isinstance(self.manifest_uri, str) else list(self.manifest_uri or ())
        if not uris or "None" in uris:
            raise AirflowFailException("no manifest_uri: the extract task returned no batch")
        with fail_fast_when_permanent():  # a gap, another leader's batch: no retry fixes them
            plan = self.hook.plan(uris)
        self.log.info(plan.reason)
        started, run_id = time.monotonic(), context["run_id"]
        if plan.action == SKIP:
            self.hook.record_merged(plan, run_id, 0, 0.0)
            raise AirflowSkipException(plan.reason)
        if plan.action == ADVANCE and self.hook.advance(plan):
            self.hook.record_merged(plan, run_id, 0, time.monotonic() - started)
            self.log.info("checkpoint moved to %s without Spark", plan.batch.end)
            return None
        with fail_fast_when_permanent():  # the job says whether its error is (MergeJobError.permanent)
            summaries = self.hook.submit(plan.manifest_uris, self.name, self.conf, self.spark)
        seconds, net_rows = time.monotonic() - started, sum(s.net_rows for s in summaries)
        self.hook.record_merged(plan, run_id, net_rows, seconds)
        metrics.batch_merged(plan.batch.pipeline, net_rows, seconds)
        if not summaries:
            return None
        self._emit_table_events(context, plan.manifest_uris, summaries)
        for summary in summaries:  # last in the log, under Spark's lines: what the run did
            for line in summary.describe():
                self.log.info("%s", line)
        return [json.loads(s.to_json()) for s in summaries]  # the XCom: the batches' figures (no secrets)

    def _emit_table_events(self, context: Context, manifest_uris: Sequence[str], summaries: list) -> None:
        if not self.pipeline:
            return
        alias = AssetAlias(pipeline_alias(self.pipeline))
        for uri, extra in self.hook.table_events(self.pipeline, manifest_uris, summaries):
            context["outlet_events"][alias].add(Asset(uri), extra=extra)

    def on_kill(self) -> None:
        self.hook.kill()
