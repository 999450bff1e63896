"""The pipeline's health at the end of every run: lag figures logged, sent as metrics, alerted on."""

from __future__ import annotations

from functools import cached_property
from typing import Any, Sequence

from airflow.sdk import BaseOperator, Context
from airflow.sdk.exceptions import AirflowFailException

from ..hooks.follower import DEFAULT_FOLLOWER_CONN_ID, FollowerRef, follower_reference
from ..hooks.leader import LeaderHook
from ..hooks.pipeline import CdcPipelineHook
from . import metrics


class CdcLagCheckOperator(BaseOperator):
    """Read how far behind ``pipeline`` is (live from its leader and follower), log it, send it
    as Airflow metrics, and return it as XCom. Past ``max_seconds_behind`` the task fails, so the
    alerting a user already has on failed tasks (``on_failure_callback``, email) fires for lag.

    Runs after the merge whatever became of it (trigger rule ``none_failed``: a run with nothing
    new skips extract and merge, and lag still has to be watched then)."""

    template_fields: Sequence[str] = ("leader_conn_id", "follower")
    ui_color = "#eef0fa"

    def __init__(self, *, pipeline: str, leader_conn_id: str = LeaderHook.default_conn_name,
                 follower: FollowerRef = DEFAULT_FOLLOWER_CONN_ID, max_seconds_behind: float | None = None,
                 heartbeat: bool = False, **kwargs: Any):
        kwargs.setdefault("trigger_rule", "none_failed")
        super().__init__(**kwargs)
        self.pipeline = pipeline
        self.leader_conn_id = leader_conn_id
        self.follower = follower_reference(follower)  # one JSON-safe reference (hooks.follower)
        self.max_seconds_behind = max_seconds_behind
        self.heartbeat = heartbeat

    @cached_property
    def hook(self) -> CdcPipelineHook:
        return CdcPipelineHook(self.pipeline, self.leader_conn_id, self.follower)

    def execute(self, context: Context) -> dict:
        figures = self.hook.figures(heartbeat=self.heartbeat)
        metrics.lag(figures)
        behind = figures.seconds_behind
        self.log.info("pipeline %s: checkpoint %s, leader at %s: %s bytes and %s seconds behind", self.pipeline,
                      figures.checkpoint.position if figures.checkpoint else None, figures.leader_position,
                      figures.bytes_behind, "unknown" if behind is None else f"{behind:.1f}")
        if self.max_seconds_behind is not None and behind is not None and behind > self.max_seconds_behind:
            raise AirflowFailException(
                f"pipeline {self.pipeline} is {behind:.0f} s behind its leader, more than max_seconds_behind "
                f"{self.max_seconds_behind:g} s ({figures.bytes_behind} binlog bytes to go); see the CDC page"
            )
        return figures.to_json()
