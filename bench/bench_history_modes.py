#!/usr/bin/env python3
"""Benchmark what a history mode costs a lake follower's merge, beside the plain merge of the same
batch in the same run.

    .venv/bin/python bench/bench_history_modes.py --rows 200000

A table of ``--rows`` rows (bench_merge's workload, its first batch) is merged into a fresh lake,
then a second batch of OLTP-shaped changes (updates of 10% of the rows spread over the table,
deletes of 5%, as many inserts: one row per transaction event) is merged and timed: into a plain
table, into a ``soft_deletes`` table, into a ``history`` table; for the Delta follower (a lake on
the local file system) and the Iceberg follower (a JDBC catalog on a MariaDB server started here,
its warehouse on the local file system). Figures: each merge's seconds (the median of ``--repeat``
merges, each into a fresh lake) and
``<kind>_soft_deletes_vs_plain`` / ``<kind>_history_vs_plain`` (mode seconds / plain seconds; no
target: what the docs say a mode costs).

Prints one JSON object as its last line. Servers started here are stopped on exit.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "scripts"), str(REPO / "plugins"), str(REPO / "bench")]

from bench_delta import capture, spark_session  # noqa: E402
from bench_iceberg import Catalogs  # noqa: E402
from bench_merge import DB, PIPELINE, TABLE, leader_workload, position  # noqa: E402
from bench_servers import leader_and_follower  # noqa: E402
from local_services import MariaDBServer  # noqa: E402
from mysql_cdc.contracts import Checkpoint  # noqa: E402
from mysql_cdc.job_secrets import JobSecrets  # noqa: E402
from mysql_cdc.kinds.delta import follower_spec as delta_follower_spec  # noqa: E402
from mysql_cdc.kinds.delta.options import LakeOptions  # noqa: E402
from mysql_cdc.kinds.delta.state import DeltaStateStore, LakeLocation  # noqa: E402
from mysql_cdc.kinds.iceberg import follower_spec as iceberg_follower_spec  # noqa: E402
from mysql_cdc.storage import StorageSpec  # noqa: E402

MODES = {"plain": ((), ()), "soft_deletes": (("*.*",), ()), "history": ((), ("*.*",))}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def changes(leader: MariaDBServer, rows: int) -> None:
    """The second batch: updates of 10% of the rows, deletes of 5%, inserts of 5%, spread over the table."""
    leader.run_sql([f"UPDATE {DB}.{TABLE} SET amount = amount + 1 WHERE id % 10 = 3",
                    f"DELETE FROM {DB}.{TABLE} WHERE id % 20 = 7",
                    f"INSERT INTO {DB}.{TABLE} SELECT {rows * 2} + seq, seq % 1000, seq * 1.5, 'new', "
                    f"TIMESTAMP('2025-01-01') FROM {DB}.seq_1_to_{rows // 20}"])


def delta_secrets(work: Path, mode: str, storage: StorageSpec, start) -> JobSecrets:
    soft, history = MODES[mode]
    lake = StorageSpec(f"file://{work}/lake-{mode}-{uuid.uuid4().hex[:6]}")
    DeltaStateStore(LakeLocation(lake)).initialize(Checkpoint(PIPELINE, start))
    return JobSecrets(delta_follower_spec(lake, LakeOptions(soft_deletes=soft, history=history)), storage)


def iceberg_secrets(catalogs: Catalogs, mode: str, storage: StorageSpec, start) -> JobSecrets:
    soft, history = MODES[mode]
    catalog = catalogs.new(mode)
    plain = catalogs.secrets(catalog, storage, start)  # the state, fresh at ``start``
    return JobSecrets(iceberg_follower_spec(catalog, soft, history), plain.storage)


def main() -> int:
    from mysql_cdc.merge.job import run_merge

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000, help="rows of the table the changes are merged into")
    parser.add_argument("--repeat", type=int, default=3, help="merges of each mode, each into a fresh lake (median)")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    results: dict = {"history_modes_table_rows": args.rows}
    # the follower server holds the Iceberg catalogs
    with leader_and_follower("mysql-cdc-bench-history-", args.keep) as servers:
        work, leader, settings = servers.base, servers.leader, servers.leader_settings
        storage = StorageSpec(f"file://{work}/batches")
        start = position(settings)
        leader_workload(leader, args.rows)
        middle = position(settings)
        changes(leader, args.rows)
        _, first = capture(settings, storage, start, middle)
        _, second = capture(settings, storage, middle, position(settings))
        results["history_modes_change_rows"] = args.rows // 10 + args.rows // 20 * 2
        spark = spark_session()
        catalogs = Catalogs(servers.follower, work)
        for kind, secrets_of in (("delta", lambda mode: delta_secrets(work, mode, storage, start)),
                                 ("iceberg", lambda mode: iceberg_secrets(catalogs, mode, storage, start))):
            for mode in MODES:
                seconds = []
                for _ in range(args.repeat):
                    secrets = secrets_of(mode)
                    run_merge(spark, first, secrets)
                    log(f"{kind}, {mode}: merging the changes ...")
                    started = time.monotonic()
                    run_merge(spark, second, secrets)
                    seconds.append(time.monotonic() - started)
                results[f"{kind}_{mode}_merge_s"] = round(statistics.median(seconds), 2)
                results[f"{kind}_{mode}_merge_runs_s"] = [round(x, 2) for x in seconds]
            for mode in ("soft_deletes", "history"):
                results[f"{kind}_{mode}_vs_plain"] = round(results[f"{kind}_{mode}_merge_s"]
                                                           / results[f"{kind}_plain_merge_s"], 2)
        spark.stop()
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
