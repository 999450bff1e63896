"""CdcExtractOperator without a DAG run: its asset, its templated fields, and a bad replay range that
fails before any connection is looked up (real extractions run in tests/airflow/dags)."""

from __future__ import annotations

import pytest
from airflow.sdk.exceptions import AirflowFailException

from mysql_cdc.operators import CdcExtractOperator


def operator(**kwargs) -> CdcExtractOperator:
    return CdcExtractOperator(task_id="extract_batch", pipeline="shop", storage_uri="s3a://lake/cdc/",
                              leader_conn_id="cdc_no_such_leader", follower="cdc_no_such_follower", **kwargs)


def test_the_batch_directory_is_the_asset_outlet_in_one_spelling():
    (asset,) = operator().outlets
    assert (asset.uri, asset.name) == ("s3://lake/cdc/shop/batches", "shop_batches")
    assert {"leader_conn_id", "follower", "start_position"} <= set(operator().template_fields)


@pytest.mark.parametrize("params, message", [
    ({"start": "binlog.000001:4"}, "param 'end': is missing"),
    ({"start": "binlog.000002:4", "end": "binlog.000001:4"}, "param 'end': binlog.000001:4 must be after start"),
    ({"start": "binlog-1:4", "end": "binlog.000001:4"}, "param 'start': 'binlog-1:4' is not a binlog position"),
])
def test_a_bad_replay_range_fails_without_retry_and_without_connections(params, message):
    # AirflowFailException: a bad range cannot heal, so the task is not retried. The conn ids do not
    # exist: the range is refused before any of them is looked up.
    with pytest.raises(AirflowFailException, match=message):
        operator().execute({"params": params})
