"""What the page and the API show: each configured pipeline's figures, read live through its hooks."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..batch_retention import RetentionRecord
from ..hooks.pipeline import CdcPipelineHook
from ..hooks.storage import BatchStorageHook
from ..monitor.lag import PipelineFigures
from ..pipeline_config import PIPELINES_FILE_ENV, PipelineConfig, load_pipelines


def pipelines_file() -> Path:
    """The file the DAGs are built from: ``$CDC_PIPELINES_FILE``, else ``pipelines.yaml`` in the
    DAGs folder (where ``dags/mysql_cdc_pipelines.py`` looks)."""
    configured = os.environ.get(PIPELINES_FILE_ENV)
    if configured:
        return Path(configured)
    from airflow.configuration import conf

    return Path(conf.get("core", "dags_folder")) / "pipelines.yaml"


@dataclass(frozen=True)
class PipelineView:
    config: PipelineConfig
    figures: PipelineFigures | None
    error: str | None = None  # the servers could not be read: why
    # the batch store as retention last measured it (None: not measured yet, or retention is off)
    batch_storage: RetentionRecord | None = None

    def to_json(self) -> dict:
        storage = None
        if self.batch_storage is not None:
            storage = {k: v for k, v in vars(self.batch_storage).items() if k != "retired_ids"}
        if self.figures is None:
            return {"name": self.config.name, "checkpoint_position": None, "leader_position": None,
                    "bytes_behind": None, "seconds_behind": None, "last_batch": None, "verification": None,
                    "batch_storage": storage, "error": self.error}
        return {**self.figures.to_json(), "batch_storage": storage, "error": None}


def read_pipeline(config: PipelineConfig) -> PipelineView:
    hook = CdcPipelineHook(config.name, config.leader_conn_id, config.follower_reference)
    try:
        figures = hook.figures(heartbeat=config.heartbeat)
        # one small object the retention task writes (``batch_retention``), not a listing of the store
        store = BatchStorageHook(config.storage_uri, config.aws_conn_id).store
        return PipelineView(config, figures, batch_storage=RetentionRecord.read(store, config.name))
    except Exception as exc:  # one pipeline's unreachable server must not hide the others
        return PipelineView(config, None, f"{type(exc).__name__}: {exc}")


def configured_pipelines() -> list[PipelineConfig]:
    return load_pipelines(pipelines_file())
