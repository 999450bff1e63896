#!/usr/bin/env python3
"""Benchmark the merge into a Delta Lake follower, each figure beside a reference from the same run.

    .venv/bin/python bench/bench_delta.py --rows 1000000     (--rows 50000 --big 200000 for a quick check)

1. ``delta_merge_vs_append``: a batch of ``--rows`` change rows (bench_merge's workload: inserts,
   updates, deletes) merged into a Delta table by the merge job's own code (``run_merge``, in one
   local[2] session with the Delta jars), against a plain Spark append of the same net rows into a
   new Delta table in the same session. Ratio = append seconds / merge seconds (target >= 0.5),
   both warm (the merge's second run; its first, cold, is ``delta_merge_cold_vs_append``).
2. ``delta_merge_growth``: one 10k-change batch (updates of keys spread over the whole key range)
   merged into a ``--big``-row table, against the same batch into a table of 1% of its rows over
   the same key range. Ratio = big seconds / small seconds (target <= 3: the cost follows the
   change, not the table), each table merged as the merge job chooses: both hold at most
   ``DRIVER_MERGE_BYTES`` of files (``delta_growth_big_table_mib`` says how much), so delta-rs merges
   both from the driver, copy-on-write (every file of the big table holds an updated key). Beside
   it, ``delta_merge_growth_spark_alone``: the same two merges by Spark's MERGE (deletion vectors),
   as a table above that size takes.
3. ``delta_tiny_run_s``: the merge job's spark-submit for a one-row batch into a lake, beside a bare
   spark-submit of an empty job with the same jars (target <= bare + 15 s).

Prints one JSON object as its last line. Servers started here are stopped on exit.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "scripts"), str(REPO / "plugins"), str(REPO / "bench")]

from bench_merge import DB, PIPELINE, TABLE, leader_workload, position  # noqa: E402
from local_services import MariaDBServer  # noqa: E402
from mysql_cdc.capture.stream.extract import BatchTarget, RangeRequest, extract_range  # noqa: E402
from mysql_cdc.capture.filters import TableFilter  # noqa: E402
from mysql_cdc.contracts import MANIFEST_NAME, Checkpoint, PositionRange  # noqa: E402
from mysql_cdc.kinds.delta import follower_spec as delta_follower_spec  # noqa: E402
from mysql_cdc.spark_lines import DEFAULT_LINE  # noqa: E402
from mysql_cdc.packaging import (  # noqa: E402
    DRIVER_JAVA_OPTIONS, MERGE_JOB, build_py_files, driver_java_options, launcher_env)
from mysql_cdc.job_secrets import SECRETS_ENV, JobSecrets  # noqa: E402
from mysql_cdc.mysql_server import MySQLSettings  # noqa: E402
from mysql_cdc.kinds.delta.state import DeltaStateStore, LakeLocation  # noqa: E402
from mysql_cdc.kinds.base import SubmitNeeds  # noqa: E402
from mysql_cdc.kinds.delta.submit import submit_needs  # noqa: E402
from mysql_cdc.storage import StorageSpec, open_store  # noqa: E402

GROWTH_CHANGES = 10_000


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def spark_session():
    from pyspark.sql import SparkSession

    # executors are Python processes of this interpreter that import mysql_cdc (the job's zip's
    # role when spark-submit runs it): both come from the environment the JVM inherits
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "plugins"), os.environ.get("PYTHONPATH")]))

    needs = submit_needs(DEFAULT_LINE)
    builder = SparkSession.builder.master("local[2]").config("spark.jars", ",".join(needs.jars))
    for key, value in needs.conf:
        builder = builder.config(key, value)
    spark = (builder.config("spark.sql.session.timeZone", "UTC").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").config("spark.sql.shuffle.partitions", "4").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def capture(settings: MySQLSettings, storage: StorageSpec, start, end, database: str = DB):
    """The range's batch of ``database``'s tables, and its manifest's URI."""
    request = RangeRequest(PIPELINE, PositionRange(start, end), TableFilter((f"{database}.*",)))
    batch = extract_range(settings, request, BatchTarget(open_store(storage)))
    return batch, f"{storage.uri}/{batch.prefix}/{MANIFEST_NAME}"


def lake_secrets(lake: StorageSpec, storage: StorageSpec, start) -> JobSecrets:
    DeltaStateStore(LakeLocation(lake)).initialize(Checkpoint(PIPELINE, start))
    return JobSecrets(delta_follower_spec(lake), storage)


