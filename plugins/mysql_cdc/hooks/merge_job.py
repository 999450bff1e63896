"""Everything the merge task needs around its spark-submit.

Deciding whether Spark is needed at all (a batch already covered by the checkpoint is skipped, a
batch that captured nothing only moves the checkpoint), the job's inputs (the ``mysql_cdc`` zip
for ``--py-files`` and the 0600 secrets file), and the Spark connection check.

How secrets travel: follower credentials and S3 settings are read from Airflow connections inside
the task, written to a file readable only by the task's user in a private temp directory, and
handed to spark-submit as the *path* in ``MYSQL_CDC_SECRETS_FILE``. The directory is deleted when
spark-submit returns, whatever happened. No secret is ever in argv (visible in ``ps`` and logged
by SparkSubmitHook), in XCom, in the manifest or in a log line.
"""

from __future__ import annotations

import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Iterator

from airflow.sdk import BaseHook

from ..contracts import ChangeBatch, Checkpoint
from ..packaging import MERGE_JOB, build_py_files
from ..settings import SECRETS_ENV, JobSecrets
from .connections import required_connection
from .follower import FollowerHook
from .pipeline import already_applied
from .storage import BatchStorageHook

SUBMIT = "submit"
SKIP = "skip"
ADVANCE = "advance"


@dataclass(frozen=True)
class MergePlan:
    action: str  # SUBMIT | SKIP (already applied) | ADVANCE (captured nothing)
    batch: ChangeBatch
    checkpoint: Checkpoint
    reason: str


@dataclass(frozen=True)
class JobInputs:
    py_files: str
    env: dict[str, str]


class MergeJobHook(BaseHook):
    """``MergeJobHook(follower_conn_id, storage_uri, aws_conn_id, spark_conn_id)``."""

    hook_name = "MySQL CDC merge job"

    def __init__(self, follower_conn_id: str, storage_uri: str, aws_conn_id: str | None, spark_conn_id: str):
        super().__init__()
        self.follower_conn_id = follower_conn_id
        self.storage_uri = storage_uri
        self.aws_conn_id = aws_conn_id
        self.spark_conn_id = spark_conn_id

    @cached_property
    def follower(self) -> FollowerHook:
        return FollowerHook(self.follower_conn_id)

    @cached_property
    def storage(self) -> BatchStorageHook:
        return BatchStorageHook(self.storage_uri, self.aws_conn_id)

    def plan(self, manifest_uri: str) -> MergePlan:
        """Raises RangeGapError when the batch starts after the checkpoint."""
        batch = self.storage.read_manifest(manifest_uri)
        checkpoint = self.follower.read_checkpoint(batch.pipeline)
        if already_applied(batch.range, checkpoint, batch.pipeline):
            return MergePlan(SKIP, batch, checkpoint,
                             f"batch {batch.range} is already applied (checkpoint {checkpoint.position})")
        if not batch.segments and checkpoint.position == batch.start and checkpoint.pending_ddl_pos is None:
            return MergePlan(ADVANCE, batch, checkpoint,
                             f"batch {batch.range} captured no change of this pipeline's tables")
        return MergePlan(SUBMIT, batch, checkpoint,
                         f"applying batch {batch.range} ({batch.row_count} rows, {len(batch.segments)} segments) "
                         f"on checkpoint {checkpoint.position}")

    def advance(self, plan: MergePlan) -> bool:
        """Move the checkpoint across an empty batch; False if it moved meanwhile (then submit)."""
        return self.follower.advance_over_empty_batch(plan.batch)

    def check_spark_connection(self) -> None:
        # SparkSubmitHook falls back to master "yarn" when the connection is missing, which on a
        # machine without YARN fails minutes later with an unrelated-looking error.
        required_connection(self.spark_conn_id, "Spark")

    @contextmanager
    def job_inputs(self) -> Iterator[JobInputs]:
        """The zip for --py-files and the secrets file, alive only while the caller submits."""
        if not MERGE_JOB.is_file():
            raise FileNotFoundError(
                f"the merge job {MERGE_JOB} does not exist; deploy spark_jobs/ beside plugins/ "
                "or set MYSQL_CDC_SPARK_JOBS_DIR to its directory"
            )
        secrets = JobSecrets(follower=self.follower.settings, s3=self.storage.s3_settings())
        tmp = Path(tempfile.mkdtemp(prefix="mysql-cdc-merge-"))  # mode 0700: private to this user
        try:
            py_files = build_py_files(tmp)
            secrets_file = tmp / "job-secrets.json"
            secrets.write(str(secrets_file))  # created 0600 before a byte is written
            yield JobInputs(py_files=py_files, env={SECRETS_ENV: str(secrets_file)})
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
