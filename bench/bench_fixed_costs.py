#!/usr/bin/env python3
"""Benchmark where the time of a one-row change goes, from the leader's commit to the follower,
the way it is deployed.

    .venv/bin/python bench/bench_fixed_costs.py [--repeat 5] [--follower delta]

1. starts a MariaDB leader and follower, a moto S3 endpoint (the batches; with ``--follower
   delta`` the lake too) and Airflow as it is deployed (``scripts/airflow_deployment.py``), with one
   continuous pipeline (``schedule: "@continuous"``: a run always waiting for the leader, its
   sensor deferred in the triggerer, polling every second);
2. once the first run (the copy) has succeeded and the next one waits, ``--repeat`` times: commits
   one row on the leader and reads the follower's checkpoint every 0.1 s until it holds the row;
   then reads the run's task instances from Airflow's API and its merge task's log;
3. splits each change's seconds into phases, by the task instances' start and end times:
   ``detect`` (the commit to the sensor's end: its next poll, the trigger's event, the task resumed
   on a worker), ``to_extract`` (the sensor's end to the extract task's start: the scheduler and a
   task process starting), ``extract`` (the extract task), ``to_merge``, ``merge`` (the merge task:
   spark-submit, the driver's JVM, the job's own work) and ``merge_work`` (the job's own seconds,
   from its summary line), and ``applied`` (the commit to the checkpoint holding it).

Prints the medians as one JSON object on its last line (``fixed_cost_*`` figures; ``delta_``
prefixed for a lake). ``docs/performance.md``, "The fixed costs of a run", says what they decided.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "scripts"), str(REPO / "plugins")]

from airflow_deployment import AirflowDeployment  # noqa: E402
from bench_servers import deployed_pipeline, leader_and_follower  # noqa: E402
from mysql_cdc.capture.leader import Leader  # noqa: E402

PIPELINE, DB = "fixed_costs", "shop"
PHASES = ("detect", "to_extract", "extract", "to_merge", "merge", "merge_work", "applied")


def log(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


def _epoch(stamp: str) -> float:
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def waiting_run(airflow: AirflowDeployment, timeout: float = 300) -> dict:
    """The run whose sensor waits deferred in the triggerer."""
    def find():
        for run in airflow.dag_runs(PIPELINE):
            if run["state"] == "running":
                sensor = airflow.task_instances(PIPELINE, run["dag_run_id"]).get("wait_for_changes")
                if sensor and sensor["state"] == "deferred":
                    return run
        return None
    return airflow.wait(find, timeout, "a run's sensor deferred", every=0.5)


def merge_seconds(home: Path, run_id: str) -> float:
    """The merge job's own seconds (its ``merge summary`` line) in the run's merge task log."""
    for path in (home / "logs").rglob("*.log"):
        if f"run_id={run_id}" in str(path) and "task_id=merge_batch" in str(path):
            seconds = []
            for line in path.read_text(errors="replace").splitlines():
                try:  # Airflow's task log: a JSON object per line, the message in "event"
                    text = json.loads(line).get("event", "")
                except ValueError:
                    text = line
                if "merge summary {" in text:
                    seconds.append(json.loads(text.split("merge summary ", 1)[1])["seconds"])
            if seconds:
                return sum(seconds)
    raise LookupError(f"no merge summary in the merge task log of run {run_id}")


def one_change(airflow: AirflowDeployment, servers, state, key: int) -> dict[str, float]:
    run = waiting_run(airflow)
    servers.leader.run_sql([f"INSERT INTO {DB}.t VALUES ({key}, 'one row')"], database=None)
    committed = time.time()  # (the statement's return: its commit a few ms before)
    with Leader(servers.leader_settings) as server:
        target = server.current_position()
    while (cp := state.checkpoint(PIPELINE)) is None or cp.position < target:
        time.sleep(0.1)
    applied = time.time()
    run_id = run["dag_run_id"]
    tis = airflow.wait(lambda: (t := airflow.task_instances(PIPELINE, run_id))["merge_batch"].get("end_date") and t,
                       60, "the merge task's end", every=0.5)
    sensor, extract, merge = tis["wait_for_changes"], tis["extract_batch"], tis["merge_batch"]
    return {
        "detect": _epoch(sensor["end_date"]) - committed,
        "to_extract": _epoch(extract["start_date"]) - _epoch(sensor["end_date"]),
        "extract": _epoch(extract["end_date"]) - _epoch(extract["start_date"]),
        "to_merge": _epoch(merge["start_date"]) - _epoch(extract["end_date"]),
        "merge": _epoch(merge["end_date"]) - _epoch(merge["start_date"]),
        "merge_work": merge_seconds(airflow.home, run_id),
        "applied": applied - committed,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--follower", choices=("mysql", "delta"), default="mysql")
    parser.add_argument("--merge-spark", choices=("always", "when_needed"), default="always",
                        help="the pipeline's merge.spark (when_needed: a batch that needs no Spark merged without "
                             "spark-submit; figures then prefixed fixed_cost_without_spark)")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (datadirs, Airflow's logs)")
    args = parser.parse_args()
    prefix = ("delta_fixed_cost" if args.follower == "delta" else "fixed_cost") + (
        "_without_spark" if args.merge_spark == "when_needed" else "")

    with leader_and_follower("bench-fixed-costs-", args.keep) as servers:
        servers.leader.run_sql([f"CREATE DATABASE {DB}", f"CREATE TABLE {DB}.t (id INT PRIMARY KEY, v VARCHAR(20))"],
                               database=None)
        with deployed_pipeline(servers, PIPELINE, "@continuous", args.follower, f"{DB}.*",
                               args.merge_spark) as deployment:
            changes = []
            for key in range(args.repeat):
                phases = one_change(deployment.airflow, servers, deployment.state, key)
                log("one row: " + ", ".join(f"{k} {v:.1f} s" for k, v in phases.items()))
                changes.append(phases)

    result = {f"{prefix}_{phase}_s": round(statistics.median(c[phase] for c in changes), 1) for phase in PHASES}
    result[f"{prefix}_changes"] = len(changes)
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
