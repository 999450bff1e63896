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
schedule intervals). Prints one JSON object as its last line. Everything started here is stopped
on exit.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "scripts"), str(REPO / "plugins")]

import yaml  # noqa: E402

from airflow_deployment import AirflowDeployment  # noqa: E402
from bench_servers import leader_and_follower  # noqa: E402
from leader_writer import LeaderWriter  # noqa: E402
from local_services import MariaDBServer, MotoS3Server  # noqa: E402
from mysql_cdc.capture.leader import Leader  # noqa: E402
from mysql_cdc.monitor.lag import pipeline_figures  # noqa: E402
from mysql_cdc.mysql_server import MySQLSettings  # noqa: E402
from mysql_cdc.kinds.mysql.state import MySQLStateStore  # noqa: E402

PIPELINE, DB, BUCKET = "lag_bench", "shop", "lag-bench"
TABLES = ("orders", "accounts")
SAMPLE_SECONDS = 5


def log(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


def connection(conn_type: str, **fields) -> str:
    return json.dumps({"conn_type": conn_type, **fields})


def checksums(server: MariaDBServer) -> dict[str, int]:
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("CHECKSUM TABLE " + ", ".join(f"{DB}.{t}" for t in TABLES))
            return dict(cur.fetchall())
    finally:
        conn.close()


def leader_position(settings: MySQLSettings):
    with Leader(settings) as server:
        return server.current_position()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=5.0, help="how long the writer writes")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (datadirs, Airflow's logs)")
    args = parser.parse_args()

    with leader_and_follower("bench-lag-", args.keep) as servers:
        base, leader, follower = servers.base, servers.leader, servers.follower
        leader_user, follower_user = servers.leader_user, servers.follower_user
        s3 = MotoS3Server(base, die_with_parent=True)
        airflow = None
        try:
            s3.start()
            import boto3

            boto3.client("s3", **s3.client_kwargs()).create_bucket(Bucket=BUCKET)
            leader.run_sql([
                f"CREATE DATABASE {DB}", f"USE {DB}",
                "CREATE TABLE orders (id INT AUTO_INCREMENT PRIMARY KEY, customer INT NOT NULL, amount DECIMAL(14,4), "
                "note VARCHAR(20))",
                "CREATE TABLE accounts (id INT PRIMARY KEY, balance BIGINT NOT NULL)",
                "INSERT INTO orders (customer, amount, note) SELECT seq % 97, seq / 3, 'old' FROM seq_1_to_20000",
            ], database=None)
            home = base / "airflow"
            home.mkdir()
            pipelines = home / "pipelines.yaml"
            pipelines.write_text(yaml.safe_dump({"pipelines": [{
                "name": PIPELINE, "schedule": "* * * * *",
                "leader_conn_id": "bench_leader", "follower_conn_id": "bench_follower",
                "storage_uri": f"s3://{BUCKET}/batches", "aws_conn_id": "bench_s3", "spark_conn_id": "bench_spark",
                "include": [f"{DB}.*"],
            }]}))
            airflow = AirflowDeployment(home, env={
                "CDC_PIPELINES_FILE": str(pipelines),
                "AIRFLOW_CONN_BENCH_LEADER": connection("mysql", host=leader_user["host"], port=leader_user["port"],
                                                        login=leader_user["user"], password=leader_user["password"]),
                "AIRFLOW_CONN_BENCH_FOLLOWER": connection("mysql", host=follower_user["host"], port=follower_user["port"],
                                                          login=follower_user["user"], password=follower_user["password"]),
                "AIRFLOW_CONN_BENCH_S3": connection("aws", login=s3.aws_access_key_id, password=s3.aws_secret_access_key,
                                                    extra={"endpoint_url": s3.endpoint_url, "region_name": s3.region_name}),
                "AIRFLOW_CONN_BENCH_SPARK": connection("spark", host="local[2]"),
            })
            log("starting Airflow as deployed ...")
            airflow.start()
            airflow.wait(lambda: any(r["state"] == "success" for r in airflow.dag_runs(PIPELINE)), 420,
                         "the first scheduled run (the copy) to succeed", every=5)
            leader_settings, state = MySQLSettings(**leader_user), MySQLStateStore(MySQLSettings(**follower_user))
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
            expected, got = checksums(leader), checksums(follower)
            if expected != got:
                raise SystemExit(f"the follower differs from the leader after catching up: {expected} vs {got}")
            runs = airflow.dag_runs(PIPELINE)
            known = [s for s in samples if s == s]  # NaN: nothing applied yet with a known commit time
            result = {
                "lag_under_load": round(max(known), 1) if known else None,
                "lag_samples": len(samples),
                "lag_unknown_samples": len(samples) - len(known),
                "lag_writer_commits": writer.commits,
                "lag_writer_commits_per_s": round(writer.commits / wrote),
                "lag_runs": len(runs),
                "lag_failed_runs": sum(1 for r in runs if r["state"] == "failed"),
                "lag_minutes": args.minutes,
            }
            print(f"largest seconds behind: {result['lag_under_load']} s over {len(samples)} samples "
                  f"(target <= 120 s); {writer.commits} commits ({result['lag_writer_commits_per_s']}/s), "
                  f"{len(runs)} runs, {result['lag_failed_runs']} failed; the follower equals the leader")
            print(json.dumps(result, sort_keys=True))
            return 0
        finally:
            if airflow is not None:
                airflow.stop()
            s3.stop()


if __name__ == "__main__":
    sys.exit(main())
