"""The worker processes of a copy or of a long range: one place for how they are started."""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor


def worker_pool(workers: int) -> ProcessPoolExecutor:
    """Processes, not threads: reading rows through PyMySQL and converting them to Arrow holds the
    GIL. Spawned, not forked: the extract task's process has threads (Airflow's, boto3's), and a
    fork copies their locks in whatever state they are. Each worker gets plain values (pickled)
    and opens its own connections and store."""
    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))
