"""Scheduled-run latency: one tiny batch end to end, one run with nothing new, beside the fixed
cost of a bare spark-submit, all in one run on this machine.

    .venv/bin/python bench/bench_runs.py [--repeat 3]

Runs are real DAG runs (`airflow dags test mysql_cdc`, the demo's setup from scripts/demo.py).
A run's duration is taken from the metadata DB: first task start to last task end (sensor ->
merge done), which excludes the CLI's own start-up; the CLI wall time is printed beside it.
The last line printed is JSON.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "scripts"), str(ROOT / "plugins")]

import demo as demo_module  # noqa: E402

WORK = ROOT / ".local" / "bench-runs"


def run_duration(db_path: Path, dag_id: str) -> tuple[float, dict]:
    db = sqlite3.connect(db_path)
    try:
        (run_id,) = db.execute("SELECT run_id FROM dag_run WHERE dag_id = ? ORDER BY id DESC LIMIT 1", (dag_id,)).fetchone()
        rows = db.execute(
            "SELECT task_id, state, julianday(start_date), julianday(end_date) FROM task_instance "
            "WHERE dag_id = ? AND run_id = ?", (dag_id, run_id)).fetchall()
    finally:
        db.close()
    starts = [r[2] for r in rows if r[2] is not None]
    ends = [r[3] for r in rows if r[3] is not None]
    return (max(ends) - min(starts)) * 86400.0, {r[0]: r[1] for r in rows}


def bare_spark_submit(env: dict) -> float:
    started = time.monotonic()
    subprocess.run([str(demo_module.VENV_BIN / "spark-submit"), "--master", "local[2]", str(ROOT / "bench" / "noop_job.py")],
                   env=env, check=True, capture_output=True)
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    demo_module.WORK = WORK  # the demo's machinery, in a directory of its own
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    runner = demo_module.Demo("file")
    db_path = WORK / "airflow" / "airflow.db"
    figures = {"tiny": [], "nochange": [], "bare": [], "tiny_cli": [], "nochange_cli": []}
    try:
        runner.start_services()
        runner.configure_airflow()
        runner.run_on_leader(["CREATE DATABASE bench", "CREATE TABLE bench.t (id INT PRIMARY KEY, v VARCHAR(20))"])
        runner.dag_run("warm-up: the schema")
        for i in range(args.repeat):
            runner.run_on_leader([f"INSERT INTO bench.t VALUES ({i}, 'tiny')"])
            started = time.monotonic()
            runner.dag_run("a tiny batch")
            figures["tiny_cli"].append(time.monotonic() - started)
            seconds, states = run_duration(db_path, demo_module.DAG_ID)
            assert set(states.values()) == {"success"}, states
            figures["tiny"].append(seconds)

            started = time.monotonic()
            runner.dag_run("nothing new")
            figures["nochange_cli"].append(time.monotonic() - started)
            seconds, states = run_duration(db_path, demo_module.DAG_ID)
            assert states.get("wait_for_changes") == "skipped", states
            figures["nochange"].append(seconds)

            figures["bare"].append(bare_spark_submit(runner.env))
    finally:
        for service in reversed(runner.services):
            service.stop()

    med = {k: round(statistics.median(v), 1) for k, v in figures.items()}
    report = {
        "tiny_run_s": med["tiny"],
        "bare_spark_submit_s": med["bare"],
        "nochange_run_s": med["nochange"],
        "tiny_run_cli_s": med["tiny_cli"],
        "nochange_run_cli_s": med["nochange_cli"],
    }
    print(f"tiny batch run (sensor -> merge done): {med['tiny']} s  (CLI wall {med['tiny_cli']} s)")
    print(f"bare spark-submit:                     {med['bare']} s")
    print(f"run with nothing new:                  {med['nochange']} s  (CLI wall {med['nochange_cli']} s)")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
