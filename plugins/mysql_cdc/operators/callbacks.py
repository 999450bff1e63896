"""Task callbacks the pipeline DAGs set: a failed task is written into the batch history (the
CDC page lists it beside the batches) and counted as a metric."""

from __future__ import annotations

import logging

from ..hooks.follower import FollowerHook
from . import metrics

log = logging.getLogger(__name__)


def record_failure(context) -> None:
    """``on_failure_callback`` of extract and merge: their task carries the pipeline and the
    follower connection. The callback never raises: it must not hide the task's own error."""
    task, run_id = context["task"], context["run_id"]
    error = context.get("exception")
    try:
        metrics.task_failed(task.pipeline, task.task_id)
        FollowerHook(task.follower_conn_id).record_failed(
            task.pipeline, run_id, "run", f"{task.task_id}: {type(error).__name__}: {error}"[:4000])
    except Exception:  # the follower may be what failed
        log.exception("could not record the failure of %s in the batch history", task.task_id)
