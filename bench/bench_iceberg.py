#!/usr/bin/env python3
"""Benchmark the merge into an Iceberg follower, each figure beside a reference from the same run.

    .venv/bin/python bench/bench_iceberg.py --rows 1000000     (--rows 50000 --big 200000 for a quick check)

The catalog is an Iceberg JDBC catalog in a database of a MariaDB server started here, the warehouse
on the local file system (as ``bench_delta``'s lake), so the figures are the follower's own work.

1. ``iceberg_merge_vs_append``: a batch of ``--rows`` change rows (bench_merge's workload: inserts,
   updates, deletes) merged by the merge job's own code (``run_merge``) into an empty catalog,
   against pyiceberg's plain append of the same net rows into a new table (created in the timed
   call, as the merge creates its table from the batch's DDL and Spark's append to a new Delta
   table's path creates it in ``bench_delta``), in the same process. Ratio = append seconds / merge
   seconds (target >= 0.5), medians of ``--repeat`` warm merges (each into a fresh catalog) and
   appends; the first merge, ``iceberg_merge_cold_s``, also pays the imports and the process's
   first work. Spark is started only by a merge that needs it, as the merge job starts it.
2. ``iceberg_merge_growth``: one 10k-change batch (updates of keys spread over the whole key range)
   merged into a ``--big``-row table, against the same batch into a table of 1% of its rows over the
   same key range. Ratio = big seconds / small seconds (target <= 3: the cost follows the change,
   not the table), medians of ``--repeat`` merges into fresh tables.
3. ``iceberg_tiny_run_s``: the merge job's spark-submit for a one-row batch, beside a bare
   spark-submit of an empty job (target <= bare + 15 s).

Prints one JSON object as its last line. Servers started here are stopped on exit.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "scripts"), str(REPO / "plugins"), str(REPO / "bench")]

from bench_delta import capture, spark_session, submit  # noqa: E402  (the Delta bench's capture, session and spark-submit)
from bench_merge import DB, PIPELINE, TABLE, leader_workload, position  # noqa: E402
from local_services import MariaDBServer  # noqa: E402
from mysql_cdc.contracts import Checkpoint  # noqa: E402
from mysql_cdc.job_secrets import SECRETS_ENV, JobSecrets  # noqa: E402
from mysql_cdc.kinds.iceberg import follower_spec as iceberg_follower_spec  # noqa: E402
from mysql_cdc.kinds.iceberg.catalog import CatalogRef  # noqa: E402
from mysql_cdc.kinds.iceberg.state import IcebergStateStore  # noqa: E402
from mysql_cdc.mysql_server import MySQLSettings  # noqa: E402
from mysql_cdc.packaging import MERGE_JOB, build_py_files  # noqa: E402
from mysql_cdc.storage import StorageSpec  # noqa: E402

GROWTH_CHANGES = 10_000


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class Catalogs:
    """Fresh catalogs (a database each) on the catalog server, their warehouses under ``work``."""

    def __init__(self, server: MariaDBServer, work: Path):
        self.server, self.work = server, work

    def new(self, label: str) -> CatalogRef:
        database = f"catalog_{label}_{uuid.uuid4().hex[:6]}"
        self.server.run_sql([f"CREATE DATABASE {database}"])
        return CatalogRef("lake", MySQLSettings(**self.server.conn_params()), database,
                          StorageSpec(f"file://{self.work}/warehouse-{label}"))

    def secrets(self, catalog: CatalogRef, storage: StorageSpec, start) -> JobSecrets:
        """The merge job's secrets into ``catalog``, its state fresh at ``start`` (the state is the
        server's, keyed by the pipeline: every merge here is the same pipeline's first)."""
        self.server.run_sql(["DROP DATABASE IF EXISTS _mysql_cdc"])
        IcebergStateStore(catalog).initialize(Checkpoint(PIPELINE, start))
        return JobSecrets(iceberg_follower_spec(catalog), storage)


def merge_vs_append(spark, catalogs: Catalogs, leader: MariaDBServer, settings, storage, rows: int,
                    repeat: int) -> dict:
    from mysql_cdc.merge.job import run_merge

    start = position(settings)
    leader_workload(leader, rows)
    _, uri = capture(settings, storage, start, position(settings))
    merges, catalog = [], None
    for attempt in range(1 + repeat):  # the first pays the imports and the process's first work
        catalog = catalogs.new(f"merge_{attempt}")
        secrets = catalogs.secrets(catalog, storage, start)
        log(f"merging {rows:,} change rows into Iceberg ({'cold' if not attempt else f'warm {attempt}/{repeat}'}) ...")
        started = time.monotonic()
        run_merge(spark, uri, secrets)
        merges.append(time.monotonic() - started)
    cold_s, merge_s = merges[0], statistics.median(merges[1:])
    net = catalog.open().load_table((DB, TABLE)).scan().to_arrow()
    appends = []
    for attempt in range(repeat):
        log(f"appending the same {net.num_rows:,} net rows to a new Iceberg table ({attempt + 1}/{repeat}) ...")
        target = catalogs.new(f"append_{attempt}").open()
        target.create_namespace(DB)
        # a new table and its rows, as the merge makes its table from the batch's CREATE TABLE and
        # as Spark's append to a new Delta table's path (``bench_delta``'s reference) creates it
        started = time.monotonic()
        target.create_table((DB, TABLE), schema=net.schema).append(net)
        appends.append(time.monotonic() - started)
    append_s = statistics.median(appends)
    return {"iceberg_merge_s": round(merge_s, 3), "iceberg_merge_cold_s": round(cold_s, 2),
            "iceberg_append_s": round(append_s, 3), "iceberg_net_rows": net.num_rows,
            "iceberg_merge_rows_per_s": round(net.num_rows / merge_s),
            "iceberg_append_rows_per_s": round(net.num_rows / append_s),
            "iceberg_merge_vs_append": round(append_s / merge_s, 3)}


def growth(spark, catalogs: Catalogs, leader: MariaDBServer, settings, storage, big: int, repeat: int) -> dict:
    """One batch of GROWTH_CHANGES updates over keys spread on [0, big), into a big table and into
    a table of 1% of its rows over the same key range (both holding every updated key); medians of
    ``repeat`` merges into each (fresh tables each time: a merge of tens of milliseconds is noisy)."""
    import numpy as np
    import pyarrow as pa

    from mysql_cdc.contracts import ColumnSpec
    from mysql_cdc.kinds.iceberg.tables import create_table
    from mysql_cdc.kinds.iceberg.types import iceberg_schema
    from mysql_cdc.merge.job import run_merge

    step = big // GROWTH_CHANGES
    database = f"g{DB}"
    leader.run_sql([f"CREATE DATABASE {database}", f"CREATE TABLE {database}.{TABLE} (id BIGINT PRIMARY KEY, v INT)",
                    f"INSERT INTO {database}.{TABLE} SELECT seq * {step}, 0 FROM {database}.seq_0_to_{GROWTH_CHANGES - 1}"])
    start = position(settings)
    leader.run_sql([f"UPDATE {database}.{TABLE} SET v = v + 1"])
    _, uri = capture(settings, storage, start, position(settings), database)
    columns = (ColumnSpec("id", "bigint", "int64", False), ColumnSpec("v", "int", "int32"))
    schema = iceberg_schema(columns, f"{database}.{TABLE}")
    seconds: dict[str, list[float]] = {"small": [], "big": []}
    # the small table's keys: every multiple of a stride that divides the updated keys' step, so
    # that it holds every updated key at about 1% of the big table's rows
    small_stride = math.gcd(step, 100)
    for attempt in range(repeat):
        for label, rows in (("small", big // small_stride), ("big", big)):
            catalog = catalogs.new(f"growth_{label}_{attempt}")
            secrets = catalogs.secrets(catalog, storage, start)
            # the table as the merge job creates it (its properties), filled with keys spread over [0, big)
            table = create_table(catalog.open(), database, TABLE, schema, None)
            keys = pa.array(np.arange(0, big, big // rows, dtype=np.int64))
            table.append(pa.table({"id": keys, "v": pa.array(np.zeros(len(keys), dtype=np.int32))}, schema=schema))
            log(f"merging {GROWTH_CHANGES:,} updates into a {rows:,}-row Iceberg table ({attempt + 1}/{repeat}) ...")
            started = time.monotonic()
            run_merge(spark, uri, secrets)
            seconds[label].append(time.monotonic() - started)
    small, big_s = statistics.median(seconds["small"]), statistics.median(seconds["big"])
    return {"iceberg_merge_small_table_s": round(small, 3), "iceberg_merge_big_table_s": round(big_s, 3),
            "iceberg_merge_growth": round(big_s / small, 3), "iceberg_growth_big_rows": big}


def tiny_run(catalogs: Catalogs, leader: MariaDBServer, settings, storage, work: Path) -> dict:
    database = f"t{DB}"
    leader.run_sql([f"CREATE DATABASE {database}", f"CREATE TABLE {database}.t (id INT PRIMARY KEY, v INT)"])
    start = position(settings)
    leader.run_sql([f"INSERT INTO {database}.t VALUES (1, 1)"])
    _, uri = capture(settings, storage, start, position(settings), database)
    secrets = catalogs.secrets(catalogs.new("tiny"), storage, start)
    secrets_file = work / "secrets.json"
    secrets.write(str(secrets_file))
    env = {**os.environ, SECRETS_ENV: str(secrets_file), "PYSPARK_PYTHON": sys.executable}
    env.pop("PYTHONPATH", None)
    py_files = build_py_files(work)
    log("a one-row batch into Iceberg with spark-submit, and a bare spark-submit ...")
    tiny = submit(["--py-files", py_files, str(MERGE_JOB), "--manifest-uri", uri], env)
    bare = submit([str(REPO / "bench" / "noop_job.py")], env)
    return {"iceberg_tiny_run_s": round(tiny, 1), "iceberg_bare_spark_submit_s": round(bare, 1),
            "iceberg_tiny_run_minus_spark_submit_s": round(tiny - bare, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="change rows of the merge-vs-append batch")
    parser.add_argument("--big", type=int, default=5_000_000, help="rows of the big table of the growth figure")
    parser.add_argument("--repeat", type=int, default=3,
                        help="warm merges and appends of the merge-vs-append figure, and merges into each table of the "
                             "growth figure: the medians are compared")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mysql-cdc-bench-iceberg-"))
    leader = MariaDBServer(work, "leader", server_id=1, binlog=True, die_with_parent=True)
    catalog_server = MariaDBServer(work, "catalog", server_id=2, binlog=False, die_with_parent=True)
    try:
        leader.start()
        catalog_server.start()
        settings = MySQLSettings(**leader.create_user(
            "bench_reader", "bench_pw", ["REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.*"]))
        storage = StorageSpec(f"file://{work}/batches")
        catalogs = Catalogs(catalog_server, work)
        # the merge job's session as the job holds it (``merge.session.LazySession``): started by
        # the first merge that needs Spark (a copy, a table netted by Spark), not before. A session
        # started up front would keep one of the two cores busy compiling for seconds, which the
        # job's merges of tables netted on the driver never pay
        spark = functools.lru_cache(maxsize=None)(spark_session)
        results = {}
        results.update(merge_vs_append(spark, catalogs, leader, settings, storage, args.rows, args.repeat))
        results.update(growth(spark, catalogs, leader, settings, storage, args.big, args.repeat))
        if spark.cache_info().currsize:
            spark().stop()
        results.update(tiny_run(catalogs, leader, settings, storage, work))
    finally:
        catalog_server.stop()
        leader.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
