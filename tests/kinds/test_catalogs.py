"""The lake followers' tables by name in a real catalog, read by name by the engines users run (one
file, so one Trino starts).

Delta: a Hive Metastore (Hive's Thrift server on the session's MariaDB, ``hive_metastore``), read by
Trino 476's ``delta_lake`` connector (a real server, ``trino``) and Spark SQL (a real spark-submit
with Hive support). The merge keeps the metastore equal to the consistent cut: created tables
registered, renamed and dropped ones moved and unregistered, schema changes read from the log; a
crash between the checkpoint and the catalog is repaired by the retry; a name the pipeline does not
own is refused, naming it.

Iceberg: its JDBC catalog, read by Trino's ``iceberg`` connector (Spark SQL by name:
``kinds/iceberg/test_spark_reads.py``, on the lines with an Iceberg runtime)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from iceberg_helpers import delete_by_position_in_every_file
from lake_helpers import (assert_lake_equals_leader, first_statements, later_statements, leader_columns, leader_rows,
                          lake_submit, reader_rows)
from mysql_cdc.kinds.delta.catalog import OWNER_PARAM, CatalogError, HiveMetastore, MetastoreRef
from mysql_cdc.kinds.delta.state.location import LakeLocation
from mysql_cdc.kinds.delta.submit import submit_needs
from mysql_cdc.merge.job import run_merge
from spark_under_test import SPARK_LINE, SPARK_SUBMIT


@pytest.fixture
def catalog_pipeline(lake_pipeline, hive_metastore):
    def make():
        return lake_pipeline(s3=True, catalog=MetastoreRef.from_uri(hive_metastore.uri))

    return make


def registered(pipeline) -> dict[str, str]:
    """The metastore's entries owned by the pipeline: ``db.table`` -> the table's path."""
    with HiveMetastore(pipeline.catalog) as metastore:
        found = {}
        for database in metastore.databases():
            for table in metastore.owned_tables(database, pipeline.name):
                found[f"{database}.{table}"] = metastore.entry(database, table).sd.serdeInfo.parameters["path"]
        return found


def expected_entries(pipeline, *tables: str) -> dict[str, str]:
    location = LakeLocation(pipeline.lake)
    return {f"{pipeline.database}.{t}": location.spark_path(location.table_uri(pipeline.database, t)) for t in tables}


def trino_rows(trino, pipeline, table: str):
    return reader_rows(trino.query(f"SELECT * FROM lake.{pipeline.database}.{table}"),
                       leader_columns(pipeline.leader, pipeline.database, table))


SPARK_READ = """
import json, sys
from pyspark.sql import SparkSession
spark = SparkSession.builder.enableHiveSupport().getOrCreate()
for name in json.loads(sys.argv[2]):
    spark.sql(f"SELECT * FROM spark_catalog.{name}").write.parquet(f"{sys.argv[1]}/{name}")
