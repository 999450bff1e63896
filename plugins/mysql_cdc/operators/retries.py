"""Airflow's side of ``mysql_cdc.retry_policy``: a failure no retry can fix fails the task at once,
cause first; any other keeps Airflow's retries."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from ..retry_policy import describe, is_permanent


@contextmanager
def fail_fast_when_permanent() -> Iterator[None]:
    try:
        yield
    except (AirflowFailException, AirflowSkipException):
        raise
    except Exception as exc:
        if is_permanent(exc):
            raise AirflowFailException(describe(exc)) from exc
        raise
