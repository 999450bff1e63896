"""The copy's and the long range's worker processes start under Airflow's task runner.

The task runner's process has Airflow's entry point as its main module and sets the metadata
database URL to a value that refuses use (``airflow-db-not-allowed:///``). A stock spawned child
re-runs that main module, imports airflow, and dies: the deployed first run failed on every try
with ``BrokenProcessPool``. These tests put a process in that exact position (the real
``bin/airflow`` script as ``__main__``, the task runner's variable set) and start the pool there.
The deployed path itself (scheduler, LocalExecutor, a snapshot with two workers) is
``tests/airflow/deployed``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
AIRFLOW_SCRIPT = Path(sys.executable).parent / "airflow"

# Run as the main module of a fresh interpreter: Airflow's own entry script, then the pool, with
# the environment the task runner sets. The first line of output is the pool's answer.
TASK_PROCESS = textwrap.dedent("""
    import os, runpy, sys
    sys.path.insert(0, {plugins!r})
    # Airflow's entry script as this process's __main__, as under the LocalExecutor
    runpy.run_path({airflow!r}, run_name="not_main")  # imports airflow, defines main(); runs nothing
    sys.modules["__main__"].__file__ = {airflow!r}
    os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = "airflow-db-not-allowed:///"
    {make_pool}
    with pool:
        print(sorted(set(pool.map(abs, [-1, -2, -3, -4]))))
""")


def run_task_process(make_pool: str, tmp_path: Path) -> subprocess.CompletedProcess:
    script = tmp_path / "task_process.py"
    script.write_text(TASK_PROCESS.format(plugins=str(REPO / "plugins"), airflow=str(AIRFLOW_SCRIPT),
                                          make_pool=make_pool))
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path / "airflow-home"),
           "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{tmp_path}/airflow.db"}
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)


def test_the_worker_pool_starts_under_the_task_runners_main_module_and_environment(tmp_path):
    done = run_task_process("from mysql_cdc.capture.workers import worker_pool; pool = worker_pool(2)", tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines()[0] == "[1, 2, 3, 4]"
    assert "SQLAlchemy" not in done.stderr


def test_a_stock_spawned_pool_dies_there(tmp_path):
    """The failure the deployed run showed, reproduced by the same script: the test above would
    catch a return to the stock start method."""
    done = run_task_process(
        "import multiprocessing; from concurrent.futures import ProcessPoolExecutor; "
        "pool = ProcessPoolExecutor(2, mp_context=multiprocessing.get_context('spawn'))", tmp_path)
    assert done.returncode != 0
    assert "BrokenProcessPool" in done.stderr
    assert "Could not parse SQLAlchemy URL" in done.stderr


@pytest.mark.parametrize("workers", [1, 3])
def test_the_pool_runs_capture_functions_by_reference(workers):
    """Workers unpickle the functions they run by module, never from the parent's main module."""
    from mysql_cdc.capture.workers import worker_pool
    from mysql_cdc.contracts import BinlogPosition

    with worker_pool(workers) as pool:
        parsed = list(pool.map(BinlogPosition.parse, ["binlog.000001:4", "binlog.000002:120"]))
    assert [str(p) for p in parsed] == ["binlog.000001:4", "binlog.000002:120"]
