#!/usr/bin/env python3
"""Benchmark how the merge's cost grows with the number of tables a batch touches.

    .venv/bin/python bench/bench_tables.py                 (--rows 20000 --tables 1,50 for a quick check)

The same ``--rows`` change rows (80 % inserts, 10 % updates, 10 % deletes, in transactions that
each touch a handful of tables, as an OLTP application writes them) are spread evenly over 1, 100
and 1,000 tables, each table with its own schema (its own columns and types). Every spread is
captured into its own batch and merged with the real ``spark-submit --master local[2]`` into a
MySQL follower that has the tables, empty; the job's own time (``run_merge``: from the Spark
session up to the last commit) is read from its log. Each spread is merged once into its new
tables (reported as ``first_merge_seconds``), then ``--repeat`` times more (the same batch into
the same tables emptied, from the same checkpoint), and the median of these is the figure: a
follower applies every interval into tables it has written before. These repeats go round the
spreads (1, 100, 1,000 tables, then again), so that the spreads a ratio compares are merged at
about the same times of a run. (Into new tables, InnoDB's
first writes to each table's new tablespace cost the follower 0.6-0.9 ms per table more: 1,000
tables, 1.3-1.6 s of its CPU against 0.7 s. So the tables are emptied with ``DELETE`` and the
purge of the deleted rows waited for, not with ``TRUNCATE``, which makes a new tablespace.)
After every merge each table of the follower is checked against the leader (``CHECKSUM TABLE``),
so a fast wrong merge cannot pass.

``--key binary16`` keys every table by a ``BINARY(16)`` (a UUID kept in 16 bytes, as OLTP schemas
often do) instead of a ``BIGINT``: its figures carry the suffix ``_binary_key``.

``--store s3`` keeps the batches on a real S3 endpoint (moto's server, started here) instead of the
local file system, as a deployed pipeline does: there every object costs a request, and its
figures carry the suffix ``_s3``. Each spread's capture (``extract_range``) is timed too.

``merge_tables_growth`` = seconds for the largest table count / seconds for one table (target
<= 3: the cost follows the rows, not the table count). ``merge_tables_follower_floor`` = the
follower server's CPU seconds during the largest merge / seconds of the one-table merge: the
growth the merge would have if nothing but the follower's own work cost anything (its one
transaction is one session: that work cannot be spread). Prints one JSON object as its last line.
Servers started here are stopped on exit.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "scripts"), str(REPO / "plugins"), str(REPO / "bench")]

from bench_merge import position, run_spark_submit  # noqa: E402
from bench_servers import leader_and_follower, s3_storage  # noqa: E402
from local_services import MariaDBServer  # noqa: E402
from mysql_cdc.capture.stream.extract import BatchTarget, RangeRequest, extract_range  # noqa: E402
from mysql_cdc.change_export import export_changes  # noqa: E402
from mysql_cdc.capture.filters import TableFilter  # noqa: E402
from mysql_cdc.contracts import MANIFEST_NAME, BinlogPosition, Checkpoint, PositionRange  # noqa: E402
from mysql_cdc.kinds.mysql import follower_spec as mysql_follower_spec  # noqa: E402
from mysql_cdc.job_secrets import JobSecrets  # noqa: E402
from mysql_cdc.mysql_server import MySQLSettings  # noqa: E402
from mysql_cdc.server_state.checkpoint import ensure_state_tables, write_checkpoint  # noqa: E402
from mysql_cdc.storage import StorageSpec, open_store  # noqa: E402

# the columns a table may have beyond its key; table i takes a different selection of them, so
# no two neighbouring tables share a schema (and the merge cannot share anything by schema)
EXTRA_COLUMNS = (
    ("qty", "INT NOT NULL", "seq % 97"),
    ("price", "DECIMAL(12,2)", "seq * 1.25"),
    ("label", "VARCHAR(40)", "CONCAT('label ', seq)"),
    ("seen", "DATETIME(6)", "TIMESTAMP('2024-01-01') + INTERVAL seq SECOND"),
    ("ratio", "DOUBLE", "seq / 7"),
    ("flag", "TINYINT", "seq % 2"),
    ("body", "TEXT", "REPEAT('x', seq % 50)"),
)
TABLES_PER_TRANSACTION = 5


@dataclass(frozen=True)
class KeyKind:
    """The tables' key column: its SQL type, and the key of row number ``{n}`` (an SQL expression)
    such that keys sort as their row numbers do."""

    sql_type: str
    value: str
    primary: bool = True  # False: the column is no key, the table has none (a multiset)

    def of(self, n: str | int) -> str:
        return self.value.format(n=n)


KEYS = {
    "bigint": KeyKind("BIGINT", "{n}"),
    "binary16": KeyKind("BINARY(16)", "UNHEX(LPAD(HEX({n}), 32, '0'))"),  # big-endian: sorts as n
    "none": KeyKind("BIGINT", "{n}", primary=False),
}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def table_columns(i: int) -> list[tuple[str, str, str]]:
    """Table i's extra columns: a rotating window of 2-5 of ``EXTRA_COLUMNS``."""
    count = 2 + i % 4
    return [EXTRA_COLUMNS[(i + k) % len(EXTRA_COLUMNS)] for k in range(count)]


