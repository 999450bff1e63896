"""Compare the follower with the leader, table by table (``monitor.verify``)."""

from __future__ import annotations

import json
from functools import cached_property
from typing import Any, Sequence

from airflow.sdk import BaseOperator, Context
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from ..capture.filters import TableFilter
from ..contracts.verification import BEHIND
from ..hooks.follower import DEFAULT_FOLLOWER_CONN_ID, FollowerRef, follower_reference
from ..hooks.leader import LeaderHook
from ..hooks.pipeline import CdcPipelineHook
from ..pipeline_options import VerifyOptions


class CdcVerifyOperator(BaseOperator):
    """Checksum every captured table of ``pipeline`` on both servers, in key chunks, rechecking
    differing chunks after the next merges. The result is kept on the follower (the CDC page shows
    it) and returned as XCom; drift fails the task, naming the resnapshot conf that repairs it. A
    follower that has not reached the leader's position of the start within ``settle_timeout`` is
    behind, not drifted: nothing is compared and the task ends skipped, saying so."""

    template_fields: Sequence[str] = ("leader_conn_id", "follower")
    ui_color = "#f4ecf7"

    def __init__(self, *, pipeline: str, leader_conn_id: str = LeaderHook.default_conn_name,
                 follower: FollowerRef = DEFAULT_FOLLOWER_CONN_ID, include: Sequence[str] = ("*.*",),
                 exclude: Sequence[str] = (), options: VerifyOptions = VerifyOptions(), **kwargs: Any):
        super().__init__(**kwargs)
        self.pipeline = pipeline
        self.leader_conn_id = leader_conn_id
        self.follower = follower_reference(follower)  # one JSON-safe reference (hooks.follower)
        self.include = tuple(include)
        self.exclude = tuple(exclude)
        self.options = options

    @cached_property
    def hook(self) -> CdcPipelineHook:
        return CdcPipelineHook(self.pipeline, self.leader_conn_id, self.follower,
                               table_filter=TableFilter(self.include, self.exclude))

    def execute(self, context: Context) -> dict:
        result = self.hook.verify(self.options)
        self.log.info("%s", result.describe())
        if result.status == BEHIND:
            raise AirflowSkipException(result.describe())
        if result.drifted_tables:
            raise AirflowFailException(result.describe())
        return json.loads(json.dumps(result.to_json()))
