#!/usr/bin/env python3
"""The anchor a user would pick instead of us: a replica applying a binlog range, in one run.

    .venv/bin/python bench/bench_replica.py [--rows 1000000]

1. starts a leader, a replica and a follower (scripts/local_services.py) in a temp dir, and writes
   ``--rows`` changed rows on the leader (bench_extract's mix: inserts, updates, deletes, a binlog
   file per 50k inserts), remembering the range [start, end);
2. the replica: ``CHANGE MASTER TO`` the range's start, ``START SLAVE UNTIL`` its end, timed until
   ``MASTER_POS_WAIT`` says the replica applied all of it (fetching included);
3. ours, end to end: ``extract_range`` of the same range (the extract task's reading, in parts at
   once) and the merge job with the real ``spark-submit --master local[2]`` into the follower;
4. prints both and ``e2e_vs_replica`` (ours / replica seconds: target <= 2.5), JSON last. With
   ``--repeat``, steps 2 and 3 run that many times, alternating, the replica and the follower
   emptied before each, and the medians are reported. ``--merge-spark when_needed`` runs the merge
   as a pipeline with ``merge: {spark: when_needed}`` does for a batch that needs no Spark (the
   worker's Python, no spark-submit): figures ``e2e_without_spark_*``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "scripts"), str(ROOT / "plugins"), str(ROOT / "bench")]

from bench_extract import generate  # noqa: E402
from bench_merge import run_spark_submit, run_without_spark  # noqa: E402
from local_services import MariaDBServer  # noqa: E402
from mysql_cdc.capture.stream.extract import BatchTarget, RangeRequest, extract_range  # noqa: E402
from mysql_cdc.capture.leader import Leader  # noqa: E402
from mysql_cdc.contracts import MANIFEST_NAME, Checkpoint, PositionRange  # noqa: E402
from mysql_cdc.server_state.checkpoint import ensure_state_tables, write_checkpoint  # noqa: E402
from mysql_cdc.kinds.mysql import follower_spec as mysql_follower_spec  # noqa: E402
from mysql_cdc.pipeline_options import ExtractOptions  # noqa: E402
from mysql_cdc.job_secrets import JobSecrets  # noqa: E402
from mysql_cdc.mysql_server import MySQLSettings  # noqa: E402
from mysql_cdc.merge.netting import DRIVER_NET_ROWS  # noqa: E402
from mysql_cdc.storage import StorageSpec  # noqa: E402

PIPELINE = "bench_replica"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def replica_seconds(replica: MariaDBServer, leader: MariaDBServer, range_: PositionRange) -> float:
    """How long the replica takes to fetch and apply the range, from its start to its end."""
    replica.run_sql([
        f"CHANGE MASTER TO MASTER_HOST='{leader.host}', MASTER_PORT={leader.port}, "
        f"MASTER_USER='{leader.root_user}', MASTER_PASSWORD='{leader.root_password}', "
        f"MASTER_LOG_FILE='{range_.start.file}', MASTER_LOG_POS={range_.start.offset}, MASTER_USE_GTID=no",
    ])
    started = time.monotonic()
    replica.run_sql([f"START SLAVE UNTIL MASTER_LOG_FILE='{range_.end.file}', MASTER_LOG_POS={range_.end.offset}"])
    waited = replica.scalar(f"SELECT MASTER_POS_WAIT('{range_.end.file}', {range_.end.offset}, 3600)")
    seconds = time.monotonic() - started
    if waited is None or waited < 0:
        raise SystemExit(f"the replica did not reach {range_.end}: MASTER_POS_WAIT returned {waited}")
    return seconds


def ours_seconds(leader_settings: MySQLSettings, follower: MariaDBServer, range_: PositionRange, work: Path,
                 merge_spark: str) -> dict:
    work.mkdir(parents=True, exist_ok=True)
    storage = StorageSpec(f"file://{work}/store")
    conn = follower.connect()
    try:
        ensure_state_tables(conn)
        write_checkpoint(conn, Checkpoint(PIPELINE, range_.start))
    finally:
        conn.close()
    started = time.monotonic()
    batch = extract_range(leader_settings, RangeRequest(PIPELINE, range_), BatchTarget(storage.open(), storage),
                          ExtractOptions())
    extract_s = time.monotonic() - started
    manifest = f"{storage.uri}/{batch.prefix}/{MANIFEST_NAME}"
    secrets = JobSecrets(mysql_follower_spec(MySQLSettings(**follower.conn_params())), storage)
    if merge_spark == "when_needed":  # as the merge task runs it: the batch needs no Spark (checked)
        reason = secrets.sink.spark_needed(batch, DRIVER_NET_ROWS)
        if reason is not None:
            raise SystemExit(f"--merge-spark when_needed, but the batch needs Spark: {reason}")
        merge_s, summary = run_without_spark(manifest, secrets, work)
    else:
        merge_s, summary = run_spark_submit(manifest, secrets, work, "2g", "")
    log(f"  the job's own {summary['seconds']} s: " + "; ".join(
        f"{t['table']} stage {t['stage_seconds']:.2f} s, apply {t['apply_seconds']:.2f} s" for t in summary["tables"]))
    return {"rows": batch.row_count, "extract_s": round(extract_s, 2), "merge_s": round(merge_s, 2)}


def same_table(a: MariaDBServer, b: MariaDBServer) -> bool:
    def figures(server: MariaDBServer) -> tuple:
        return (server.scalar("SELECT COUNT(*) FROM bench.orders"),
                server.one_row("CHECKSUM TABLE bench.orders EXTENDED")[1])

    return figures(a) == figures(b)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--merge-spark", choices=("always", "when_needed"), default="always",
                        help="the pipeline's merge.spark: when_needed merges without spark-submit (the batch "
                             "needs no Spark); figures then prefixed e2e_without_spark")
    parser.add_argument("--repeat", type=int, default=1, help="runs of the replica and of ours; medians reported")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        leader = MariaDBServer(work, "leader", 1, True, die_with_parent=True)
        replica = MariaDBServer(work, "replica", 3, False, die_with_parent=True)
        follower = MariaDBServer(work, "follower", 2, False, die_with_parent=True)
        try:
            for server in (leader, replica, follower):
                server.start()
            settings = MySQLSettings(leader.host, leader.port, leader.root_user, leader.root_password)
            with Leader(settings) as server:
                start = server.current_position()
            log(f"writing {args.rows:,} changed rows on the leader ...")
            generate(leader, args.rows)
            with Leader(settings) as server:
                range_ = PositionRange(start, server.current_position())
            replicas, runs = [], []
            for run in range(args.repeat):
                if run:  # each run applies the whole range again, into an empty replica and follower
                    replica.run_sql(["STOP SLAVE", "RESET SLAVE ALL", "DROP DATABASE IF EXISTS bench"])
                    follower.run_sql(["DROP DATABASE IF EXISTS bench", "DROP DATABASE IF EXISTS _mysql_cdc"])
                log(f"the replica applies the range (run {run + 1}) ...")
                replicas.append(replica_seconds(replica, leader, range_))
                log("ours: extract + merge of the range ...")
                runs.append(ours_seconds(settings, follower, range_, work / f"run-{run}", args.merge_spark))
                if not (same_table(leader, replica) and same_table(leader, follower)):
                    raise SystemExit("the replica or the follower does not equal the leader: the figures mean nothing")
            replica_s = statistics.median(replicas)
            ours = {key: round(statistics.median(r[key] for r in runs), 2) for key in runs[0]}
        finally:
            for server in (follower, replica, leader):
                server.stop()
    ours_s = statistics.median(r["extract_s"] + r["merge_s"] for r in runs)
    e2e = "e2e_without_spark" if args.merge_spark == "when_needed" else "e2e"
    figures = {
        # each variant's replica seconds under its own key: both variants run in one make bench, and the
        # ratio of each is against the replica runs beside it
        "replica_rows": ours["rows"], f"{e2e}_replica_apply_s": round(replica_s, 2),
        f"{e2e}_extract_s": ours["extract_s"],
        f"{e2e}_merge_s": ours["merge_s"], f"{e2e}_s": round(ours_s, 2), f"{e2e}_vs_replica": round(ours_s / replica_s, 3),
    }
    print(f"replica (START SLAVE UNTIL): {replica_s:.1f} s; ours (extract {ours['extract_s']} s + merge "
          f"{ours['merge_s']} s): {ours_s:.1f} s; ours / replica = {figures[f'{e2e}_vs_replica']} "
          f"({int(ours['rows']):,} rows; runs {[round((r['extract_s'] + r['merge_s']) / s, 3) for r, s in zip(runs, replicas)]})")
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