def create_statement(db: str, i: int, key: KeyKind) -> str:
    columns = ", ".join(f"{name} {sql_type}" for name, sql_type, _ in table_columns(i))
    key_clause = " PRIMARY KEY" if key.primary else ""
    return f"CREATE TABLE `{db}`.t{i:04d} (id {key.sql_type} NOT NULL{key_clause}, version INT NOT NULL, {columns})"


def create_tables(servers: list[MariaDBServer], db: str, tables: int, key: KeyKind) -> None:
    for server in servers:
        conn = server.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(f"CREATE DATABASE `{db}`")
                for i in range(tables):
                    cur.execute(create_statement(db, i, key))
        finally:
            conn.close()


def write_changes(leader: MariaDBServer, db: str, tables: int, rows: int,
                  key: KeyKind, between_phases: Sequence[str] = ()) -> dict[str, int]:
    """``rows`` change rows over ``tables`` tables: per table 80 % inserts, then 10 % updates and
    10 % deletes of its inserted rows; each transaction writes up to ``TABLES_PER_TRANSACTION``
    tables, so transactions cross tables the way an application's do. ``between_phases``: a
    statement run after the inserts and one after the updates (DDL between them splits the range
    into row segments)."""
    per_table = rows // tables
    inserts, updates = per_table * 8 // 10, per_table // 10
    deletes = per_table - inserts - updates
    conn = leader.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"USE `{db}`")  # the sequence engine's seq_X_to_Y tables live in the current schema
            for k, phase in enumerate(("insert", "update", "delete")):
                if k and between_phases:
                    cur.execute(between_phases[k - 1])
                for first in range(0, tables, TABLES_PER_TRANSACTION):
                    cur.execute("BEGIN")
                    for i in range(first, min(first + TABLES_PER_TRANSACTION, tables)):
                        cur.execute(_statement(phase, i, inserts, updates, deletes, key))
                    cur.execute("COMMIT")
    finally:
        conn.close()
    return {"per_table": per_table, "inserts": inserts * tables, "updates": updates * tables,
            "deletes": deletes * tables}


def _statement(phase: str, i: int, inserts: int, updates: int, deletes: int, key: KeyKind) -> str:
    table = f"t{i:04d}"
    columns = table_columns(i)
    if phase == "insert":
        values = ", ".join(expr for _, _, expr in columns)
        return f"INSERT INTO {table} SELECT {key.of('seq')}, 1, {values} FROM seq_1_to_{inserts}"
    if phase == "update":
        return f"UPDATE {table} SET version = version + 1 WHERE id <= {key.of(updates)}"
    return f"DELETE FROM {table} WHERE id > {key.of(inserts - deletes)}"


def cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) a process has used so far, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def checksums(server: MariaDBServer, db: str, tables: int) -> dict[str, int]:
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            names = ", ".join(f"`{db}`.t{i:04d}" for i in range(tables))
            cur.execute(f"CHECKSUM TABLE {names}")
            return {name: value for name, value in cur.fetchall()}
    finally:
        conn.close()


