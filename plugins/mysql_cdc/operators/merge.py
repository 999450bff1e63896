"""Apply a change batch to the follower: the Spark merge job, submitted by SparkSubmitOperator."""

from __future__ import annotations

from functools import cached_property
from typing import Any, Sequence

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import Context
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from ..hooks.follower import FollowerHook
from ..hooks.merge_job import ADVANCE, SKIP, MergeJobHook
from ..hooks.pipeline import RangeGapError
from ..hooks.storage import BatchStorageHook
from ..packaging import MERGE_JOB


class CdcMergeOperator(SparkSubmitOperator):
    """``spark-submit --py-files mysql_cdc.zip merge_batch.py --manifest-uri <manifest_uri>``.

    ``manifest_uri`` is usually the extract task's XCom (``extract.output``). Built at execute
    time: the zip of this very ``mysql_cdc`` package (one definition of the contracts on both
    sides) and the secrets file (see ``hooks.merge_job``), passed to the job only as a path in an
    environment variable and deleted when spark-submit returns. A batch the checkpoint already
    covers is skipped without starting Spark; one that captured nothing only moves the checkpoint.
    """

    template_fields: Sequence[str] = (*SparkSubmitOperator.template_fields, "manifest_uri")
    ui_color = "#e4f0e8"

    def __init__(self, *, manifest_uri: str, storage_uri: str,
                 follower_conn_id: str = FollowerHook.default_conn_name,
                 aws_conn_id: str | None = BatchStorageHook.default_conn_name,
                 spark_conn_id: str = "spark_default", **kwargs: Any):
        kwargs.setdefault("name", "mysql-cdc-merge")
        super().__init__(application=str(MERGE_JOB), conn_id=spark_conn_id, **kwargs)
        self.manifest_uri = manifest_uri
        self.storage_uri = storage_uri
        self.follower_conn_id = follower_conn_id
        self.aws_conn_id = aws_conn_id
        self.spark_conn_id = spark_conn_id

    @cached_property
    def job_hook(self) -> MergeJobHook:
        return MergeJobHook(self.follower_conn_id, self.storage_uri, self.aws_conn_id, self.spark_conn_id)

    def execute(self, context: Context) -> None:
        if not self.manifest_uri or self.manifest_uri == "None":
            raise AirflowFailException("no manifest_uri: the extract task returned no batch")
        try:
            plan = self.job_hook.plan(self.manifest_uri)
        except RangeGapError as exc:
            raise AirflowFailException(str(exc)) from None
        self.log.info(plan.reason)
        if plan.action == SKIP:
            raise AirflowSkipException(plan.reason)
        if plan.action == ADVANCE and self.job_hook.advance(plan):
            self.log.info("checkpoint moved to %s without Spark", plan.batch.end)
            return
        self.job_hook.check_spark_connection()
        with self.job_hook.job_inputs() as inputs:
            self.py_files = inputs.py_files
            self.application_args = ["--manifest-uri", self.manifest_uri]
            self.env_vars = {**(self.env_vars or {}), **inputs.env}
            self._hook = None  # SparkSubmitHook is built from the attributes above
            super().execute(context)
