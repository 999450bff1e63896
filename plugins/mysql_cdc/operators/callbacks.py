"""Task callbacks the pipeline DAGs set: every failed try of extract and merge is written into the
batch history (the CDC page lists it under its run), the last one also marks the run failed, and
each is counted as a metric."""

from __future__ import annotations

import logging

from airflow.sdk.exceptions import AirflowException

from ..contracts.history import FailedTry
from ..retry_policy import describe
from ..hooks.follower import follower_hook
from . import metrics

log = logging.getLogger(__name__)

# Airflow ends a try whose task process died (killed, out of memory) without an exception to hand
# the callback: say what that means rather than "None".
_NO_EXCEPTION = ("the task process ended without reporting an error (killed, out of memory, or its "
                 "heartbeat stopped); its task log has the last lines it wrote")


def failure_text(task_id: str, error: BaseException | str | None) -> str:
    """One line a person reads first: the task, then the cause (the exception's own message)."""
    if error is None:
        return f"{task_id}: {_NO_EXCEPTION}"
    if isinstance(error, AirflowException):  # ours, and the fail-fast ones: their words say it all
        return f"{task_id}: {error}"
    if isinstance(error, BaseException):
        return f"{task_id}: {type(error).__name__}: {describe(error)}"
    return f"{task_id}: {error}"


def _record(context, final: bool) -> None:
    """Both callbacks: the task carries the pipeline and the follower connection. Never raises:
    it must not hide the task's own error."""
    task, run_id, ti = context["task"], context["run_id"], context["ti"]
    error = failure_text(task.task_id, context.get("exception"))
    try:
        metrics.task_failed(task.pipeline, task.task_id)
        state = follower_hook(task.follower).state
        state.record_failed_try(FailedTry(task.pipeline, run_id, task.task_id, ti.try_number, error))
        if final:
            state.record_failed(task.pipeline, run_id, "run", error)
    except Exception:  # the follower may be what failed
        log.exception("could not record the failure of %s in the batch history", task.task_id)


def record_failure(context) -> None:
    """``on_failure_callback``: the last try failed; the run's batch is marked failed."""
    _record(context, final=True)


def record_retry(context) -> None:
    """``on_retry_callback``: a try failed and Airflow will retry it."""
    _record(context, final=False)
