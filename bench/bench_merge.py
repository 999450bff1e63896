#!/usr/bin/env python3
"""Benchmark the merge job against plain LOAD DATA, on real local servers.

    .venv/bin/python bench/bench_merge.py --rows 1000000     (--rows 50000 for a quick check)

1. starts a leader and a follower (scripts/local_services.py) in a temp dir;
2. writes a change batch of ``--rows`` change rows on the leader: 85% inserts (in 50k-row
   transactions), 10% updates of inserted rows, 5% deletes; captures it with extract_range;
3. merges it with the real ``spark-submit --master local[2]`` and reads the job's own timing from
   its log (the in-job merge of the table: read, net, stage, apply) beside the wall time;
4. loads the same net rows (the merged table's final rows) with ``LOAD DATA LOCAL INFILE`` into a
   fresh copy of the follower table, the fastest way in;
5. prints both rates and their ratio (target >= 0.6), then one JSON line, last. With --repeat N
   the merge and the baseline run N times (each merge into a fresh follower) and medians are reported.
   ``--store s3`` keeps the batch on a real S3 endpoint (moto's server, started here).

All servers it starts are stopped on exit, and its temp dir is removed (unless --keep).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "scripts"), str(REPO / "plugins")]

from bench_servers import leader_and_follower, s3_storage  # noqa: E402
from local_services import MariaDBServer  # noqa: E402
from mysql_cdc.capture.stream.extract import BatchTarget, RangeRequest, extract_range  # noqa: E402
from mysql_cdc.capture.filters import TableFilter  # noqa: E402
from mysql_cdc.capture.leader import Leader  # noqa: E402
from mysql_cdc.contracts import MANIFEST_NAME, Checkpoint, PositionRange  # noqa: E402
from mysql_cdc.server_state.checkpoint import ensure_state_tables, write_checkpoint  # noqa: E402
from mysql_cdc.spark_lines import DEFAULT_LINE  # noqa: E402
from mysql_cdc.packaging import (  # noqa: E402
    DRIVER_JAVA_OPTIONS, MERGE_JOB, build_py_files, driver_java_options, launcher_env)
from mysql_cdc.merge.netting import DRIVER_NET_ROWS_PROPERTY  # noqa: E402
from mysql_cdc.kinds.mysql import follower_spec as mysql_follower_spec  # noqa: E402
from mysql_cdc.job_secrets import SECRETS_ENV, JobSecrets  # noqa: E402
from mysql_cdc.merge.report import SUMMARY_ENV, JobOutcome  # noqa: E402
from mysql_cdc.mysql_server import MySQLSettings  # noqa: E402
from mysql_cdc.storage import StorageSpec  # noqa: E402

DB, TABLE, PIPELINE = "bench", "events", "bench"
CREATE_TABLE = (
    f"CREATE TABLE {DB}.{TABLE} (id BIGINT NOT NULL PRIMARY KEY, account INT NOT NULL, "
    "amount DECIMAL(12,2) NOT NULL, note VARCHAR(64), created DATETIME(6) NOT NULL)"
)
CHUNK = 50_000


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def leader_workload(leader: MariaDBServer, rows: int) -> dict[str, int]:
    """Exactly ``rows`` change rows: inserts, then updates and deletes of inserted rows."""
    inserts, updates = rows * 85 // 100, rows * 10 // 100
    deletes = rows - inserts - updates
    conn = leader.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE {DB}")
            cur.execute(CREATE_TABLE)
            cur.execute(f"USE {DB}")  # the sequence engine's seq_X_to_Y tables live in the current schema
            for low in range(1, inserts + 1, CHUNK):  # the sequence engine makes rows server-side
                high = min(low + CHUNK - 1, inserts)
                cur.execute(
                    f"INSERT INTO {DB}.{TABLE} SELECT seq, seq % 1000, seq * 1.25, CONCAT('note ', seq), "
                    f"TIMESTAMP('2024-01-01') + INTERVAL seq SECOND FROM seq_{low}_to_{high}"
                )
            cur.execute(f"UPDATE {DB}.{TABLE} SET amount = amount + 1, note = NULL WHERE id <= {updates}")
            cur.execute(f"DELETE FROM {DB}.{TABLE} WHERE id > {inserts - deletes}")
    finally:
        conn.close()
    return {"inserts": inserts, "updates": updates, "deletes": deletes}


def position(settings: MySQLSettings):
    with Leader(settings) as leader:
        return leader.current_position()


def run_spark_submit(manifest_uri: str, secrets: JobSecrets, work: Path, driver_memory: str,
                     java_options: str, conf: dict[str, str] | None = None) -> tuple[float, dict]:
    py_files = build_py_files(work)
    secrets_file = work / "secrets.json"
    secrets.write(str(secrets_file))
    # the merge task's environment: the launcher's archive, when the machine has one
    env = {**os.environ, **launcher_env(DEFAULT_LINE), SECRETS_ENV: str(secrets_file), "PYSPARK_PYTHON": sys.executable}
    cmd = [str(Path(sys.executable).parent / "spark-submit"), "--master", "local[2]", "--driver-memory",
           driver_memory, "--conf", "spark.ui.enabled=false", "--py-files", py_files]
    # the driver's Java options of a real merge (the product's defaults) unless others are given
    cmd += ["--driver-java-options", java_options or driver_java_options({}, DEFAULT_LINE)[DRIVER_JAVA_OPTIONS]]
    for key, value in (conf or {}).items():
        cmd += ["--conf", f"{key}={value}"]
    cmd += [str(MERGE_JOB), "--manifest-uri", manifest_uri]
    started = time.monotonic()
    result = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.monotonic() - started
    output = result.stdout + result.stderr  # spark-submit puts the Python driver's stderr on stdout
    if result.returncode != 0:
        raise SystemExit(f"spark-submit failed ({result.returncode}):\n{output[-5000:]}")
    match = re.search(r"merge summary (\{.*\})", output)
    if not match:
        raise SystemExit(f"no merge summary in the job's output:\n{output[-5000:]}")
    return wall, json.loads(match.group(1))


def run_without_spark(manifest_uri: str, secrets: JobSecrets, work: Path) -> tuple[float, dict]:
    """The merge job as the merge task runs it with ``merge: {spark: when_needed}`` for a batch that
    needs no Spark: this Python alone (``--without-spark``), mysql_cdc from the py-files zip. Returns
    the wall time and the batch's summary."""
    py_files = build_py_files(work)
    secrets_file, outcome_file = work / "secrets.json", work / "outcome.json"
    secrets.write(str(secrets_file))
    env = {**os.environ, SECRETS_ENV: str(secrets_file), SUMMARY_ENV: str(outcome_file), "PYTHONPATH": py_files}
    started = time.monotonic()
    result = subprocess.run([sys.executable, str(MERGE_JOB), "--without-spark", "--manifest-uri", manifest_uri],
                            env=env, capture_output=True, text=True)
    wall = time.monotonic() - started
    if result.returncode != 0:
        raise SystemExit(f"the merge job without Spark failed ({result.returncode}):\n{result.stderr[-5000:]}")
    (summary,) = JobOutcome.from_json(outcome_file.read_text()).summaries
    return wall, json.loads(summary.to_json())