def merge_vs_append(spark, leader: MariaDBServer, settings, storage, work: Path, rows: int) -> dict:
    """The batch merged twice, into two empty lakes: the first merge is the session's first work
    (the JVM's and the Python workers' warm-up, which the tiny-run figure measures on its own), the
    second runs warm like the append it is compared with."""
    from mysql_cdc.merge.job import run_merge

    start = position(settings)
    leader_workload(leader, rows)
    batch, uri = capture(settings, storage, start, position(settings))
    seconds = []
    for attempt in ("cold", "warm"):
        lake = StorageSpec(f"file://{work}/lake-merge-{attempt}")
        secrets = lake_secrets(lake, storage, start)
        log(f"merging {batch.row_count:,} change rows into Delta ({attempt} session) ...")
        started = time.monotonic()
        run_merge(spark, uri, secrets)
        seconds.append(time.monotonic() - started)
    cold_s, merge_s = seconds
    net = spark.read.format("delta").load(f"{lake.uri}/{DB}/{TABLE}").cache()
    net_rows = net.count()
    log(f"appending the same {net_rows:,} net rows to a new Delta table ...")
    started = time.monotonic()
    net.write.format("delta").mode("append").save(f"file://{work}/lake-append/{DB}/{TABLE}")
    append_s = time.monotonic() - started
    return {"delta_merge_s": round(merge_s, 2), "delta_merge_cold_s": round(cold_s, 2),
            "delta_append_s": round(append_s, 2), "delta_net_rows": net_rows,
            "delta_merge_rows_per_s": round(net_rows / merge_s), "delta_append_rows_per_s": round(net_rows / append_s),
            "delta_merge_vs_append": round(append_s / merge_s, 3),
            "delta_merge_cold_vs_append": round(append_s / cold_s, 3)}


