"""The lake pipelines the DAG tests run: each a pipelines file of one pipeline (its follower a
Delta Lake, or an Iceberg catalog in a database of the session's follower server) over two leader
tables, one keyed and one keyless, that exist before the first run (which copies them)."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
import yaml

from iceberg_helpers import IcebergPipeline, assert_iceberg_equals_leader
from lake_helpers import LakePipeline, assert_lake_equals_leader
from merge_helpers import Pipeline
from mysql_cdc.kinds.iceberg.catalog import CatalogRef
from mysql_cdc.mysql_server import MySQLSettings
from mysql_cdc.storage import StorageSpec


def _lake_pipeline(leader, leader_user, follower, follower_user, tmp_path, db: str, follower_config: dict) -> Pipeline:
    """The pipelines file of one pipeline over ``db`` into the follower ``follower_config`` says,
    the leader's two tables with their first rows, and the test pipeline (before its kind's)."""
    name = f"cdc_{db}"
    Path(os.environ["CDC_PIPELINES_FILE"]).write_text(yaml.safe_dump({"pipelines": [{
        "name": name, "schedule": None, "leader_conn_id": "mysql_leader", "follower": follower_config,
        "storage_uri": f"file://{tmp_path / 'batches'}", "include": [f"{db}.*"], "start_position": "snapshot",
        "wait_timeout": 3, "poke_interval": 1, "retries": 1, "retry_delay": 1,
        "verify": {"schedule": None, "chunk_rows": 1, "rechecks": 0}}]}))
    leader.run_sql([f"CREATE DATABASE {db}", f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(10))",
                    f"CREATE TABLE {db}.pet (name VARCHAR(20), species VARCHAR(20))",
                    f"INSERT INTO {db}.t VALUES (1, 'a'), (2, 'b')", f"INSERT INTO {db}.pet VALUES ('Buffy', 'dog')"])
    return Pipeline(name, db, leader, follower, MySQLSettings(**leader_user), MySQLSettings(**follower_user),
                    StorageSpec(f"file://{tmp_path / 'batches'}"))


@pytest.fixture
def lake_dag(leader, leader_user, follower, follower_user, tmp_path, airflow_connections):
    db = f"dl_{uuid.uuid4().hex[:8]}"
    lake = StorageSpec(f"file://{tmp_path / 'lake'}")
    base = _lake_pipeline(leader, leader_user, follower, follower_user, tmp_path, db,
                          {"kind": "delta", "location": lake.uri, "changelog": True})
    return base.name, LakePipeline.of(base, lake)


@pytest.fixture
def iceberg_dag(leader, leader_user, follower, follower_user, tmp_path, airflow_connections):
    db = f"ib_{uuid.uuid4().hex[:8]}"
    warehouse = StorageSpec(f"file://{tmp_path / 'warehouse'}")
    catalog_db = f"catalog_{db}"
    follower.run_sql([f"CREATE DATABASE {catalog_db}"])
    base = _lake_pipeline(leader, leader_user, follower, follower_user, tmp_path, db,
                          {"kind": "iceberg", "catalog": "lake", "conn_id": "mysql_follower", "database": catalog_db,
                           "warehouse": warehouse.uri})
    catalog = CatalogRef("lake", MySQLSettings(**follower_user), catalog_db, warehouse)
    return base.name, IcebergPipeline.of(base, warehouse, catalog)


# the lake kinds, for the DAG tests both prove the same way: (the pipeline's name, its test
# pipeline, the assertion that its follower equals the leader at the consistent cut)
LAKE_ASSERTIONS = {"delta": assert_lake_equals_leader, "iceberg": assert_iceberg_equals_leader}


@pytest.fixture(params=sorted(LAKE_ASSERTIONS))
def lake_kind_dag(request):
    name, pipeline = request.getfixturevalue({"delta": "lake_dag", "iceberg": "iceberg_dag"}[request.param])
    return name, pipeline, LAKE_ASSERTIONS[request.param]