def load_data_baseline(follower: MariaDBServer, work: Path, run: int) -> tuple[int, float]:
    """LOAD DATA LOCAL INFILE of the merged table's rows into a fresh copy of it."""
    dump = work / f"net_rows_{run}.tsv"  # INTO OUTFILE refuses to overwrite
    conn = follower.connect(local_infile=True)
    try:
        with conn.cursor() as cur:
            cur.execute("SET time_zone = '+00:00'")
            cur.execute(f"SELECT * FROM {DB}.{TABLE} ORDER BY id INTO OUTFILE '{dump}'")
            cur.execute(f"DROP TABLE IF EXISTS {DB}.{TABLE}_copy")
            cur.execute(f"CREATE TABLE {DB}.{TABLE}_copy LIKE {DB}.{TABLE}")
            started = time.monotonic()
            rows = cur.execute(f"LOAD DATA LOCAL INFILE '{dump}' INTO TABLE {DB}.{TABLE}_copy")
            seconds = time.monotonic() - started
    finally:
        conn.close()
    dump.unlink()
    return rows, seconds


def reset_follower(follower: MariaDBServer, start) -> None:
    """The follower as before the first merge: no bench database, checkpoint at the range start."""
    conn = follower.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {DB}")
        ensure_state_tables(conn)
        write_checkpoint(conn, Checkpoint(PIPELINE, start))
    finally:
        conn.close()


def measure(args, follower: MariaDBServer, secrets: JobSecrets, manifest_uri: str, start, work: Path, run: int) -> dict:
    """One merge of the batch into a fresh follower, then the LOAD DATA baseline of its rows."""
    reset_follower(follower, start)
    log(f"run {run + 1}/{args.repeat}: merging with spark-submit ...")
    conf = {} if args.driver_net_rows is None else {DRIVER_NET_ROWS_PROPERTY: str(args.driver_net_rows)}
    wall, summary = run_spark_submit(manifest_uri, secrets, work, args.driver_memory, args.driver_java_options, conf)
    (table,) = [t for t in summary["tables"] if t["table"] == f"{DB}.{TABLE}"]
    log(f"run {run + 1}/{args.repeat}: LOAD DATA baseline ...")
    loaded, load_seconds = load_data_baseline(follower, work, run)
    # into an empty follower every net row of the batch is an insert: the table holds them all
    assert loaded == table["inserted"] and not table["updated"] and not table["deleted"], (loaded, table)
    return {"wall": wall, "table": table, "run_merge_seconds": summary["seconds"], "load_seconds": load_seconds}