def growth(spark, leader: MariaDBServer, settings, storage, work: Path, big: int) -> dict:
    """One batch of GROWTH_CHANGES updates over keys spread on [0, big), into a big table and into
    a table of 1% of its rows over the same key range (both holding every updated key)."""
    from mysql_cdc.contracts import ColumnSpec
    from mysql_cdc.kinds.delta.sink.tables import DeltaTableRef, create_table
    from mysql_cdc.merge.job import run_merge
    from pyspark.sql import functions as F

    step = big // GROWTH_CHANGES
    leader.run_sql([f"CREATE DATABASE g{DB}", f"CREATE TABLE g{DB}.{TABLE} (id BIGINT PRIMARY KEY, v INT)",
                    f"INSERT INTO g{DB}.{TABLE} SELECT seq * {step}, 0 FROM g{DB}.seq_0_to_{GROWTH_CHANGES - 1}"])
    start = position(settings)
    leader.run_sql([f"UPDATE g{DB}.{TABLE} SET v = v + 1"])
    request = RangeRequest(PIPELINE, PositionRange(start, position(settings)), TableFilter((f"g{DB}.*",)))
    batch = extract_range(settings, request, BatchTarget(open_store(storage)))
    uri = f"{storage.uri}/{batch.prefix}/{MANIFEST_NAME}"
    seconds, big_bytes = {}, 0
    # "..._by_spark" last, so the merge job's own two keep their conditions: the same tables merged
    # by Spark's MERGE (the merge job gives delta-rs a table of at most DRIVER_MERGE_BYTES of files)
    for label, rows in (("small", big // 100), ("big", big), ("small_by_spark", big // 100),
                        ("big_by_spark", big)):
        lake = StorageSpec(f"file://{work}/lake-{label}")
        secrets = lake_secrets(lake, storage, start)
        # the table as the merge job creates it (its properties), filled with keys spread over [0, big)
        target = DeltaTableRef(f"g{DB}.{TABLE}", f"{lake.uri}/g{DB}/{TABLE}")
        create_table(spark, target, (ColumnSpec("id", "bigint", "int64", False), ColumnSpec("v", "int", "int32")))
        (spark.range(0, rows).select((F.col("id") * (big // rows)).alias("id"), F.lit(0).cast("int").alias("v"))
         .repartition(max(1, rows // 1_000_000)).write.format("delta").mode("append").save(target.path))
        if label == "big":
            big_bytes = table_bytes(target.path)
        log(f"merging {batch.row_count:,} updates into a {rows:,}-row Delta table ({label}) ...")
        started = time.monotonic()
        with driver_merge_bytes(0 if label.endswith("_by_spark") else None):
            run_merge(spark, uri, secrets)
        seconds[label] = time.monotonic() - started
    return {"delta_merge_small_table_s": round(seconds["small"], 2), "delta_merge_big_table_s": round(seconds["big"], 2),
            "delta_merge_growth": round(seconds["big"] / seconds["small"], 3), "delta_growth_big_rows": big,
            "delta_growth_big_table_mib": round(big_bytes / 2**20, 1),
            "delta_merge_small_table_by_spark_s": round(seconds["small_by_spark"], 2),
            "delta_merge_big_table_by_spark_s": round(seconds["big_by_spark"], 2),
            "delta_merge_growth_spark_alone": round(seconds["big_by_spark"] / seconds["small_by_spark"], 3)}


def table_bytes(path: str) -> int:
    """The bytes of a Delta table's data files (what the merge job compares with DRIVER_MERGE_BYTES)."""
    import deltalake

    from mysql_cdc.kinds.delta.sink import files_bytes

    return files_bytes(deltalake.DeltaTable(path))


@contextlib.contextmanager
def driver_merge_bytes(limit: int | None):
    """The Delta sink's limit for delta-rs's merges from the driver set to ``limit`` (None: as it is)."""
    from mysql_cdc.kinds.delta import sink

    kept = sink.DRIVER_MERGE_BYTES
    sink.DRIVER_MERGE_BYTES = kept if limit is None else limit
    try:
        yield
    finally:
        sink.DRIVER_MERGE_BYTES = kept


def submit(args: list[str], env: dict, needs: SubmitNeeds = SubmitNeeds()) -> float:
    """Seconds a local spark-submit of ``args`` takes, with a kind's ``needs`` (jars, properties)."""
    cmd = [str(Path(sys.executable).parent / "spark-submit"), "--master", "local[2]", "--conf", "spark.ui.enabled=false"]
    if needs.jars:
        cmd += ["--jars", ",".join(needs.jars)]
    # the driver's Java options the merge task gives every submit (packaging.driver_java_options),
    # to the merge and to the bare reference alike
    cmd += ["--driver-java-options", driver_java_options({}, DEFAULT_LINE)[DRIVER_JAVA_OPTIONS]]
    for key, value in needs.conf:
        cmd += ["--conf", f"{key}={value}"]
    started = time.monotonic()
    result = subprocess.run(cmd + args, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"spark-submit failed:\n{(result.stdout + result.stderr)[-4000:]}")
    return time.monotonic() - started


def tiny_run(leader: MariaDBServer, settings, storage, work: Path) -> dict:
    leader.run_sql([f"CREATE DATABASE t{DB}", f"CREATE TABLE t{DB}.t (id INT PRIMARY KEY, v INT)"])
    start = position(settings)
    leader.run_sql([f"INSERT INTO t{DB}.t VALUES (1, 1)"])
    request = RangeRequest(PIPELINE, PositionRange(start, position(settings)), TableFilter((f"t{DB}.*",)))
    batch = extract_range(settings, request, BatchTarget(open_store(storage)))
    secrets = lake_secrets(StorageSpec(f"file://{work}/lake-tiny"), storage, start)
    secrets_file = work / "secrets.json"
    secrets.write(str(secrets_file))
    # the merge task's environment: the launcher's archive, when the machine has one
    env = {**os.environ, **launcher_env(DEFAULT_LINE), SECRETS_ENV: str(secrets_file), "PYSPARK_PYTHON": sys.executable}
    env.pop("PYTHONPATH", None)
    py_files = build_py_files(work)
    log("a one-row batch into a lake with spark-submit, and a bare spark-submit ...")
    needs = submit_needs(DEFAULT_LINE)
    tiny = submit(["--py-files", py_files, str(MERGE_JOB), "--manifest-uri",
                   f"{storage.uri}/{batch.prefix}/{MANIFEST_NAME}"], env, needs)
    bare = submit([str(REPO / "bench" / "noop_job.py")], env, needs)
    return {"delta_tiny_run_s": round(tiny, 1), "delta_bare_spark_submit_s": round(bare, 1),
            "delta_tiny_run_minus_spark_submit_s": round(tiny - bare, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="change rows of the merge-vs-append batch")
    parser.add_argument("--big", type=int, default=5_000_000, help="rows of the big table of the growth figure")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mysql-cdc-bench-delta-"))
    leader = MariaDBServer(work, "leader", server_id=1, binlog=True, die_with_parent=True)
    try:
        leader.start()
        settings = MySQLSettings(**leader.create_user(
            "bench_reader", "bench_pw", ["REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.*"]))
        storage = StorageSpec(f"file://{work}/batches")
        spark = spark_session()
        results = {}
        results.update(merge_vs_append(spark, leader, settings, storage, work, args.rows))
        results.update(growth(spark, leader, settings, storage, work, args.big))
        spark.stop()
        results.update(tiny_run(leader, settings, storage, work))
    finally:
        leader.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
