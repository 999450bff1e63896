"""Apply-side fixtures: ONE SparkSession for all in-process tests, and per-test pipelines on the
session's real leader, follower (and S3 endpoint), isolated by database and pipeline names."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from merge_helpers import Pipeline
from mysql_cdc.settings import MySQLSettings
from mysql_cdc.storage import StorageSpec

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def spark():
    # Executors are separate Python processes: they must run this interpreter (pyarrow, pymysql)
    # and find mysql_cdc, whose functions they run; both come from the environment the JVM inherits.
    saved = {k: os.environ.get(k) for k in ("PYSPARK_PYTHON", "PYTHONPATH")}
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT / "plugins"), saved["PYTHONPATH"]]))
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("mysql-cdc apply tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        # C1-only JIT: test batches are tiny, so JVM warm-up, not throughput, is what costs. Without
        # tiered compilation the JVM reserves only 48 MB of code cache, and this one session JVM
        # compiles hundreds of Spark plans over the whole suite: it filled up ("Out of space in
        # CodeCache") and failed every later test
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=256m")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    # the JVM took its copy of the environment; later subprocesses get the original one back
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    yield session
    session.stop()


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
