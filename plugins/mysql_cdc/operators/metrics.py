"""The pipeline's figures as Airflow metrics (StatsD or OpenTelemetry, as Airflow is configured).

Names carry the pipeline (``mysql_cdc.<pipeline>.seconds_behind``) so that plain StatsD, which has
no tags, keeps pipelines apart; the same ``pipeline`` tag is sent for backends that have them.
With metrics off in Airflow's configuration, these calls do nothing.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk.observability import stats

from ..monitor.lag import PipelineFigures


def _name(pipeline: str, figure: str) -> str:
    return f"mysql_cdc.{pipeline}.{figure}"


def batch_extracted(pipeline: str, rows: int, seconds: float) -> None:
    stats.incr(_name(pipeline, "rows_extracted"), rows, tags={"pipeline": pipeline})
    stats.timing(_name(pipeline, "extract_seconds"), timedelta(seconds=seconds), tags={"pipeline": pipeline})


def batch_merged(pipeline: str, net_rows: int, seconds: float) -> None:
    stats.incr(_name(pipeline, "rows_merged"), net_rows, tags={"pipeline": pipeline})
    stats.timing(_name(pipeline, "merge_seconds"), timedelta(seconds=seconds), tags={"pipeline": pipeline})


def task_failed(pipeline: str, task_id: str) -> None:
    stats.incr(_name(pipeline, "failures"), tags={"pipeline": pipeline, "task": task_id})


def lag(figures: PipelineFigures) -> None:
    tags = {"pipeline": figures.name}
    if figures.bytes_behind is not None:
        stats.gauge(_name(figures.name, "bytes_behind"), figures.bytes_behind, tags=tags)
    if figures.seconds_behind is not None:
        stats.gauge(_name(figures.name, "seconds_behind"), figures.seconds_behind, tags=tags)
