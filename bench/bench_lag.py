#!/usr/bin/env python3
"""Benchmark how far behind the follower stays under a writing leader, the way it is deployed.

    .venv/bin/python bench/bench_lag.py                 (--minutes 2 for a quick check)

1. starts a MariaDB leader and follower, a moto S3 endpoint and Airflow as it is deployed
   (``scripts/airflow_deployment.py``: api-server, dag-processor, scheduler with LocalExecutor,
   triggerer), with one pipeline scheduled every minute on the pipelines file's defaults (a
   snapshot first), batches on S3, the merge by spark-submit ``local[2]``;
2. once the first run (the copy) has succeeded, a writer commits small transactions (an order
   inserted, another updated, an account upserted; a delete every fifth) as fast as the leader
   takes them, for ``--minutes``, while the scheduled runs go on;
3. every few seconds reads the pipeline's ``seconds_behind`` the way the check task and the CDC
   page do (``monitor.lag.pipeline_figures``) and keeps the largest;
4. stops the writer, waits for a run to apply the leader's last position and compares every
   table of the follower with the leader (``CHECKSUM TABLE``).

``lag_under_load`` = the largest ``seconds_behind`` seen (target <= 120 s: never more than two
schedule intervals). With ``--continuous`` the pipeline's schedule is ``@continuous`` (runs back to
back, the sensor deferred while the leader is idle) and the figure is ``lag_under_load_continuous``
(target <= 30 s). With ``--follower delta`` the follower is a Delta Lake on the same S3 endpoint
(its ``seconds_behind`` read from the lake's state with delta-rs, the lake compared with the leader
at its consistent cut, read with delta-rs): ``delta_lag_under_load`` (target <= 120 s) and
``delta_lag_under_load_continuous`` (target <= 60 s). Prints one JSON object as its last line. Everything started here is stopped on
exit.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "scripts"), str(REPO / "plugins")]

from bench_servers import deployed_pipeline, leader_and_follower  # noqa: E402
from leader_writer import LeaderWriter  # noqa: E402
from local_services import MariaDBServer  # noqa: E402
from mysql_cdc.capture.leader import Leader  # noqa: E402
from mysql_cdc.monitor.lag import pipeline_figures  # noqa: E402
from mysql_cdc.mysql_server import MySQLSettings  # noqa: E402
from mysql_cdc.kinds.delta.state.cut import read_cut_at  # noqa: E402

PIPELINE, DB = "lag_bench", "shop"
TABLES = ("orders", "accounts")
SAMPLE_SECONDS = 5
# figure -> its target (the largest seconds behind)
TARGETS = {"lag_under_load": 120, "lag_under_load_continuous": 30, "delta_lag_under_load": 120,
           "delta_lag_under_load_continuous": 60}


def log(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


def checksums(server: MariaDBServer) -> dict[str, int]:
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("CHECKSUM TABLE " + ", ".join(f"{DB}.{t}" for t in TABLES))
            return dict(cur.fetchall())
    finally:
        conn.close()


def rows(server: MariaDBServer) -> dict[str, list[tuple]]:
    """Every table's rows on the leader, sorted: what the lake's cut must hold."""
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            found = {}
            for table in TABLES:
                cur.execute(f"SELECT * FROM {DB}.{table}")
                found[table] = sorted(cur.fetchall(), key=repr)
            return found
    finally:
        conn.close()


def lake_rows(cut) -> dict[str, list[tuple]]:
    """Every table's rows at the lake's consistent cut, read with delta-rs, sorted."""
    return {table: sorted((tuple(r.values()) for r in cut.read(f"{DB}.{table}").to_pylist()), key=repr)
            for table in TABLES}


def leader_position(settings: MySQLSettings):
    with Leader(settings) as server:
        return server.current_position()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=5.0, help="how long the writer writes")
    parser.add_argument("--continuous", action="store_true", help="schedule @continuous instead of every minute")
    parser.add_argument("--follower", choices=("mysql", "delta"), default="mysql",
                        help="a MySQL follower, or a Delta Lake on the S3 endpoint")
    parser.add_argument("--merge-spark", choices=("always", "when_needed"), default="always",
                        help="the pipeline's merge.spark (when_needed: figures suffixed _without_spark)")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (datadirs, Airflow's logs)")
    args = parser.parse_args()
    schedule = "@continuous" if args.continuous else "* * * * *"
    figure = ("delta_" if args.follower == "delta" else "") + "lag_under_load" + (
        "_continuous" if args.continuous else "")
    limit = TARGETS[figure]
    if args.merge_spark == "when_needed":
        figure += "_without_spark"

    with leader_and_follower("bench-lag-", args.keep) as servers:
        leader, follower = servers.leader, servers.follower
        leader.run_sql([
            f"CREATE DATABASE {DB}", f"USE {DB}",
            "CREATE TABLE orders (id INT AUTO_INCREMENT PRIMARY KEY, customer INT NOT NULL, amount DECIMAL(14,4), "
            "note VARCHAR(20))",
            "CREATE TABLE accounts (id INT PRIMARY KEY, balance BIGINT NOT NULL)",
            "INSERT INTO orders (customer, amount, note) SELECT seq % 97, seq / 3, 'old' FROM seq_1_to_20000",
        ], database=None)
        with deployed_pipeline(servers, PIPELINE, schedule, args.follower, f"{DB}.*", args.merge_spark) as deployment:
            airflow, state = deployment.airflow, deployment.state
            leader_settings = servers.leader_settings
            log(f"the copy is applied; writing for {args.minutes} minutes ...")
            writer = LeaderWriter(leader, DB, keys=20_000, accounts=500, seed=11).start()
            samples: list[float] = []
            started = time.monotonic()
            try:
                while time.monotonic() - started < args.minutes * 60:
                    time.sleep(SAMPLE_SECONDS)
                    behind = pipeline_figures(PIPELINE, leader_settings, state).seconds_behind
                    samples.append(behind if behind is not None else float("nan"))
                    log(f"seconds behind: {behind} ({writer.commits} commits so far)")
            finally:
                writer.stop()
            wrote = time.monotonic() - started
            target = leader_position(leader_settings)
            log(f"writer stopped after {writer.commits} commits; waiting for a run to apply {target} ...")
            airflow.wait(lambda: (cp := state.checkpoint(PIPELINE)) is not None and cp.position >= target, 600,
                         f"the checkpoint to reach the leader's {target}", every=5)
            if deployment.lake is not None:
                expected, got = rows(leader), lake_rows(read_cut_at(deployment.lake, PIPELINE))
                differ = [t for t in TABLES if expected[t] != got[t]]
                if differ:
                    raise SystemExit(f"the lake differs from the leader after catching up: tables {differ}")
            else:
                expected, got = checksums(leader), checksums(follower)
                if expected != got:
                    raise SystemExit(f"the follower differs from the leader after catching up: {expected} vs {got}")
            runs = airflow.dag_runs(PIPELINE)
            known = [s for s in samples if s == s]  # NaN: nothing applied yet with a known commit time
            prefix = figure.replace("_under_load", "")  # lag_..., delta_lag_continuous_...
            result = {
                figure: round(max(known), 1) if known else None,
                f"{prefix}_samples": len(samples),
                f"{prefix}_unknown_samples": len(samples) - len(known),
                f"{prefix}_writer_commits": writer.commits,
                f"{prefix}_writer_commits_per_s": round(writer.commits / wrote),
                f"{prefix}_runs": len(runs),
                f"{prefix}_failed_runs": sum(1 for r in runs if r["state"] == "failed"),
                f"{prefix}_minutes": args.minutes,
            }
            print(f"largest seconds behind ({schedule}): {result[figure]} s over {len(samples)} samples "
                  f"(target <= {limit} s); {writer.commits} commits ({result[f'{prefix}_writer_commits_per_s']}/s), "
                  f"{len(runs)} runs, {result[f'{prefix}_failed_runs']} failed; the follower equals the leader")
            print(json.dumps(result, sort_keys=True))
            return 0


if __name__ == "__main__":
    sys.exit(main())
