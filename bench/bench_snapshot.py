#!/usr/bin/env python3
"""Benchmark the snapshot (copy of an existing table, leader -> follower) against a dump pipeline.

    .venv/bin/python bench/bench_snapshot.py --rows 5000000 --repeat 3 --rss     (--rows 100000 for a quick check)

1. starts a leader and a follower (scripts/local_services.py) in a temp dir and fills one table of
   the merge benchmark's shape with ``--rows`` rows on the leader (server-side, sequence engine);
2. ours, end to end: ``snapshot_tables`` (the extract task's copy into a Parquet snapshot batch,
   in chunks by the default number of worker processes) then the merge job with the real
   ``spark-submit --master local[2]`` into an empty follower; the copy also once with one worker,
   for the parallel speedup;
3. the reference a user would run instead, in the same run: ``mariadb-dump --single-transaction
   db table | mariadb`` into an empty follower database;
4. with ``--rss``: the copy's peak RSS at 1M and at ``--rows`` rows, each in a fresh child process
   (its own peak plus, per worker, the largest worker's);
5. prints the rates and their ratio (target >= 1.0), then one JSON line, last. With ``--repeat``,
   steps 2 and 3 run that many times, alternating, each into a fresh follower database, and the
   medians are reported.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "scripts"), str(REPO / "plugins"), str(REPO / "bench")]

from bench_merge import CREATE_TABLE, DB, TABLE, run_spark_submit  # noqa: E402
from local_services import MariaDBServer  # noqa: E402
from mysql_cdc.capture.filters import TableFilter  # noqa: E402
from mysql_cdc.capture.snapshot.copy import snapshot_tables  # noqa: E402
from mysql_cdc.contracts import MANIFEST_NAME  # noqa: E402
from mysql_cdc.server_state.checkpoint import start_snapshot  # noqa: E402
from mysql_cdc.kinds.mysql import follower_spec as mysql_follower_spec  # noqa: E402
from mysql_cdc.job_secrets import JobSecrets  # noqa: E402
from mysql_cdc.mysql_server import MySQLSettings  # noqa: E402
from mysql_cdc.pipeline_options import SnapshotOptions  # noqa: E402
from mysql_cdc.storage import StorageSpec  # noqa: E402

PIPELINE = "snapbench"
CHUNK = 100_000


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def fill(leader: MariaDBServer, rows: int, database: str = DB) -> None:
    conn = leader.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE {database}")
            cur.execute(CREATE_TABLE.replace(f"{DB}.{TABLE}", f"{database}.{TABLE}"))
            cur.execute(f"USE {database}")
            for low in range(1, rows + 1, CHUNK):
                high = min(low + CHUNK - 1, rows)
                cur.execute(
                    f"INSERT INTO {database}.{TABLE} SELECT seq, seq % 1000, seq * 1.25, CONCAT('note ', seq), "
                    f"TIMESTAMP('2024-01-01') + INTERVAL seq SECOND FROM seq_{low}_to_{high}"
                )
    finally:
        conn.close()


def copy(leader_settings: MySQLSettings, storage: StorageSpec, database: str, workers: int):
    started = time.monotonic()
    batch = snapshot_tables(leader_settings, storage, f"{PIPELINE}_{workers}", TableFilter((f"{database}.*",)),
                            options=SnapshotOptions(workers=workers))
    return batch, time.monotonic() - started


def ours(leader_settings: MySQLSettings, follower: MariaDBServer, work: Path, database: str, run: int) -> dict:
    follower.run_sql([f"DROP DATABASE IF EXISTS {database}", "DROP DATABASE IF EXISTS _mysql_cdc"])
    storage = StorageSpec(f"file://{work}/store-{run}")
    _, one_worker = copy(leader_settings, storage, database, 1)
    batch, copied = copy(leader_settings, storage, database, SnapshotOptions().workers)
    conn = follower.connect()
    try:
        start_snapshot(conn, batch)
    finally:
        conn.close()
    secrets = JobSecrets(mysql_follower_spec(MySQLSettings(**follower.conn_params())), storage)
    manifest = f"{storage.uri}/{batch.prefix}/{MANIFEST_NAME}"
    merge_wall, summary = run_spark_submit(manifest, secrets, work, "2g", "")
    log(f"  merge summary: {summary}")
    return {"rows": batch.row_count, "copy_s": round(copied, 2), "copy_1_worker_s": round(one_worker, 2),
            "merge_s": round(merge_wall, 2), "total_s": round(copied + merge_wall, 2)}


def dump_pipeline(leader: MariaDBServer, follower: MariaDBServer, database: str) -> float:
    follower.run_sql([f"DROP DATABASE IF EXISTS dump_{database}", f"CREATE DATABASE dump_{database}"])
    lp, fp = leader.conn_params(), follower.conn_params()
    dump = [shutil.which("mariadb-dump") or "mysqldump", "-h", lp["host"], "-P", str(lp["port"]), "-u", lp["user"],
            f"-p{lp['password']}", "--single-transaction", database, TABLE]
    load = [shutil.which("mariadb") or "mysql", "-h", fp["host"], "-P", str(fp["port"]), "-u", fp["user"],
            f"-p{fp['password']}", f"dump_{database}"]
    started = time.monotonic()
    producer = subprocess.Popen(dump, stdout=subprocess.PIPE)
    consumer = subprocess.run(load, stdin=producer.stdout, capture_output=True)
    producer.stdout.close()
    if producer.wait() != 0 or consumer.returncode != 0:
        raise SystemExit(f"the dump pipeline failed: {consumer.stderr.decode()[-2000:]}")
    return time.monotonic() - started


RSS_CHILD = """
import json, resource, sys
sys.path[:0] = sys.argv[1].split(':')
from mysql_cdc.capture.filters import TableFilter
from mysql_cdc.capture.snapshot.copy import snapshot_tables
from mysql_cdc.mysql_server import MySQLSettings
from mysql_cdc.pipeline_options import SnapshotOptions
from mysql_cdc.storage import StorageSpec
options = SnapshotOptions()
batch = snapshot_tables(MySQLSettings(**json.loads(sys.argv[2])), StorageSpec(sys.argv[3]), 'rss',
                        TableFilter((sys.argv[4] + '.*',)), options=options)
