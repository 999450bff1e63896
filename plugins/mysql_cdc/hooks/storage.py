"""Where change batches live: ``s3://`` through the amazon provider's S3Hook, or ``file://``.

For ``s3://`` the boto3 client comes from ``S3Hook(aws_conn_id)``, so the connection's extra
``endpoint_url`` (MinIO, moto), region, role assumption and credential chain all work as they do for
every other AWS task. The same connection fills the ``StorageSpec`` handed to the Spark job.
A ``file://`` root needs no connection and never looks one up.
"""

from __future__ import annotations

from functools import cached_property

from airflow.sdk import BaseHook

from ..contracts import MANIFEST_NAME, ChangeBatch, batch_prefix
from ..capture.stream.extract import BatchTarget
from ..storage import ObjectStore, StorageSpec, client_config, read_batch, read_manifest
from .connections import required_connection


class BatchStorageHook(BaseHook):
    """``BatchStorageHook(storage_uri, aws_conn_id)``: the object store of a pipeline's batches."""

    conn_name_attr = "aws_conn_id"
    default_conn_name = "aws_default"
    conn_type = "aws"
    hook_name = "MySQL CDC batch storage"

    def __init__(self, storage_uri: str, aws_conn_id: str | None = default_conn_name):
        super().__init__()
        self.storage_uri = storage_uri
        self.aws_conn_id = aws_conn_id

    @property
    def is_s3(self) -> bool:
        return StorageSpec(self.storage_uri).scheme == "s3"

    @cached_property
    def s3_hook(self):
        from airflow.providers.amazon.aws.hooks.s3 import S3Hook

        if self.aws_conn_id:
            # S3Hook alone would log a warning and carry on with no connection at all.
            required_connection(self.aws_conn_id, "AWS", ("aws",))
        # aws_conn_id None: boto3's default credential chain (instance role, AWS_* variables).
        # botocore's own retries off (the store retries and logs each: storage.storage_retry) and
        # its timeouts explicit; what the connection's extra config_kwargs sets wins
        given = S3Hook(aws_conn_id=self.aws_conn_id).conn_config.botocore_config if self.aws_conn_id else None
        config = client_config().merge(given) if given is not None else client_config()
        return S3Hook(aws_conn_id=self.aws_conn_id, config=config)

    @cached_property
    def store(self) -> ObjectStore:
        return StorageSpec(self.storage_uri).open(client=self.s3_hook.get_conn() if self.is_s3 else None)

    def spec(self) -> StorageSpec:
        """The store with the options a process outside Airflow (the Spark job) needs to reach it."""
        if not self.is_s3:
            return StorageSpec(self.storage_uri)
        hook = self.s3_hook
        credentials = hook.get_credentials()  # also masks the secret key and token in task logs
        return StorageSpec(self.storage_uri, {
            "endpoint_url": hook.conn_config.get_service_endpoint_url("s3"),
            "region_name": hook.conn_region_name,
            "aws_access_key_id": credentials.access_key,
            "aws_secret_access_key": credentials.secret_key,
            "aws_session_token": credentials.token,
        })

    def target(self) -> BatchTarget:
        """Where the pipeline's batches are written, for capture (``capture.extract``)."""
        return BatchTarget(self.store, self.spec())

    def manifest_uri(self, batch: ChangeBatch) -> str:
        return self.store.uri_of(f"{batch.prefix}/{MANIFEST_NAME}")

    def read_batch(self, pipeline: str, batch_id: str) -> ChangeBatch | None:
        """The committed batch with that id, or None (never written, or lost)."""
        return read_batch(self.store, batch_prefix(pipeline, batch_id))

    def read_manifest(self, manifest_uri: str) -> ChangeBatch:
        """The batch a manifest URI names; it must live under this hook's storage root."""
        return read_manifest(self.store, manifest_uri)
