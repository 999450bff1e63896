"""Backfill params: the trigger-form schema and the run-time check both name the bad param."""

from __future__ import annotations

import pytest

from mysql_cdc.run_params import RunParamError, run_params, replay_range
from mysql_cdc.contracts import BinlogPosition, PositionRange


def test_no_params_is_a_regular_run():
    assert replay_range({}) is None
    assert replay_range({"start": None, "end": None}) is None
    assert replay_range({"start": "", "end": ""}) is None


def test_a_range():
    assert replay_range({"start": "binlog.000002:4", "end": "binlog.000003:1146"}) == PositionRange(
        BinlogPosition("binlog.000002", 4), BinlogPosition("binlog.000003", 1146))


@pytest.mark.parametrize(
    ("params", "param", "words"),
    [
        ({"start": "binlog.000002:4"}, "end", "is missing"),
        ({"end": "binlog.000002:4"}, "start", "is missing"),
        ({"start": "binlog-2:4", "end": "binlog.000002:9"}, "start", "is not a binlog position"),
        ({"start": "binlog.000002:4", "end": "binlog.000002"}, "end", "is not a binlog position"),
        ({"start": 4, "end": "binlog.000002:9"}, "start", "expected a FILE:OFFSET string"),
        ({"start": "binlog.000002:9", "end": "binlog.000002:9"}, "end", "is empty"),
        ({"start": "binlog.000003:4", "end": "binlog.000002:900"}, "end", "must be after start"),
    ],
)
def test_run_time_errors_name_the_param(params, param, words):
    with pytest.raises(RunParamError) as info:
        replay_range(params)
    assert info.value.param == param
    assert str(info.value).startswith(f"param '{param}': ")
    assert words in str(info.value)


@pytest.mark.parametrize(
    ("conf", "param"),
    [({"start": "yesterday"}, "start"), ({"end": "binlog.000001"}, "end"), ({"start": 12}, "start")],
)
def test_the_trigger_form_schema_rejects_a_bad_position_naming_the_param(conf, param):
    from airflow.sdk import ParamsDict
    from airflow.sdk.exceptions import ParamValidationError

    params = ParamsDict(run_params())
    with pytest.raises(ParamValidationError, match=f"Invalid input for param {param}"):
        params.update(conf)  # validates each value as it is set, as a triggered run's conf is
        params.validate()


def test_the_trigger_form_schema_accepts_positions_and_empty():
    from airflow.sdk import ParamsDict

    params = ParamsDict(run_params())
    assert params.validate() == {"start": None, "end": None, "resnapshot": None}
    params.update({"start": "binlog.000002:4", "end": "binlog.000002:900"})
    assert params.validate() == {"start": "binlog.000002:4", "end": "binlog.000002:900", "resnapshot": None}


def test_resnapshot_takes_table_globs_and_never_a_range_too():
    from airflow.sdk import ParamsDict
    from airflow.sdk.exceptions import ParamValidationError

    from mysql_cdc.run_params import RunParamError, resnapshot_tables

    params = ParamsDict(run_params())
    params.update({"resnapshot": ["shop.orders", "crm.*", "*"]})
    assert params.validate()["resnapshot"] == ["shop.orders", "crm.*", "*"]
    with pytest.raises(ParamValidationError, match="Invalid input for param resnapshot"):
        params.update({"resnapshot": ["orders"]})  # not db.table
    assert resnapshot_tables({"resnapshot": ["shop.*"]}) == ["shop.*"]
    assert resnapshot_tables({"resnapshot": None}) is None and resnapshot_tables({}) is None
    with pytest.raises(RunParamError, match="either replays a binlog range or re-copies tables"):
        resnapshot_tables({"resnapshot": ["shop.*"], "start": "binlog.000001:4", "end": "binlog.000001:9"})
