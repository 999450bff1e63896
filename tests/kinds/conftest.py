"""The kinds' pipelines: ``make_pipeline`` (tests/conftest.py) for a MySQL follower, ``lake_pipeline`` for a
Delta Lake (``lake_helpers``), ``iceberg_pipeline`` for an Iceberg catalog (``iceberg_helpers``)."""

from __future__ import annotations

import pytest

from iceberg_helpers import IcebergPipeline
from lake_helpers import LakePipeline
from mysql_cdc.storage import StorageSpec


@pytest.fixture
def lake_pipeline(make_pipeline, tmp_path, request):
    """make(flavor="mariadb", s3=False) -> a started LakePipeline on a file:// lake, or an s3:// one
    on the session's moto endpoint (``bucket``: in that bucket, e.g. ``faulty_bucket``'s)."""

    def make(flavor: str = "mariadb", s3: bool = False, changelog: tuple[str, ...] = (),
             bucket: dict | None = None, features: str = "standard", partition_by=(),
             soft_deletes: tuple[str, ...] = (), history: tuple[str, ...] = (), catalog=None) -> LakePipeline:
        base = make_pipeline(flavor=flavor, start=False)
        if s3 or bucket:
            bucket = bucket or request.getfixturevalue("s3_bucket")
            options = {k: bucket[k] for k in ("endpoint_url", "region_name", "aws_access_key_id",
                                              "aws_secret_access_key")}
            lake = StorageSpec(f"s3://{bucket['bucket']}/lake", options)
        else:
            lake = StorageSpec(f"file://{tmp_path}/lake")
        return LakePipeline.of(base, lake, changelog, features, partition_by, soft_deletes, history, catalog).start()

    return make


@pytest.fixture
def iceberg_pipeline(make_pipeline, tmp_path, request):
    """make(s3=False, soft_deletes=(), history=()) -> a started IcebergPipeline: its catalog a fresh
    database on the session's MariaDB follower, its warehouse on the local file system or in a fresh
    bucket of the session's moto; ``soft_deletes``, ``history``: the globs of its tables that keep
    their deleted rows, every version of each row."""

    def make(s3: bool = False, soft_deletes: tuple[str, ...] = (), history: tuple[str, ...] = ()) -> IcebergPipeline:
        base = make_pipeline(start=False)
        if s3:
            bucket = request.getfixturevalue("s3_bucket")
            options = {k: bucket[k] for k in ("endpoint_url", "region_name", "aws_access_key_id",
                                              "aws_secret_access_key")}
            warehouse = StorageSpec(f"s3://{bucket['bucket']}/warehouse", options)
        else:
            warehouse = StorageSpec(f"file://{tmp_path}/warehouse")
        return IcebergPipeline.of(base, warehouse, soft_deletes=soft_deletes, history=history).start()

    return make
