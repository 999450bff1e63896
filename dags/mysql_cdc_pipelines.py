"""The Airflow DAGs of each pipeline of the pipelines file.

``<name>``: wait_for_changes -> extract_batch -> merge_batch -> check_lag, on the pipeline's schedule.
``<name>_verify``: verify_follower, on the ``verify`` section's schedule: checksums of every table.
``<name>_maintain`` (a follower kind with maintenance: a lake): maintain_lake, on the ``maintenance`` schedule.

The file is ``$CDC_PIPELINES_FILE``, or ``pipelines.yaml`` beside this one. A mistake in it stops
this file from importing, so the UI shows an import error naming the pipeline and the field
instead of DAGs that fail later (see mysql_cdc.pipeline_config for the format).

Manual runs take optional params: ``start`` and ``end`` (binlog positions ``FILE:OFFSET``, the
trigger form's "Replay binlog range"): the run re-reads that range instead of [checkpoint, leader
now); ``resnapshot`` ("Re-copy tables"): the run copies those tables again.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

from airflow.sdk import DAG

from mysql_cdc.run_params import run_params
from mysql_cdc.operators import (
    CdcExtractOperator, CdcLagCheckOperator, CdcLakeMaintenanceOperator, CdcMergeOperator, CdcRetireBatchesOperator,
    CdcVerifyOperator,
)
from mysql_cdc.operators.callbacks import record_failure, record_retry
from mysql_cdc.pipeline_config import PIPELINES_FILE_ENV, PipelineConfig, load_pipelines
from mysql_cdc.sensors import LeaderAdvancedSensor

DEFAULT_PIPELINES_FILE = Path(__file__).resolve().with_name("pipelines.yaml")

DOC = """
### MySQL CDC pipeline `{name}`

Every run: wait (in the triggerer, up to {wait:g}s) for the leader `{leader}` to move past the
pipeline's checkpoint in the follower `{follower}`, extract that binlog range into a Parquet change
batch under `{storage}`, and apply it to the follower with the Spark merge job. A run with nothing
new ends **skipped** in seconds, without starting Spark.

**Replay binlog range**: trigger with `start` and `end` (`FILE:OFFSET`, e.g. `binlog.000003:1146`).
The range is re-extracted; the part the follower already has is a no-op; a range that starts after
the checkpoint fails (it would leave a gap). The checkpoint only moves through the merge.

**Re-copy tables**: trigger with `resnapshot` (`db.table` globs, or `*`): those tables are copied
again from the leader while the others keep streaming.

**Airflow's date-range Backfill does not apply here**: a run reads the binlog from the pipeline's
checkpoint, whatever its logical date, so runs for past dates would replay nothing of those dates.
Its runs fail at once saying so; use *Replay binlog range* to read a range again.

**check_lag** runs last in every run, even one with nothing new: it logs how far behind the follower
is (binlog bytes, seconds), sends the figures as Airflow metrics (`mysql_cdc.{name}.*`){alert}.
The **CDC pipelines** page (`/cdc/`) charts them with the batch history.

