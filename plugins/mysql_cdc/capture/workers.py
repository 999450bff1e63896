"""The worker processes of a copy or of a long range: one place for how they are started.

Processes, not threads: reading rows through PyMySQL and converting them to Arrow holds the GIL.

Spawned, not forked: the extract task's process has threads (Airflow's, boto3's), and a fork
copies their locks in whatever state they are. Each worker gets plain values (pickled) and opens
its own connections and store.

Spawned **without the parent's main module**. A stock spawned child first re-runs the parent's
``__main__`` (as ``__mp_main__``) so that functions defined there can be unpickled. Under Airflow
that main module is Airflow's own entry point: ``bin/airflow`` for the LocalExecutor and Celery
workers, ``airflow.sdk.execution_time.execute_workload`` for a Kubernetes pod. Re-running it
imports ``airflow``, which configures its ORM from the environment, and the task runner sets that
environment to refuse database use from a task (``AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=
airflow-db-not-allowed:///``): every worker died on start-up and the pool reported
``BrokenProcessPool``, while ``dag.test()`` (which sets no such value) passed. Our workers run only
functions of ``mysql_cdc.capture``, which never imports Airflow, so they need nothing from the
parent's main module, and without it they start the same under any executor and whatever
environment the task runner sets: the environment is inherited untouched and never read by Airflow
code in the worker.
"""

from __future__ import annotations

import sys
import threading
import types
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import context, popen_spawn_posix

# Launches from two threads at once (two pools) must not restore each other's main module.
_LAUNCH_LOCK = threading.Lock()


class _PopenWithoutMain(popen_spawn_posix.Popen):
    """Spawn's launch, with the parent's main module out of sight while the child's preparation
    data is taken: the child is told of no main module to re-run (``multiprocessing.spawn``
    re-runs ``sys.modules['__main__']`` by its ``__spec__`` name or its ``__file__``; a bare module
    has neither). The swap lasts only for the launch, a few milliseconds."""

    def _launch(self, process_obj) -> None:
        with _LAUNCH_LOCK:
            main = sys.modules["__main__"]
            sys.modules["__main__"] = types.ModuleType("__main__")
            try:
                super()._launch(process_obj)
            finally:
                sys.modules["__main__"] = main


class _WorkerProcess(context.SpawnProcess):
    @staticmethod
    def _Popen(process_obj):
        return _PopenWithoutMain(process_obj)


class _WorkerContext(context.SpawnContext):
    Process = _WorkerProcess


def worker_pool(workers: int) -> ProcessPoolExecutor:
    """A pool of ``workers`` spawned processes that do not re-run the parent's main module."""
    return ProcessPoolExecutor(max_workers=workers, mp_context=_WorkerContext())
