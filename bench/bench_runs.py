"""Scheduled-run latency: one tiny batch end to end, one run with nothing new, beside the fixed
cost of a bare spark-submit, all in one run on this machine.

    .venv/bin/python bench/bench_runs.py [--repeat 3]

Runs are real DAG runs of the demo's pipeline (scripts/demo.py sets up the servers and Airflow),
made with ``dag.test()`` inside this one process, like the Airflow tests do. A deployed Airflow's
scheduler, executor and API server are long-lived; ``airflow dags test`` instead starts them in a
fresh process, which costs ~8-10 s before its first task does anything. So the first run here
(the schema) warms the process up and is not counted, and a run's time is the wall time of its
``dag.test()`` call: sensor start to merge done, Airflow's own task overheads included. The
tasks' own durations (from their task instances) are printed beside it. The last line printed is
JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "scripts"), str(ROOT / "plugins")]

import demo as demo_module  # noqa: E402

WORK = ROOT / ".local" / "bench-runs"


@contextlib.contextmanager
def output_to(path: Path):
    """Send this process's stdout/stderr (the task logs dag.test() prints) to ``path``."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(path, "ab") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def dag_run(dag, log: Path) -> tuple[float, dict[str, str], dict[str, float]]:
    """One real DAG run: (wall seconds, task states, task seconds)."""
    started = time.monotonic()
    with output_to(log):
        run = dag.test()
    seconds = time.monotonic() - started
    tis = run.get_task_instances()
    states = {ti.task_id: str(ti.state) for ti in tis}
    durations = {ti.task_id: round((ti.end_date - ti.start_date).total_seconds(), 1)
                 for ti in tis if ti.start_date and ti.end_date}
    return seconds, states, durations


def bare_spark_submit(env: dict) -> float:
    started = time.monotonic()
    subprocess.run([str(demo_module.VENV_BIN / "spark-submit"), "--master", "local[2]", str(ROOT / "bench" / "noop_job.py")],
                   env=env, check=True, capture_output=True)
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--merge-spark", choices=("always", "when_needed"), default="always",
                        help="the demo pipeline's merge.spark (CDC_MERGE_SPARK); when_needed: figures "
                             "tiny_run_without_spark_s, nochange_run_without_spark_s")
    args = parser.parse_args()
    os.environ["CDC_MERGE_SPARK"] = args.merge_spark  # dags/pipelines.yaml reads it
    suffix = "_without_spark" if args.merge_spark == "when_needed" else ""

    demo_module.WORK = WORK  # the demo's machinery, in a directory of its own
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    runner = demo_module.Demo("file", "local")  # file:// storage, spark-submit --master local[2]
    log = WORK / "runs.log"
    figures = {"tiny": [], "nochange": [], "bare": []}
    try:
        runner.start_services()
        runner.configure_airflow()
        os.environ.update(runner.env)  # before Airflow is imported: its config comes from here
        from airflow.dag_processing.dagbag import DagBag

        bag = DagBag(dag_folder=str(ROOT / "dags"))
        assert not bag.import_errors, bag.import_errors
        dag = bag.get_dag(demo_module.DAG_ID)
        runner.run_on_leader(["CREATE DATABASE bench", "CREATE TABLE bench.t (id INT PRIMARY KEY, v VARCHAR(20))"])
        seconds, states, _ = dag_run(dag, log)
        print(f"warm-up run (the schema, process start-up): {seconds:.1f} s {states}", flush=True)
        for i in range(args.repeat):
            runner.run_on_leader([f"INSERT INTO bench.t VALUES ({i}, 'tiny')"])
            seconds, states, tasks = dag_run(dag, log)
            assert set(states.values()) == {"success"}, states
            print(f"tiny batch run {i + 1}: {seconds:.1f} s, tasks {tasks}", flush=True)
            figures["tiny"].append(seconds)

            seconds, states, tasks = dag_run(dag, log)
            assert states.get("wait_for_changes") == "skipped", states
            print(f"nothing-new run {i + 1}: {seconds:.1f} s, tasks {tasks}", flush=True)
            figures["nochange"].append(seconds)

            figures["bare"].append(bare_spark_submit(runner.env))
            print(f"bare spark-submit {i + 1}: {figures['bare'][-1]:.1f} s", flush=True)
    finally:
        for service in reversed(runner.services):
            service.stop()

    med = {k: round(statistics.median(v), 1) for k, v in figures.items()}
    # (each run of this script has its own bare spark-submit: the tiny run is compared with its own)
    report = {f"tiny_run{suffix}_s": med["tiny"], f"bare_spark_submit{suffix}_s": med["bare"],
              f"nochange_run{suffix}_s": med["nochange"]}
    print(f"tiny batch run (sensor -> merge done): {med['tiny']} s")
    print(f"bare spark-submit:                     {med['bare']} s")
    print(f"run with nothing new:                  {med['nochange']} s")
    print(f"task logs: {log}")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