"""


def spark_sql_read(pipeline, metastore_uri: str, tables: list[str], work: Path) -> dict[str, list[dict]]:
    """``SELECT * FROM spark_catalog.<db>.<table>`` in a user's Spark: Hive support on, the metastore's
    address, Delta's session catalog, the lake's S3A settings; nothing names a table's path."""
    needs = submit_needs(SPARK_LINE)
    conf = {**dict(needs.conf), "spark.sql.catalogImplementation": "hive",
            "spark.hadoop.hive.metastore.uris": metastore_uri, "spark.ui.enabled": "false",
            "spark.sql.warehouse.dir": str(work / "warehouse"),
            **{f"spark.hadoop.{k}": v for k, v in LakeLocation(pipeline.lake).hadoop_conf().items()}}
    script, out = work / "spark_read.py", work / "spark_rows"
    script.write_text(SPARK_READ)
    cmd = [str(SPARK_SUBMIT), "--master", "local[1]", "--jars", ",".join(needs.jars)]
    for key, value in conf.items():
        cmd += ["--conf", f"{key}={value}"]
    done = subprocess.run([*cmd, str(script), str(out), json.dumps(tables)], cwd=work,
                          env={**os.environ, "PYSPARK_PYTHON": sys.executable}, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return {name: pq.read_table(out / name).to_pylist() for name in tables}


def test_the_merge_keeps_the_metastore_at_the_cut_and_trino_and_spark_read_by_name(catalog_pipeline, spark, trino,
                                                                                  hive_metastore, tmp_path):
    pipeline = catalog_pipeline()
    db = pipeline.database
    run_merge(spark, pipeline.manifest_uri(pipeline.capture(first_statements(db))), pipeline.secrets)
    assert registered(pipeline) == expected_entries(pipeline, "owner", "pet")
    for table in ("owner", "pet"):
        assert trino_rows(trino, pipeline, table) == leader_rows(pipeline.leader, db, table)

    # renamed, dropped and added columns: the entries stay, every engine reads the log's columns
    run_merge(spark, pipeline.manifest_uri(pipeline.capture(later_statements(db))), pipeline.secrets)
    assert_lake_equals_leader(pipeline)
    assert registered(pipeline) == expected_entries(pipeline, "owner", "pet")
    for table in ("owner", "pet"):
        assert trino_rows(trino, pipeline, table) == leader_rows(pipeline.leader, db, table)

    # a table renamed, one dropped, one created: the catalog follows, in the same run
    run_merge(spark, pipeline.manifest_uri(pipeline.capture([
        f"USE {db}", "RENAME TABLE pet TO animal", "DROP TABLE owner",
        "CREATE TABLE visit (id BIGINT PRIMARY KEY, pet VARCHAR(20), at DATE)",
        "INSERT INTO visit VALUES (1, 'Claws', '2026-11-01'), (2, 'Whistler', NULL)",
        "INSERT INTO animal VALUES ('Rex', 'dog', '2020-02-02')"])), pipeline.secrets)
    assert registered(pipeline) == expected_entries(pipeline, "animal", "visit")
    for table in ("animal", "visit"):
        assert trino_rows(trino, pipeline, table) == leader_rows(pipeline.leader, db, table)
    tables = {r["Table"] for r in trino.query(f"SHOW TABLES FROM lake.{db}")}
    assert tables == {"animal", "visit"}

    read = spark_sql_read(pipeline, hive_metastore.uri, [f"{db}.animal", f"{db}.visit"], tmp_path)
    for table in ("animal", "visit"):
        columns = leader_columns(pipeline.leader, db, table)
        assert reader_rows(read[f"{db}.{table}"], columns) == leader_rows(pipeline.leader, db, table)


def test_a_crash_before_the_catalog_is_synced_is_repaired_by_the_retry(catalog_pipeline, trino, tmp_path):
    pipeline = catalog_pipeline()
    db = pipeline.database
    batch = pipeline.capture(first_statements(db))
    crashed = lake_submit(pipeline, batch, tmp_path / "crash", extra_env={"MYSQL_CDC_CRASH_AT": "before_catalog_sync"})
    assert crashed.returncode != 0
    assert pipeline.checkpoint().position == batch.end  # the lake and its checkpoint committed
    assert registered(pipeline) == {}  # the catalog not yet

    retried = lake_submit(pipeline, batch, tmp_path / "retry")  # the batch again: a no-op replay
    assert retried.returncode == 0, retried.stderr[-3000:]
    assert registered(pipeline) == expected_entries(pipeline, "owner", "pet")
    assert trino_rows(trino, pipeline, "owner") == leader_rows(pipeline.leader, db, "owner")


def test_a_name_the_pipeline_does_not_own_is_refused_and_the_rest_registered(catalog_pipeline, spark):
    pipeline = catalog_pipeline()
    db = pipeline.database
    with HiveMetastore(pipeline.catalog) as metastore:  # a user's own table where the pipeline's will be
        metastore.ensure_database(db)
        metastore.register(db, "pet", "s3a://elsewhere/pet", "someone_else")
    with pytest.raises(CatalogError) as refused:
        run_merge(spark, pipeline.manifest_uri(pipeline.capture(first_statements(db))), pipeline.secrets)
    message = str(refused.value)
    assert f"{db}.pet" in message and "someone_else" in message and "DROP TABLE" in message
    assert registered(pipeline) == expected_entries(pipeline, "owner")  # the free name is registered
    with HiveMetastore(pipeline.catalog) as metastore:
        assert metastore.entry(db, "pet").parameters[OWNER_PARAM] == "someone_else"  # untouched
        metastore.unregister(db, "pet")  # the recovery the message names
    batch = pipeline.capture([f"USE {db}", "INSERT INTO pet VALUES ('Rex', 'dog', NULL)"])
    run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets)
    assert registered(pipeline) == expected_entries(pipeline, "owner", "pet")


def test_an_unreachable_metastore_fails_the_merge_after_the_commit_naming_it(lake_pipeline, spark):
    from services.process import free_port

    pipeline = lake_pipeline(catalog=MetastoreRef("127.0.0.1", free_port()))  # nothing listens there
    batch = pipeline.capture(first_statements(pipeline.database))
    with pytest.raises(CatalogError) as refused:
        run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets)
    assert pipeline.catalog.uri in str(refused.value) and "metastore_uri" in str(refused.value)
    assert pipeline.checkpoint().position == batch.end
    assert_lake_equals_leader(pipeline)


# -- Iceberg --------------------------------------------------------------------------------------


def test_trino_reads_the_tables_by_name_through_the_jdbc_catalog_latest_and_at_the_cut(iceberg_pipeline, spark, trino,
                                                                                       s3_server):
    """Trino 476's ``iceberg`` connector on the same JDBC catalog (its database on the MariaDB server,
    the MariaDB driver in the plugin), as a data team's Trino is configured for it: every table by
    name, and ``FOR VERSION AS OF`` the snapshot the cut names."""
    from services.trino import iceberg_jdbc_catalog

    pipeline = iceberg_pipeline(s3=True)
    db = pipeline.database
    run_merge(spark, pipeline.manifest_uri(pipeline.capture(first_statements(db))), pipeline.secrets)
    delete_by_position_in_every_file(pipeline, f"{db}.owner")  # Trino applies the owners' position deletes
    run_merge(spark, pipeline.manifest_uri(pipeline.capture(later_statements(db))), pipeline.secrets)
    catalog = pipeline.catalog
    name = f"ice_{db}".lower()
    trino.create_catalog(name, iceberg_jdbc_catalog(catalog.name, catalog.server, catalog.database,
                                                    catalog.warehouse.uri, s3_server))
    assert {r["Table"] for r in trino.query(f"SHOW TABLES FROM {name}.{db}")} == {"owner", "pet"}
    cut = pipeline.cut()
    for table in ("owner", "pet"):
        expected, columns = leader_rows(pipeline.leader, db, table), leader_columns(pipeline.leader, db, table)
        assert reader_rows(trino.query(f"SELECT * FROM {name}.{db}.{table}"), columns) == expected, table
        at_cut = trino.query(f"SELECT * FROM {name}.{db}.{table} FOR VERSION AS OF {cut[f'{db}.{table}']}")
        assert reader_rows(at_cut, columns) == expected, table
