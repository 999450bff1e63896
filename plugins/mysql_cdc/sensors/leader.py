"""Succeeds when the leader's binlog is past the pipeline's checkpoint; skips when nothing moved.

Deferrable: one check in the task, then the wait happens in the triggerer, holding no worker slot.
Chosen over reschedule mode because both work under Airflow 3.3's ``dag.test()`` (it runs triggers
inline, and re-runs rescheduled sensors), but a reschedule costs a full task start per poke and a
slot each time, while a trigger is one coroutine among thousands in the triggerer.
"""

from __future__ import annotations

import time
from datetime import timedelta
from functools import cached_property
from typing import Any, Sequence

from airflow.sdk import BaseSensorOperator, Context
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowSkipException

from ..run_params import RunParamError, replay_range, refuse_date_range_backfill, resnapshot_tables
from ..hooks.follower import DEFAULT_FOLLOWER_CONN_ID, FollowerRef, follower_reference
from ..hooks.leader import LeaderHook
from ..hooks.pipeline import CdcPipelineHook
from ..triggers.leader import SUCCESS, TIMEOUT, LeaderAdvancedTrigger

# Past the trigger's own deadline: a backstop for a trigger stuck on a hung connection.
_DEFERRAL_GRACE = timedelta(minutes=5)


class LeaderAdvancedSensor(BaseSensorOperator):
    """Wait up to ``timeout`` seconds for the leader to move past ``pipeline``'s checkpoint.

    - leader past the checkpoint, or no checkpoint yet (the first run initializes it): success;
    - a replay or re-copy run (params ``start``/``end``, ``resnapshot``): success at once, there is
      nothing to wait for;
    - a run of an Airflow date-range backfill: failed at once, saying why and what to use instead;
    - nothing new within ``timeout``: the task ends SKIPPED, and so do extract and merge.

    With ``heartbeat``, a regular run first commits the pipeline's heartbeat row on the leader,
    so the run always carries a fresh transaction and the lag figures stay true on an idle leader.
    """

    template_fields: Sequence[str] = ("pipeline", "leader_conn_id", "follower")
    ui_color = "#e6f1f2"

    def __init__(self, *, pipeline: str, leader_conn_id: str = LeaderHook.default_conn_name,
                 follower: FollowerRef = DEFAULT_FOLLOWER_CONN_ID, timeout: float = 10,
                 poke_interval: float = 2, heartbeat: bool = False, **kwargs: Any):
        super().__init__(timeout=timeout, poke_interval=poke_interval, **kwargs)
        self.heartbeat = heartbeat  # commit a row on the leader first (monitor.heartbeat)
        self.pipeline = pipeline
        self.leader_conn_id = leader_conn_id
        self.follower = follower_reference(follower)  # one JSON-safe reference (hooks.follower)

    @cached_property
    def hook(self) -> CdcPipelineHook:
        return CdcPipelineHook(self.pipeline, self.leader_conn_id, self.follower)

    def poke(self, context: Context) -> bool:
        return self.hook.change_status().has_changes

    def execute(self, context: Context) -> dict | None:
        try:
            refuse_date_range_backfill(getattr(context.get("dag_run"), "run_type", None))
            params = context["params"]
            if replay_range(params) is not None or resnapshot_tables(params) is not None:
                self.log.info("replay or resnapshot run: not waiting for the leader")
                return None
        except RunParamError as exc:
            raise AirflowFailException(str(exc)) from None
        if self.heartbeat:
            self.hook.write_heartbeat()
        status = self.hook.change_status()
        self.log.info("pipeline %s: %s", self.pipeline, status.describe())
        if status.has_changes:
            return status.to_json()
        self.defer(
            trigger=LeaderAdvancedTrigger(
                pipeline=self.pipeline,
                leader_conn_id=self.leader_conn_id,
                follower=self.follower,
                deadline=time.time() + self.timeout,
                poke_interval=self.poke_interval,
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout) + _DEFERRAL_GRACE,
        )

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict:
        status = event.get("status") if isinstance(event, dict) else None
        if status == SUCCESS:
            self.log.info("pipeline %s: leader at %s is past checkpoint %s",
                          self.pipeline, event.get("leader"), event.get("checkpoint"))
            return {"leader": event.get("leader"), "checkpoint": event.get("checkpoint")}
        if status == TIMEOUT:
            raise AirflowSkipException(
                f"nothing new for pipeline {self.pipeline} within {self.timeout:g}s: leader still at "
                f"{event.get('leader')}, checkpoint {event.get('checkpoint')}"
            )
        detail = event.get("message", event) if isinstance(event, dict) else event
        raise AirflowException(f"waiting for the leader of pipeline {self.pipeline} failed: {detail}")
