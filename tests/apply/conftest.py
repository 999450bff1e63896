"""Apply-side fixtures: per-test pipelines on the session's real leader, follower (and S3 endpoint),
isolated by database and pipeline names (the one in-process SparkSession is ``tests/conftest.py``'s)."""

from __future__ import annotations

import pytest

from merge_helpers import Pipeline
from mysql_cdc.settings import MySQLSettings
from mysql_cdc.storage import StorageSpec


@pytest.fixture
def make_pipeline(request, tmp_path, unique_name):
    """make_pipeline(s3_bucket=None, flavor="mariadb") -> a started Pipeline named after this test's
    unique name, between the session's MariaDB (or, with flavor "mysql", MySQL) leader and follower;
    ``follower_flavor`` gives the follower another flavor than the leader's."""

    def make(s3_bucket: dict | None = None, flavor: str = "mariadb", start: bool = True,
             follower_flavor: str | None = None) -> Pipeline:
        def server(role: str, kind: str):
            prefix = "" if kind == "mariadb" else "mysql_"
            return request.getfixturevalue(prefix + role), request.getfixturevalue(f"{prefix}{role}_user")

        (leader, leader_user), (follower, follower_user) = server("leader", flavor), server(
            "follower", follower_flavor or flavor)
        storage = StorageSpec(f"file://{tmp_path}/store")
        if s3_bucket:
            storage = StorageSpec(f"s3://{s3_bucket['bucket']}/cdc", {
                k: s3_bucket[k] for k in ("endpoint_url", "region_name", "aws_access_key_id", "aws_secret_access_key")
            })
        pipeline = Pipeline(
            name=f"pipe_{unique_name}", database=unique_name, leader=leader, follower=follower,
            leader_settings=MySQLSettings(**leader_user), follower_settings=MySQLSettings(**follower_user),
            storage=storage,
        )
        return pipeline.start() if start else pipeline

    return make


def pytest_configure(config):
    # pyspark warns on every import that it does not fully support the pandas 3 that Airflow pins;
    # the merge job does not use pandas
    config.addinivalue_line("filterwarnings", "ignore:PySpark does not yet fully support pandas:FutureWarning")