**retire_batches** (when `batches: {{retain: ...}}` is set; 7d by default) deletes the change batches
applied more than that long ago, never one still needed (not applied yet, the checkpoint's own, an
unfinished snapshot's).
"""

VERIFY_DOC = """
### Verification of MySQL CDC pipeline `{name}`

Compares every captured table of the leader `{leader}` with the follower `{follower}` by checksums
(computed inside both databases; for a Delta Lake, of its tables at the pipeline's consistent cut,
read with delta-rs, against the leader's rows hashed alike), in primary-key chunks of {chunk_rows:,} keys (a keyless table as a
whole, as a multiset). A chunk that differs is checked again after the next merge (up to {rechecks}
times), so changes still in flight are not reported. Drift fails the run and names the manual run of
`{name}` that repairs it (conf `{{"resnapshot": [...]}}`); the CDC page (`/cdc/`) shows the result.
"""

MAINTAIN_DOC = """
### Maintenance of the lake follower of MySQL CDC pipeline `{name}`

Compacts every table of `{follower}` and of the pipeline's state (`OPTIMIZE`), then deletes the
files no version of the last {hours:g} hours needs (`VACUUM`). A table a merge has committed past the
consistent cut is compacted but not vacuumed this time, so the cut always stays readable.
"""


# both DAGs of a pipeline: no catch-up runs, one run at a time (runs of one pipeline must apply
# batches in order; a verification compares against the one follower)
DAG_DEFAULTS = {"start_date": datetime(2024, 1, 1, tzinfo=timezone.utc), "catchup": False, "max_active_runs": 1,
                "tags": ["mysql-cdc"]}


SENSOR_RETRIES = 1
SENSOR_RETRY_DELAY = timedelta(seconds=5)


def build_dag(config: PipelineConfig) -> DAG:
    # Extract and merge are idempotent (same range -> same batch; replays at or before the
    # checkpoint are no-ops), so retrying them is always safe; the backoff rides out a restart.
    retry_args = {
        "retries": config.retries,
        "retry_delay": timedelta(seconds=config.retry_delay),
        "retry_exponential_backoff": 2.0,
        "max_retry_delay": timedelta(minutes=30),
    }
    with DAG(
        dag_id=config.name,
        schedule=config.schedule,
        params=run_params(),
        **DAG_DEFAULTS,
        doc_md=DOC.format(name=config.name, wait=config.wait_timeout, leader=config.leader_conn_id,
                          follower=config.describe_follower(), storage=config.storage_uri, alert=(
                              f", and fails past max_seconds_behind ({config.max_seconds_behind:g} s), which "
                              "Airflow's failure alerting picks up" if config.max_seconds_behind else "")),
    ) as dag:
        wait = LeaderAdvancedSensor(
            task_id="wait_for_changes",
            pipeline=config.name,
            leader_conn_id=config.leader_conn_id,
            follower=config.follower_reference,
            timeout=config.wait_timeout,
            poke_interval=config.poke_interval,
            heartbeat=config.heartbeat,
            # One quick retry, for a race in Airflow 3.3.2's scheduler, not for our errors: when
            # the trigger fires at once (the leader moved just after the sensor's own check), the
            # task can be queued again before the scheduler reads the executor's "success" of the
            # deferring process; that stale event then fails the task ("state mismatch",
            # apache/airflow#67287 and #72716, guarded upstream only for the scheduled state). A
            # second check of the leader is always safe.
            retries=SENSOR_RETRIES,
            retry_delay=SENSOR_RETRY_DELAY,
        )
        extract = CdcExtractOperator(
            task_id="extract_batch",
            pipeline=config.name,
            storage_uri=config.storage_uri,
            leader_conn_id=config.leader_conn_id,
            follower=config.follower_reference,
            aws_conn_id=config.aws_conn_id,
            include=config.include,
            exclude=config.exclude,
            start_position=config.start_position,
            on_purged=config.on_purged,
            snapshot_options=config.snapshot,
            extract_options=config.extract,
            on_failure_callback=record_failure,
            on_retry_callback=record_retry,
            **retry_args,
        )
        merge = CdcMergeOperator(
            task_id="merge_batch",
            manifest_uri=extract.output,
            storage_uri=config.storage_uri,
            follower=config.follower_reference,
            aws_conn_id=config.aws_conn_id,
            spark_conn_id=config.spark_conn_id,
            conf=dict(config.spark_conf),
            name=f"mysql-cdc-merge-{config.name}",
            pipeline=config.name,
            spark=config.merge.spark,
            on_failure_callback=record_failure,
            on_retry_callback=record_retry,
            **retry_args,
        )
        check = CdcLagCheckOperator(
            task_id="check_lag",
            pipeline=config.name,
            leader_conn_id=config.leader_conn_id,
            follower=config.follower_reference,
            max_seconds_behind=config.max_seconds_behind,
            heartbeat=config.heartbeat,
        )
        wait >> extract >> merge >> check
        if config.batches.retain is not None:
            merge >> CdcRetireBatchesOperator(
                task_id="retire_batches",
                pipeline=config.name,
                storage_uri=config.storage_uri,
                follower=config.follower_reference,
                retain=config.batches.retain,
                aws_conn_id=config.aws_conn_id,
            )
    return dag


def build_verify_dag(config: PipelineConfig) -> DAG:
    with DAG(
        dag_id=f"{config.name}_verify",
        schedule=config.verify.schedule,
        **DAG_DEFAULTS,
        doc_md=VERIFY_DOC.format(name=config.name, leader=config.leader_conn_id, follower=config.describe_follower(),
                                 chunk_rows=config.verify.chunk_rows, rechecks=config.verify.rechecks),
    ) as dag:
        CdcVerifyOperator(
            task_id="verify_follower",
            pipeline=config.name,
            leader_conn_id=config.leader_conn_id,
            follower=config.follower_reference,
            include=config.include,
            exclude=config.exclude,
            options=config.verify,
        )
    return dag


def build_maintain_dag(config: PipelineConfig) -> DAG:
    """The maintenance of a follower kind that has one (a lake's compaction and expiry: ``FollowerKind.maintain``)."""
    with DAG(
        dag_id=f"{config.name}_maintain",
        schedule=config.maintenance.schedule,
        **DAG_DEFAULTS,
        doc_md=MAINTAIN_DOC.format(name=config.name, follower=config.describe_follower(),
                                   hours=config.maintenance.retain_hours),
    ) as dag:
        CdcLakeMaintenanceOperator(
            task_id="maintain_lake",
            pipeline=config.name,
            follower=config.follower_reference,
            storage_uri=config.storage_uri,
            aws_conn_id=config.aws_conn_id,
            spark_conn_id=config.spark_conn_id,
            options=config.maintenance,
            conf=dict(config.spark_conf),
        )
    return dag


for _config in load_pipelines(os.environ.get(PIPELINES_FILE_ENV) or DEFAULT_PIPELINES_FILE):
    globals()[_config.name] = build_dag(_config)
    globals()[f"{_config.name}_verify"] = build_verify_dag(_config)
    if _config.kind.maintained:  # a kind with maintenance (a lake's compaction and expiry)
        globals()[f"{_config.name}_maintain"] = build_maintain_dag(_config)
