"""BatchStorageHook: S3 through the amazon provider's S3Hook (moto), and file://."""

from __future__ import annotations

import json

import pytest

from mysql_cdc.contracts import BinlogPosition, ChangeBatch, PositionRange, batch_id_for
from mysql_cdc.hooks import BatchStorageHook
from mysql_cdc.storage import batches_uri
from mysql_cdc.storage import StorageError


def a_batch(pipeline: str = "shop") -> ChangeBatch:
    start, end = BinlogPosition("binlog.000001", 4), BinlogPosition("binlog.000001", 900)
    return ChangeBatch(pipeline=pipeline, batch_id=batch_id_for(PositionRange(start, end)), start=start, end=end,
                       segments=())


@pytest.fixture
def s3_conn(monkeypatch, s3_bucket) -> dict:
    monkeypatch.setenv("AIRFLOW_CONN_CDC_TEST_S3", json.dumps({
        "conn_type": "aws", "login": s3_bucket["aws_access_key_id"], "password": s3_bucket["aws_secret_access_key"],
        "extra": {"endpoint_url": s3_bucket["endpoint_url"], "region_name": "eu-west-3"}}))
    return s3_bucket


def test_s3_store_and_job_settings_come_from_the_aws_connection(s3_conn):
    hook = BatchStorageHook(f"s3://{s3_conn['bucket']}/cdc/", aws_conn_id="cdc_test_s3")
    batch = a_batch()
    hook.store.put_bytes(f"{batch.prefix}/manifest.json", batch.to_json().encode())
    uri = hook.manifest_uri(batch)
    assert uri == f"s3://{s3_conn['bucket']}/cdc/shop/batches/{batch.batch_id}/manifest.json"
    assert hook.read_manifest(uri) == batch

    spec = hook.spec()
    assert spec.uri == f"s3://{s3_conn['bucket']}/cdc"
    assert spec.options["endpoint_url"] == s3_conn["endpoint_url"]
    assert spec.options["region_name"] == "eu-west-3"
    assert (spec.options["aws_access_key_id"], spec.options["aws_secret_access_key"]) == (
        s3_conn["aws_access_key_id"], s3_conn["aws_secret_access_key"])
    assert s3_conn["aws_secret_access_key"] not in repr(spec)
    # what the Spark job will do with it: reach the same batch
    assert spec.open().get_bytes(f"{batch.prefix}/manifest.json") == batch.to_json().encode()


def test_file_store_and_manifest_errors(tmp_path):
    hook = BatchStorageHook(f"file://{tmp_path}")
    batch = a_batch()
    with pytest.raises(StorageError, match="its manifest.json does not exist"):
        hook.read_manifest(f"file://{tmp_path}/shop/batches/{batch.batch_id}/manifest.json")
    with pytest.raises(StorageError, match="is not under the pipeline's storage root"):
        hook.read_manifest(f"file:///elsewhere/shop/batches/{batch.batch_id}/manifest.json")


def test_batches_uri_is_computed_without_io():
    assert batches_uri("s3a://lake/cdc/", "shop") == "s3://lake/cdc/shop/batches"
    assert batches_uri("file:///data/cdc", "shop") == "file:///data/cdc/shop/batches"