# the copy's processes: this one, and its workers (the largest of them, counted once per worker)
parent = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
worker = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(json.dumps({'rows': batch.row_count, 'rss_mb': parent + options.workers * worker}))
"""


def copy_rss(leader: MariaDBServer, work: Path, database: str) -> dict:
    path = os.pathsep.join([str(REPO / "plugins")])
    out = subprocess.run([sys.executable, "-c", RSS_CHILD, path, json.dumps(leader.conn_params()),
                          f"file://{work}/rss-{database}", database], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--rss", action="store_true", help="also the copy's peak RSS at 1M and --rows rows")
    parser.add_argument("--repeat", type=int, default=1, help="runs of ours and of the dump; medians are reported")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mysql-cdc-bench-snapshot-"))
    servers = []
    try:
        leader = MariaDBServer(work, "leader", server_id=1, binlog=True, die_with_parent=True).start()
        servers.append(leader)
        follower = MariaDBServer(work, "follower", server_id=2, binlog=False, die_with_parent=True).start()
        servers.append(follower)
        log(f"filling {args.rows:,} rows on the leader ...")
        fill(leader, args.rows)
        runs, dumps = [], []
        for run in range(args.repeat):
            log(f"ours: snapshot + merge (run {run + 1}) ...")
            runs.append(ours(MySQLSettings(**leader.conn_params()), follower, work, DB, run))
            log(f"  {runs[-1]}")
            log("reference: mariadb-dump --single-transaction | mariadb ...")
            dumps.append(dump_pipeline(leader, follower, DB))
            log(f"  {dumps[-1]:.2f} s")
        result = {key: round(statistics.median(r[key] for r in runs), 2) for key in runs[0]}
        result["rows"] = int(result["rows"])
        dump_s = statistics.median(dumps)
        figures = {
            "snapshot_rows": result["rows"],
            "snapshot_copy_s": result["copy_s"],
            "snapshot_copy_1_worker_s": result["copy_1_worker_s"],
            "snapshot_copy_parallel_speedup": round(result["copy_1_worker_s"] / result["copy_s"], 2),
            "snapshot_merge_s": result["merge_s"],
            "snapshot_rows_per_s": round(result["rows"] / result["total_s"]),
            "dump_rows_per_s": round(args.rows / dump_s),
            "snapshot_vs_dump": round((result["rows"] / result["total_s"]) / (args.rows / dump_s), 3),
            "snapshot_vs_dump_all_runs": [round(d / r["total_s"], 3) for r, d in zip(runs, dumps)],
        }
        if args.rss:
            small = min(1_000_000, args.rows)
            fill(leader, small, "rss_small")
            figures["snapshot_rss_mb_1m"] = round(copy_rss(leader, work, "rss_small")["rss_mb"], 1)
            figures[f"snapshot_rss_mb_{args.rows // 1_000_000}m"] = round(copy_rss(leader, work, DB)["rss_mb"], 1)
        print(f"snapshot end to end: {figures['snapshot_rows_per_s']:,} rows/s "
              f"(copy {result['copy_s']} s + merge {result['merge_s']} s); "
              f"mariadb-dump | mariadb: {figures['dump_rows_per_s']:,} rows/s; ratio {figures['snapshot_vs_dump']}")
        print(json.dumps(figures))
        return 0
    finally:
        for server in reversed(servers):
            server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