def median_run(runs: list[dict]) -> dict:
    return sorted(runs, key=lambda r: r["table"]["seconds"])[len(runs) // 2]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="change rows in the batch")
    parser.add_argument("--repeat", type=int, default=1, help="merges (each into a fresh follower); the median is reported")
    parser.add_argument("--driver-memory", default="1g")
    parser.add_argument("--driver-java-options", default="",
                        help="instead of a real merge's (packaging.DRIVER_DEFAULTS), e.g. -XX:TieredStopAtLevel=4")
    parser.add_argument("--driver-net-rows", type=int, default=None,
                        help="the job's spark.mysql_cdc.driverNetRows (default: the product's; 0: net in Spark)")
    parser.add_argument("--store", choices=("file", "s3"), default="file",
                        help="the batch store: the local file system, or moto's S3 server")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (datadirs, batch, logs)")
    args = parser.parse_args()

    with leader_and_follower("bench-merge-", args.keep) as servers, ExitStack() as stack:
        base, leader, follower = servers.base, servers.leader, servers.follower
        leader_settings, follower_settings = servers.leader_settings, servers.follower_settings
        work = base / "work"
        work.mkdir()

        start = position(leader_settings)
        log(f"writing {args.rows} change rows on the leader ...")
        workload = leader_workload(leader, args.rows)
        end = position(leader_settings)

        storage = stack.enter_context(s3_storage(base)) if args.store == "s3" else StorageSpec(f"file://{base}/store")
        log("capturing ...")
        started = time.monotonic()
        batch = extract_range(leader_settings, RangeRequest(PIPELINE, PositionRange(start, end), TableFilter((f"{DB}.*",))),
                              BatchTarget(storage.open()))
        capture_seconds = time.monotonic() - started
        assert batch.row_count == args.rows, (batch.row_count, args.rows)

        manifest_uri = f"{storage.uri}/{batch.prefix}/{MANIFEST_NAME}"
        runs = [measure(args, follower, JobSecrets(mysql_follower_spec(follower_settings), storage), manifest_uri, start,
                        work, i)
                for i in range(args.repeat)]
        run = median_run(runs)
        table, merge_seconds, load_seconds = run["table"], run["table"]["seconds"], sorted(
            r["load_seconds"] for r in runs)[len(runs) // 2]
        net_rows = table["inserted"]

        result = {
            "change_rows": args.rows,
            "store": args.store,
            "repeat": args.repeat,
            "driver_java_options": args.driver_java_options,
            "merge_driver_net_rows": args.driver_net_rows,
            "workload": workload,
            "net_rows": net_rows,
            "capture_seconds": round(capture_seconds, 2),
            "capture_rows_per_s": round(args.rows / capture_seconds),
            "merge_seconds": round(merge_seconds, 2),
            "merge_stage_seconds": round(table["stage_seconds"], 2),  # read, net, load into staging
            "merge_apply_seconds": round(table["apply_seconds"], 2),  # the follower transaction
            # the same rows LOAD DATA writes: the headline figure compares these
            "merge_rows_per_s": round(net_rows / merge_seconds),
            "merge_change_rows_per_s": round(args.rows / merge_seconds),
            "run_merge_seconds": run["run_merge_seconds"],
            "spark_submit_wall_seconds": round(run["wall"], 2),
            "load_data_seconds": round(load_seconds, 2),
            "load_data_rows_per_s": round(net_rows / load_seconds),
            "merge_seconds_all_runs": [round(r["table"]["seconds"], 2) for r in runs],
        }
        result["merge_vs_load_data"] = round(result["merge_rows_per_s"] / result["load_data_rows_per_s"], 3)
        print(f"capture:      {result['capture_rows_per_s']:>9,} change rows/s ({capture_seconds:.1f} s)")
        print(f"merge:        {result['merge_rows_per_s']:>9,} net rows/s, "
              f"{result['merge_change_rows_per_s']:,} change rows/s ({merge_seconds:.1f} s in the job: "
              f"read+net+stage {table['stage_seconds']:.1f} s, apply {table['apply_seconds']:.1f} s; "
              f"median of {args.repeat})")
        print(f"spark-submit: {run['wall']:.1f} s wall (JVM, Spark and Python start included)")
        print(f"LOAD DATA:    {result['load_data_rows_per_s']:>9,} rows/s ({load_seconds:.1f} s, {net_rows:,} rows)")
        print(f"ratio merge/LOAD DATA: {result['merge_vs_load_data']} (target >= 0.6)")
        print(json.dumps(result, sort_keys=True))
        return 0


if __name__ == "__main__":
    sys.exit(main())