@dataclass
class Spread:
    """One spread's batch, captured once and merged again and again into its emptied tables."""

    tables: int
    start: BinlogPosition  # the checkpoint every merge of the batch starts from
    manifest_uri: str
    change_rows: int
    extract_seconds: float
    export_seconds: float  # the batch's change rows written as plain Parquet (``change_export``)
    batch_objects: int
    first: dict  # the merge into the new tables
    merges: list[dict] = field(default_factory=list)  # the merges after it

    @property
    def db(self) -> str:
        return f"spread_{self.tables}"  # the database, and the pipeline's name

    def result(self) -> dict:
        """The spread's figures: its median merge (by the job's seconds) and every merge's seconds."""
        merges = sorted(self.merges, key=lambda m: m["seconds"])
        return {"tables": self.tables, "change_rows": self.change_rows, "extract_seconds": round(self.extract_seconds, 2),
                "export_seconds": round(self.export_seconds, 2), "batch_objects": self.batch_objects, **merges[len(merges) // 2],
                "seconds_all_runs": [m["seconds"] for m in self.merges], "first_merge_seconds": self.first["seconds"],
                "first_merge_follower_cpu_seconds": self.first["follower_cpu_seconds"]}


def prepare(leader: MariaDBServer, follower: MariaDBServer, settings: MySQLSettings, secrets_for,
            storage: StorageSpec, work: Path, tables: int, rows: int, key: KeyKind) -> Spread:
    """A spread's tables created on both servers, its change rows written on the leader and
    captured into one batch, then merged once into the follower's new tables."""
    db = f"spread_{tables}"
    log(f"{tables} tables: creating them and writing {rows} change rows ...")
    create_tables([leader, follower], db, tables, key)
    start = position(settings)
    workload = write_changes(leader, db, tables, rows, key)
    end = position(settings)
    conn = follower.connect()
    try:
        ensure_state_tables(conn)
        write_checkpoint(conn, Checkpoint(db, start))
    finally:
        conn.close()
    store = storage.open()
    started = time.monotonic()
    batch = extract_range(settings, RangeRequest(db, PositionRange(start, end), TableFilter((f"{db}.*",))),
                          BatchTarget(store))
    extract_seconds = time.monotonic() - started
    assert batch.row_count == workload["per_table"] * tables, (batch.row_count, workload)
    objects = len(store.list_keys(batch.prefix))
    # what a user pays to read the batch with their own tools: every table's change rows as plain
    # Parquet files (the packs of small tables opened through the manifest) on the local disk
    started = time.monotonic()
    exported = export_changes(store, db, open_store(f"file://{work}/export-{tables}"))
    export_seconds = time.monotonic() - started
    assert sum(f.rows for f in exported) == batch.row_count, (len(exported), batch.row_count)
    manifest_uri = f"{storage.uri}/{batch.prefix}/{MANIFEST_NAME}"
    log(f"{tables} tables: merging {batch.row_count} change rows with spark-submit into the new tables ...")
    first = merge_once(leader, follower, secrets_for, work, manifest_uri, db, tables)
    return Spread(tables, start, manifest_uri, batch.row_count, extract_seconds, export_seconds, objects, first)


def merge_again(leader: MariaDBServer, follower: MariaDBServer, secrets_for, work: Path, spread: Spread,
                repeat: int) -> None:
    """The spread's batch merged again, into its tables emptied, from the same checkpoint."""
    reset_follower(follower, spread.db, spread.tables, Checkpoint(spread.db, spread.start))
    log(f"{spread.tables} tables: merging {spread.change_rows} change rows with spark-submit "
        f"({len(spread.merges) + 1}/{repeat}) ...")
    spread.merges.append(merge_once(leader, follower, secrets_for, work, spread.manifest_uri, spread.db,
                                    spread.tables))


def reset_follower(follower: MariaDBServer, db: str, tables: int, checkpoint: Checkpoint) -> None:
    """The follower's tables emptied and its checkpoint put back, as before the batch was merged.
    ``DELETE``, not ``TRUNCATE``: a truncated InnoDB table is a new tablespace, whose first writes
    cost what a table written every interval does not. The deleted rows are then purged (MariaDB
    waits for that when ``innodb_max_purge_lag_wait`` is set to 0), so the next merge's inserts
    find no delete-marked rows under their keys."""
    conn = follower.connect()
    try:
        with conn.cursor() as cur:
            for i in range(tables):
                cur.execute(f"DELETE FROM `{db}`.t{i:04d}")
            write_checkpoint(conn, checkpoint)
            conn.commit()
            cur.execute("SET GLOBAL innodb_max_purge_lag_wait = 0")
    finally:
        conn.close()


def merge_once(leader: MariaDBServer, follower: MariaDBServer, secrets_for, work: Path, manifest_uri: str, db: str,
               tables: int) -> dict:
    """One spark-submit of the merge, its figures, and the follower checked against the leader."""
    follower_cpu = cpu_seconds(follower.pid)
    wall, summary = run_spark_submit(manifest_uri, secrets_for(), work, "1g", "")
    follower_cpu = cpu_seconds(follower.pid) - follower_cpu
    expected, got = checksums(leader, db, tables), checksums(follower, db, tables)
    if expected != got:
        wrong = sorted(name for name in expected if expected[name] != got.get(name))
        raise SystemExit(f"{tables} tables: the follower differs from the leader in {len(wrong)} tables, "
                         f"e.g. {wrong[:5]}")
    stage = sum(t["stage_seconds"] for t in summary["tables"])
    return {"seconds": summary["seconds"], "wall_seconds": round(wall, 2), "stage_seconds_sum": round(stage, 2),
            "follower_cpu_seconds": round(follower_cpu, 2),
            "apply_seconds_sum": round(sum(t["apply_seconds"] for t in summary["tables"]), 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000, help="change rows in every spread")
    parser.add_argument("--tables", default="1,100,1000", help="table counts, comma-separated")
    parser.add_argument("--repeat", type=int, default=3,
                        help="merges of each spread after its first (the same batch into the emptied tables); "
                             "the median is reported")
    parser.add_argument("--store", choices=("file", "s3"), default="file",
                        help="where the batches are: the local file system, or a real S3 endpoint (moto's server)")
    parser.add_argument("--key", choices=sorted(KEYS), default="bigint",
                        help="the tables' key column: BIGINT, or BINARY(16) (a UUID in 16 bytes)")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (datadirs, batches, logs)")
    args = parser.parse_args()
    counts = [int(n) for n in args.tables.split(",")]

    with leader_and_follower("bench-tables-", args.keep) as servers, ExitStack() as stack:
        base, leader, follower = servers.base, servers.leader, servers.follower
        leader_settings, follower_settings = servers.leader_settings, servers.follower_settings
        work = base / "work"
        work.mkdir()
        storage = stack.enter_context(s3_storage(base)) if args.store == "s3" else StorageSpec(f"file://{base}/store")

        def secrets_for() -> JobSecrets:
            return JobSecrets(mysql_follower_spec(follower_settings), storage)

        started = time.monotonic()
        spreads = [prepare(leader, follower, leader_settings, secrets_for, storage, work, n, args.rows,
                           KEYS[args.key]) for n in counts]
        # The repeats go round the spreads (1, 100, 1,000 tables, then again), so that every spread
        # is merged at about the same times: this machine's speed drifts over minutes, and spreads
        # merged one after the other carried that drift into their ratio.
        for _ in range(args.repeat):
            for spread in spreads:
                merge_again(leader, follower, secrets_for, work, spread, args.repeat)
        results = [spread.result() for spread in spreads]
        suffix = ("_s3" if args.store == "s3" else "") + ("" if args.key == "bigint" else "_binary_key")
        print(json.dumps(figures(results, args.rows, suffix, time.monotonic() - started), sort_keys=True))
        return 0




def figures(spreads: list[dict], rows: int, suffix: str, seconds: float) -> dict:
    """The run's figures; their keys end with ``suffix`` (``make bench`` merges every benchmark's
    figures into one object: the S3 run's must not overwrite the file system's)."""
    result = {f"tables_change_rows{suffix}": rows, f"tables_spreads{suffix}": spreads,
              f"tables_bench_seconds{suffix}": round(seconds, 1)}
    first, last = spreads[0], spreads[-1]
    result[f"merge_tables_growth{suffix}"] = round(last["seconds"] / first["seconds"], 2)
    # the follower's own work for the most tables (its CPU in the one session that writes them)
    # against the whole one-table merge: the growth if everything but the follower were free
    result[f"merge_tables_follower_floor{suffix}"] = round(last["follower_cpu_seconds"] / first["seconds"], 2)
    for spread in spreads:
        n = spread["tables"]
        result[f"merge_{n}_tables_seconds{suffix}"] = spread["seconds"]
        result[f"merge_{n}_tables_follower_cpu_seconds{suffix}"] = spread["follower_cpu_seconds"]
        result[f"merge_{n}_tables_first_merge_seconds{suffix}"] = spread["first_merge_seconds"]
        result[f"extract_{n}_tables_seconds{suffix}"] = spread["extract_seconds"]
        result[f"export_{n}_tables_seconds{suffix}"] = spread["export_seconds"]
        print(f"{n:>5} tables: {spread['seconds']:6.1f} s in the job ({spread['wall_seconds']:.1f} s "
              f"spark-submit wall; stage {spread['stage_seconds_sum']:.1f} s, apply {spread['apply_seconds_sum']:.1f} s "
              f"summed over tables; the first merge, into new tables: {spread['first_merge_seconds']:.1f} s); "
              f"captured in {spread['extract_seconds']:.1f} s into {spread['batch_objects']} objects, "
              f"exported as plain Parquet in {spread['export_seconds']:.1f} s")
    print(f"merge_tables_growth{suffix}: {result[f'merge_tables_growth{suffix}']} ({last['tables']} tables / "
          f"{first['tables']}; target <= 3)")
    print(f"merge_tables_follower_floor{suffix}: {result[f'merge_tables_follower_floor{suffix}']} (the follower's "
          f"CPU for {last['tables']} tables: {last['follower_cpu_seconds']} s / the one-table merge)")
    return result


if __name__ == "__main__":
    sys.exit(main())
