"""A user's Spark reads an Iceberg follower's tables by name, through Iceberg's own JdbcCatalog on
the catalog's database (which the merge wrote through pyiceberg's SqlCatalog): the latest rows, and
every table at the consistent cut with ``VERSION AS OF`` (the statements ``kinds.iceberg.cut``
writes). A real spark-submit of the Spark under test with Iceberg's runtime for its line; Iceberg
ships runtimes for Spark 3.5, 4.0 and 4.1 only, so this runs under ``make test-spark SPARK=4.1``
(CI's second line) and is skipped on the default line, 4.2, naming why."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from iceberg_helpers import assert_iceberg_equals_leader, delete_by_position_in_every_file
from lake_helpers import _plain, leader_columns, leader_rows
from mysql_cdc.kinds.iceberg.cut import read_cut
from mysql_cdc.merge.job import run_merge
from spark_under_test import SPARK_LINE, SPARK_SUBMIT

REPO = Path(__file__).resolve().parents[3]
RUNTIME_LIST = REPO / "mk" / "readers" / f"iceberg-spark-{SPARK_LINE}.txt"
RUNTIME_JARS = REPO / ".local" / "readers" / f"iceberg-spark-{SPARK_LINE}"

pytestmark = pytest.mark.skipif(
    not RUNTIME_LIST.exists(),
    reason=f"no Iceberg runtime for Spark {SPARK_LINE} (Iceberg 1.12: Spark 3.5, 4.0, 4.1); "
           "run `make test-spark SPARK=4.1`")

READ = """
import json, sys
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
for statement in json.loads(sys.argv[2]):
    spark.sql(statement)
out = {}
for name in json.loads(sys.argv[3]):
    database, table = name.split(".")
    out["latest " + name] = [r.asDict() for r in spark.sql(f"SELECT * FROM lake.{database}.{table}").collect()]
    out["cut " + name] = [r.asDict() for r in spark.sql(f"SELECT * FROM {database}__{table}").collect()]
open(sys.argv[1], "w").write(json.dumps(out, default=str))
"""


def spark_read(pipeline, statements: list[str], tables: list[str], work: Path) -> dict:
    jars = sorted(str(j) for j in RUNTIME_JARS.glob("*.jar"))
    if not jars:
        pytest.fail(f"Iceberg's Spark runtime is not in {RUNTIME_JARS}: run `make spark-line SPARK={SPARK_LINE}`")
    server = pipeline.catalog.server
    conf = {
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        "spark.sql.catalog.lake": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.lake.type": "jdbc",
        "spark.sql.catalog.lake.uri": f"jdbc:mariadb://{server.host}:{server.port}/{pipeline.catalog.database}",
        "spark.sql.catalog.lake.jdbc.user": server.user,
        "spark.sql.catalog.lake.warehouse": pipeline.catalog.warehouse.uri,
        "spark.ui.enabled": "false",
    }
    script, out = work / "read.py", work / "rows.json"
    script.write_text(READ)
    cmd = [str(SPARK_SUBMIT), "--master", "local[1]", "--jars", ",".join(jars)]
    for key, value in conf.items():
        cmd += ["--conf", f"{key}={value}"]
    # the catalog's password as a user passes a secret: not on the command line
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable,
           "SPARK_SUBMIT_OPTS": f"-Dspark.sql.catalog.lake.jdbc.password={server.password}"}
    done = subprocess.run([*cmd, str(script), str(out), json.dumps(statements), json.dumps(tables)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text())


def as_rows(rows: list[dict], columns) -> Counter:
    return Counter(tuple(_plain(r[c], t) for c, t in columns) for r in rows)


def test_spark_reads_the_tables_by_name_and_at_the_cut(iceberg_pipeline, spark, tmp_path):
    pipeline = iceberg_pipeline()
    db = pipeline.database
    batch = pipeline.capture([f"CREATE DATABASE {db}", f"USE {db}",
                              "CREATE TABLE orders (id INT PRIMARY KEY, sku VARCHAR(10), qty INT)",
                              "CREATE TABLE audit (what VARCHAR(20))",
                              "BEGIN", "INSERT INTO orders VALUES (1, 'a', 2), (2, 'b', 1)",
                              "INSERT INTO audit VALUES ('two orders'), ('two orders')", "COMMIT"])
    run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets)
    delete_by_position_in_every_file(pipeline, f"{db}.orders")  # Spark applies the update's position delete
    update = pipeline.capture([f"UPDATE {db}.orders SET qty = 5 WHERE id = 1"])
    run_merge(spark, pipeline.manifest_uri(update), pipeline.secrets)
    assert_iceberg_equals_leader(pipeline)
    cut = read_cut(pipeline.catalog, pipeline.name)
    # a later commit of one table, outside the cut: the latest read sees it, the cut does not
    cut.table(f"{db}.orders").delete("id = 2")

    read = spark_read(pipeline, cut.spark_sql(), sorted(cut.snapshots), tmp_path)

    for table in ("orders", "audit"):
        columns = leader_columns(pipeline.leader, db, table)
        assert as_rows(read[f"cut {db}.{table}"], columns) == leader_rows(pipeline.leader, db, table)
    latest = as_rows(read[f"latest {db}.orders"], leader_columns(pipeline.leader, db, "orders"))
    assert latest == Counter({(1, "a", 5): 1})
