"""Replay and re-copy runs: the DAG params ``start`` and ``end`` name a binlog range to (re)process
("Replay binlog range" in the trigger form), ``resnapshot`` the tables to copy again.

The range is checked twice: by the Param schema when the run is triggered (the UI form, the REST
API and ``airflow dags trigger --conf`` all validate against it), and again here when the run
executes, because params can also reach a run unvalidated (a cleared run re-executed after the
DAG changed, a run created through the metadata DB). The run-time check gives the longer message.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from .contracts import POSITION_PATTERN, BinlogPosition, InvalidPosition, PositionRange
from .errors import PermanentError

START_PARAM = "start"
END_PARAM = "end"
RESNAPSHOT_PARAM = "resnapshot"
# db.table with glob characters allowed, or "*" for every table of the pipeline
TABLE_GLOB_PATTERN = r"^(\*|[^.\s]+\.[^.\s]+)$"


class RunParamError(ValueError, PermanentError):
    """A replay or resnapshot param is wrong; ``param`` names it."""

    def __init__(self, param: str, message: str):
        super().__init__(f"param '{param}': {message}")
        self.param = param


def _given(value: Any) -> bool:
    return value is not None and value != ""


def _position(params: Mapping[str, Any], name: str) -> BinlogPosition:
    value = params.get(name)
    if not isinstance(value, str):
        raise RunParamError(name, f"expected a FILE:OFFSET string such as 'binlog.000003:1146', got {value!r}")
    try:
        return BinlogPosition.parse(value)
    except InvalidPosition as exc:
        raise RunParamError(name, str(exc)) from None


def replay_range(params: Mapping[str, Any]) -> PositionRange | None:
    """The run's replay range, or None for a regular run (neither param given)."""
    start_given, end_given = _given(params.get(START_PARAM)), _given(params.get(END_PARAM))
    if not start_given and not end_given:
        return None
    if not end_given:
        raise RunParamError(END_PARAM, "is missing: a replay needs both 'start' and 'end' (or neither)")
    if not start_given:
        raise RunParamError(START_PARAM, "is missing: a replay needs both 'start' and 'end' (or neither)")
    start, end = _position(params, START_PARAM), _position(params, END_PARAM)
    if not start < end:
        raise RunParamError(END_PARAM, f"{end} must be after start {start}: the range [start, end) is empty")
    return PositionRange(start, end)


def resnapshot_tables(params: Mapping[str, Any]) -> list[str] | None:
    """The tables a run re-copies (``resnapshot``: db.table globs, or ["*"]), or None."""
    value = params.get(RESNAPSHOT_PARAM)
    if value in (None, "", []):
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) and re.match(TABLE_GLOB_PATTERN, v) for v in value):
        raise RunParamError(
            RESNAPSHOT_PARAM, f"expected a list of db.table names (globs allowed) or [\"*\"], got {value!r}"
        )
    if _given(params.get(START_PARAM)) or _given(params.get(END_PARAM)):
        raise RunParamError(RESNAPSHOT_PARAM, "a run either replays a binlog range or re-copies tables, not both")
    return list(value)


DATE_RANGE_BACKFILL = "backfill"  # Airflow's DagRunType of a date-range backfill's runs


def refuse_date_range_backfill(run_type: Any) -> None:
    """A CDC run reads the binlog from the checkpoint whatever its logical date: the runs of an
    Airflow date-range backfill would replay nothing of their dates, so they are refused."""
    if str(getattr(run_type, "value", run_type)) == DATE_RANGE_BACKFILL:
        raise RunParamError(
            "logical date",
            "this run belongs to an Airflow date-range backfill, which a CDC pipeline cannot use: a run reads "
            "the leader's binlog from the pipeline's checkpoint whatever its logical date, so runs for past "
            "dates would replay nothing of those dates. To read a binlog range again, trigger the DAG with "
            "'Replay binlog range' (start and end, FILE:OFFSET); to copy tables again, with 'Re-copy tables'",
        )


def run_params() -> dict:
    """The DAG params, with the schema the trigger form validates before a run is created."""
    from airflow.sdk import Param  # imported here: the rest of this module is plain Python

    def position(title: str, description: str) -> Param:
        return Param(
            None,
            type=["null", "string"],
            pattern=POSITION_PATTERN,
            title=title,
            description=description,
        )

    return {
        START_PARAM: position(
            "Replay binlog range: start",
            "Leave empty for a regular run. FILE:OFFSET, e.g. binlog.000003:1146 (SHOW BINARY LOGS on the "
            "leader): where the range to read again begins; not after the pipeline's checkpoint (a gap). "
            "Give end too. (The CDC pipelines page, /cdc/, has a Replay form that checks both before it "
            "triggers.)",
        ),
        END_PARAM: position(
            "Replay binlog range: end",
            "Leave empty for a regular run. FILE:OFFSET, e.g. binlog.000004:4: where the range ends "
            "(exclusive); not past the leader's current position. Give start too.",
        ),
        RESNAPSHOT_PARAM: Param(
            None,
            type=["null", "array"],
            items={"type": "string", "pattern": TABLE_GLOB_PATTERN},
            title="Re-copy tables (resnapshot)",
            description="Leave empty for a regular run. Tables to copy again from the leader, consistently "
            "with the stream, as db.table (globs allowed, e.g. shop.orders or shop.*), or * for every table: "
            "repairs a follower table that is missing or damaged, or a purged checkpoint. Other tables keep "
            "streaming.",
        ),
    }
