#!/usr/bin/env python3
"""Benchmark a Delta follower with the shape OLTP schemas send: many tables, few rows each.

    .venv/bin/python bench/bench_delta_tables.py            (--rows 20000 --tables 1,100 for a quick check)

Everything on a real S3 endpoint (moto's server, started here): the change batches and the lake
(``--lake file``: the lake on the local file system, to tell the object store's share apart).
The workload is ``bench_tables``'s (its tables, each with its own schema; 80 % inserts, 10 %
updates, 10 % deletes, transactions across a handful of tables), and every merge is the real
``spark-submit --master local[2]`` of the merge job, its own seconds read from its log.

1. ``delta_tables_growth``: ``--rows`` change rows over 1 and over 1,000 tables (``--tables``). A
   spread's range is captured once per merge, each time as a pipeline of its own (Delta skips a
   commit whose pipeline already made it: the same pipeline cannot merge a range twice). The
   first merge writes the tables' first rows (``first_merge_seconds``); the ``--repeat`` merges
   after it go into the same tables, now holding rows, as a follower's every interval does (each
   pipeline's state row holding every table's version, as a running pipeline's does); their median
   is the figure. After every merge each table of the lake is read with delta-rs and its
   (id, version) pairs compared with the leader's, so a fast wrong merge cannot pass.
   ``delta_tables_growth`` = the most tables' seconds / one table's (target <= 3). Beside it, on S3,
   ``delta_tables_growth_floor``: the same ratio with the least requests any Delta writer makes per
   table in place of the merge of the most tables (``request_floor``).
2. ``delta_small_batch_s`` beside ``mysql_small_batch_s``: ``--small-tables`` tables x
   ``--small-rows`` change rows (50 x 20), merged into tables that hold rows, into the lake and into
   a MySQL follower (checked with ``CHECKSUM TABLE``) in the same run; ``delta_small_batch_vs_mysql``
   = their ratio (target <= 3). With keyed tables, also ``iceberg_small_batch_s``: the same batch
   into an Iceberg follower (its JDBC catalog a database of the MySQL follower's server, its
   warehouse beside the lake; each table read back with pyiceberg), ``iceberg_small_batch_vs_mysql``.
3. ``delta_ddl_between_s``: the small batch's shape again, with a DDL statement on another table
   (a ``CREATE TABLE``) after its inserts and one after its updates: three row segments, each
   touching every table, that the merge joins into one commit per table (``merge.joined``);
   ``delta_ddl_between_vs_one_segment`` = its seconds / the small batch's (the same rows in one
   segment, same run).

Prints one JSON object as its last line. Servers started here are stopped on exit.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "scripts"), str(REPO / "plugins"), str(REPO / "bench")]

from bench_merge import position, run_spark_submit  # noqa: E402
from bench_servers import leader_and_follower  # noqa: E402
from bench_tables import KEYS, KeyKind, create_tables, log, merge_once, reset_follower, s3_storage, write_changes  # noqa: E402
from mysql_cdc.capture.filters import TableFilter  # noqa: E402
from mysql_cdc.capture.stream.extract import BatchTarget, RangeRequest, extract_range  # noqa: E402
from mysql_cdc.contracts import MANIFEST_NAME, BinlogPosition, Checkpoint, PositionRange, TablePositions  # noqa: E402
from mysql_cdc.job_secrets import JobSecrets  # noqa: E402
from mysql_cdc.kinds.delta import follower_spec as delta_follower_spec  # noqa: E402
from mysql_cdc.kinds.delta.state import DeltaStateStore, LakeLocation  # noqa: E402
from mysql_cdc.kinds.delta.state.tables import StateRow  # noqa: E402
from mysql_cdc.kinds.iceberg import follower_spec as iceberg_follower_spec  # noqa: E402
from mysql_cdc.kinds.iceberg.catalog import CatalogRef  # noqa: E402
from mysql_cdc.kinds.iceberg.state import IcebergStateStore  # noqa: E402
from mysql_cdc.spark_lines import DEFAULT_LINE  # noqa: E402
from mysql_cdc.kinds.delta.submit import submit_needs  # noqa: E402
from mysql_cdc.kinds.mysql import follower_spec as mysql_follower_spec  # noqa: E402
from mysql_cdc.server_state.checkpoint import ensure_state_tables, write_checkpoint  # noqa: E402
from mysql_cdc.storage import StorageSpec  # noqa: E402

class Bench:
    """The servers, the S3 endpoint (batches and lake) and the spark-submit settings of one run."""

    def __init__(self, servers, storage: StorageSpec, lake: StorageSpec, work: Path, key: KeyKind):
        self.key = key
        self.leader, self.follower = servers.leader, servers.follower
        self.settings, self.follower_settings = servers.leader_settings, servers.follower_settings
        self.storage = storage
        self.lake = lake
        self.work = work
        needs = submit_needs(DEFAULT_LINE)
        self.delta_conf = {"spark.jars": ",".join(needs.jars), **dict(needs.conf)}
        self.captures = 0
        self.first_versions: dict[str, list[int]] = {}  # database -> each table's version after its first merge
        # an Iceberg follower: its catalog a database of the follower's server, its warehouse beside the lake
        self.follower.run_sql(["CREATE DATABASE IF NOT EXISTS bench_iceberg_catalog"])
        self.catalog = CatalogRef("lake", self.follower_settings, "bench_iceberg_catalog",
                                  StorageSpec(lake.uri.rsplit("/", 1)[0] + "/warehouse", lake.options))

    def workload(self, db: str, tables: int, rows: int, on_follower: bool = False,
                 between_phases: tuple[str, ...] = ()) -> tuple[BinlogPosition, BinlogPosition]:
        """``tables`` new tables of database ``db`` and ``rows`` change rows over them, on the leader
        (and the tables on the MySQL follower too); returns the range that holds the changes
        (``between_phases``: ``bench_tables.write_changes``'s)."""
        create_tables([self.leader, self.follower] if on_follower else [self.leader], db, tables, self.key)
        start = position(self.settings)
        write_changes(self.leader, db, tables, rows, self.key, between_phases)
        return start, position(self.settings)

    def capture(self, pipeline: str, db: str, start: BinlogPosition, end: BinlogPosition) -> str:
        request = RangeRequest(pipeline, PositionRange(start, end), TableFilter((f"{db}.*",)))
        batch = extract_range(self.settings, request, BatchTarget(self.storage.open()))
        return f"{self.storage.uri}/{batch.prefix}/{MANIFEST_NAME}"

    def delta_merge(self, db: str, tables: int, start: BinlogPosition, end: BinlogPosition) -> dict:
        """The range captured as a new pipeline and merged into the lake; the lake then checked.
        Keyless tables are multisets: the same range merged again by another pipeline adds its rows
        again, so before a repeat each table goes back to the version the first merge left
        (``DeltaTable.restore``, outside the timing), and the lake then holds the leader's rows twice."""
        first = db not in self.first_versions
        if not first and not self.key.primary:
            self.restore(db, tables, self.first_versions[db])
        self.captures += 1
        pipeline = f"{db}_run{self.captures}"
        uri = self.capture(pipeline, db, start, end)
        self.start_pipeline(pipeline, db, tables, start, first)
        wall, summary = run_spark_submit(uri, JobSecrets(delta_follower_spec(self.lake), self.storage), self.work,
                                         "1g", "", self.delta_conf)
        self.check_lake(db, tables, 1 if first or self.key.primary else 2)
        if first:
            self.first_versions[db] = [self.lake_table(db, i).version() for i in range(tables)]
        return {"seconds": summary["seconds"], "wall_seconds": round(wall, 2),
                "apply_seconds_sum": round(sum(t["apply_seconds"] for t in summary["tables"]), 2)}

    def start_pipeline(self, pipeline: str, db: str, tables: int, start: BinlogPosition, first: bool) -> None:
        """The new pipeline's state row at ``start``: on a repeat, with every table's version as it
        stands, as a running pipeline's state row holds them after its first merge (the commits then
        know each table has none of theirs without reading its log: ``merges.Txn.cut_version``)."""
        store = DeltaStateStore(LakeLocation(self.lake))
        if first:
            store.initialize(Checkpoint(pipeline, start))
            return
        with ThreadPoolExecutor(8) as pool:
            versions = dict(pool.map(lambda i: (f"{db}.t{i:04d}", self.lake_table(db, i).version()), range(tables)))
        store.tables.write_state(StateRow(Checkpoint(pipeline, start), TablePositions(), versions))

    def iceberg_merge(self, db: str, tables: int, start: BinlogPosition, end: BinlogPosition) -> dict:
        """The range captured as a new pipeline and merged into the Iceberg follower (keyed tables:
        a repeat updates every key to the row it holds); each table then read with pyiceberg."""
        self.captures += 1
        pipeline = f"{db}_iceberg{self.captures}"
        uri = self.capture(pipeline, db, start, end)
        IcebergStateStore(self.catalog).initialize(Checkpoint(pipeline, start))
        wall, summary = run_spark_submit(uri, JobSecrets(iceberg_follower_spec(self.catalog), self.storage), self.work,
                                         "1g", "")
        catalog = self.catalog.open()
        leader = self.leader_pairs(db, tables)
        for i in range(tables):
            rows = catalog.load_table((db, f"t{i:04d}")).scan(selected_fields=("id", "version")).to_arrow()
            if sorted(zip(*(rows.column(c).to_pylist() for c in ("id", "version")))) != leader[i]:
                raise SystemExit(f"the Iceberg follower differs from the leader in {db}.t{i:04d}")
        return {"seconds": summary["seconds"], "wall_seconds": round(wall, 2)}

    def lake_table(self, db: str, i: int):
        from deltalake import DeltaTable

        location = LakeLocation(self.lake)
        return DeltaTable(location.table_uri(db, f"t{i:04d}"), storage_options=location.storage_options())

    def restore(self, db: str, tables: int, versions: list[int]) -> None:
        def back(i: int) -> None:
            table = self.lake_table(db, i)
            if table.version() != versions[i]:
                table.restore(versions[i])

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(back, range(tables)))

    def check_lake(self, db: str, tables: int, copies: int = 1) -> None:
        """Every table of the lake (read with delta-rs) holds the leader's (id, version) pairs
        (``copies`` times each: keyless tables merged twice)."""
        with ThreadPoolExecutor(8) as pool:
            lake = dict(zip(range(tables), pool.map(lambda i: self.lake_pairs(db, i), range(tables))))
        leader = self.leader_pairs(db, tables)
        wrong = [f"{db}.t{i:04d}" for i in range(tables) if lake[i] != sorted(leader[i] * copies)]
        if wrong:
            raise SystemExit(f"the lake differs from the leader in {len(wrong)} tables, e.g. {wrong[:5]}")

    def lake_pairs(self, db: str, i: int) -> list[tuple]:
        from deltalake import QueryBuilder

        # DataFusion's SQL: delta-rs's pyarrow reader refuses the lake's column mapping
        rows = (QueryBuilder().register("t", self.lake_table(db, i))
                .execute("SELECT id, version FROM t ORDER BY id, version").read_all())
        return list(zip(*(rows.column(c).to_pylist() for c in ("id", "version"))))

    def leader_pairs(self, db: str, tables: int) -> dict[int, list[tuple]]:
        conn = self.leader.connect()
        try:
            with conn.cursor() as cur:
                pairs = {}
                for i in range(tables):
                    cur.execute(f"SELECT id, version FROM `{db}`.t{i:04d} ORDER BY id")
                    pairs[i] = [tuple(row) for row in cur.fetchall()]
                return pairs
        finally:
            conn.close()

    def mysql_merges(self, db: str, tables: int, start: BinlogPosition, end: BinlogPosition, repeat: int) -> list[dict]:
        """The range merged into the MySQL follower: once into its new tables, then ``repeat`` times
        into the tables emptied (``bench_tables.reset_follower``) from the same checkpoint."""
        uri = self.capture(db, db, start, end)
        conn = self.follower.connect()
        try:
            ensure_state_tables(conn)
            write_checkpoint(conn, Checkpoint(db, start))
        finally:
            conn.close()

        def secrets() -> JobSecrets:
            return JobSecrets(mysql_follower_spec(self.follower_settings), self.storage)

        merges = [merge_once(self.leader, self.follower, secrets, self.work, uri, db, tables)]
        for _ in range(repeat):
            reset_follower(self.follower, db, tables, Checkpoint(db, start))
            merges.append(merge_once(self.leader, self.follower, secrets, self.work, uri, db, tables))
        return merges


def median_seconds(merges: list[dict]) -> float:
    return statistics.median(m["seconds"] for m in merges)


def growth(bench: Bench, counts: list[int], rows: int, repeat: int) -> dict:
    """Each spread's first merge, then its repeats, round the spreads (this machine's speed drifts
    over minutes: spreads merged one after the other would carry the drift into their ratio)."""
    ranges = {}
    first = {}
    for n in counts:
        log(f"{n} tables: creating them, writing {rows} change rows, the first merge into the lake ...")
        ranges[n] = bench.workload(f"dspread_{n}", n, rows)
        first[n] = bench.delta_merge(f"dspread_{n}", n, *ranges[n])
    merges: dict[int, list[dict]] = {n: [] for n in counts}
    for k in range(repeat):
        for n in counts:
            log(f"{n} tables: merging {rows} change rows into tables holding rows ({k + 1}/{repeat}) ...")
            merges[n].append(bench.delta_merge(f"dspread_{n}", n, *ranges[n]))
    result = {"delta_tables_change_rows": rows}
    for n in counts:
        result[f"delta_merge_{n}_tables_seconds"] = median_seconds(merges[n])
        result[f"delta_merge_{n}_tables_seconds_all_runs"] = [m["seconds"] for m in merges[n]]
        result[f"delta_merge_{n}_tables_first_merge_seconds"] = first[n]["seconds"]
    result["delta_tables_growth"] = round(median_seconds(merges[counts[-1]]) / median_seconds(merges[counts[0]]), 2)
    print(f"delta_tables_growth: {result['delta_tables_growth']} ({counts[-1]} tables / {counts[0]}; target <= 3)")
    return result


def small_batch(bench: Bench, tables: int, rows_per_table: int, repeat: int) -> dict:
    """The small batch into the lake (into tables holding rows: the first merge is left out) and
    into the MySQL follower, same run."""
    db = f"small_{tables}"
    log(f"a batch of {tables} tables x {rows_per_table} change rows into the lake and into MySQL ...")
    start, end = bench.workload(db, tables, tables * rows_per_table, on_follower=True)
    bench.delta_merge(db, tables, start, end)
    delta = [bench.delta_merge(db, tables, start, end) for _ in range(repeat)]
    mysql = bench.mysql_merges(db, tables, start, end, repeat)[1:]
    result = {"delta_small_batch_s": median_seconds(delta), "mysql_small_batch_s": median_seconds(mysql),
              "delta_small_batch_s_all_runs": [m["seconds"] for m in delta],
              "mysql_small_batch_s_all_runs": [m["seconds"] for m in mysql]}
    result["delta_small_batch_vs_mysql"] = round(result["delta_small_batch_s"] / result["mysql_small_batch_s"], 2)
    print(f"delta_small_batch_s {result['delta_small_batch_s']} s, mysql_small_batch_s {result['mysql_small_batch_s']} s: "
          f"{result['delta_small_batch_vs_mysql']}x (target <= 3)")
    if bench.key.primary:  # keyless tables would hold a repeat's rows twice: no figure
        bench.iceberg_merge(db, tables, start, end)  # the tables' first rows
        iceberg = [bench.iceberg_merge(db, tables, start, end) for _ in range(repeat)]
        result["iceberg_small_batch_s"] = median_seconds(iceberg)
        result["iceberg_small_batch_s_all_runs"] = [m["seconds"] for m in iceberg]
        result["iceberg_small_batch_vs_mysql"] = round(result["iceberg_small_batch_s"] / result["mysql_small_batch_s"], 2)
        print(f"iceberg_small_batch_s {result['iceberg_small_batch_s']} s: {result['iceberg_small_batch_vs_mysql']}x MySQL's")
    return result


def ddl_between(bench: Bench, tables: int, rows_per_table: int, repeat: int, one_segment_seconds: float) -> dict:
    """The small batch's shape split into three row segments by DDL on other tables, into the lake
    (into tables holding rows), against the same rows in one segment (``one_segment_seconds``)."""
    db = f"ddl_between_{tables}"
    log(f"{tables} tables x {rows_per_table} change rows in 3 row segments split by DDL on other tables ...")
    start, end = bench.workload(db, tables, tables * rows_per_table, between_phases=(
        "CREATE TABLE side_a (id INT PRIMARY KEY)", "CREATE TABLE side_b (id INT PRIMARY KEY)"))
    bench.delta_merge(db, tables, start, end)
    merges = [bench.delta_merge(db, tables, start, end) for _ in range(repeat)]
    result = {"delta_ddl_between_s": median_seconds(merges),
              "delta_ddl_between_s_all_runs": [m["seconds"] for m in merges]}
    result["delta_ddl_between_vs_one_segment"] = round(result["delta_ddl_between_s"] / one_segment_seconds, 2)
    print(f"delta_ddl_between_s {result['delta_ddl_between_s']} s: {result['delta_ddl_between_vs_one_segment']}x "
          "the same rows in one segment")
    return result


def request_floor(lake: StorageSpec, tables: int, one_table_seconds: float) -> dict:
    """The least any Delta writer asks of the lake's endpoint to merge changed rows into ``tables``
    tables, timed on it: per table, a LIST of its log (where it stands), a PUT of a data file and
    the conditional PUT of its commit. Sent one after another over one kept-alive connection with no
    SDK (less client work than any writer's), to a bucket of their own (a bucket's keys slow its
    listings on moto). ``delta_tables_growth_floor`` = (one table's merge + this) / one table's:
    the growth figure no writer gets below on this endpoint. (Concurrent requests did not shorten
    it on moto's server: 1,000 PUTs took 1.71 s on one connection, 1.83 s on four, 1.74 s on eight.)"""
    import http.client
    from urllib.parse import urlparse

    import boto3

    endpoint = urlparse(lake.options["endpoint_url"])
    boto3.client("s3", **lake.options).create_bucket(Bucket="bench-floor")
    connection = http.client.HTTPConnection(endpoint.hostname, endpoint.port)

    def send(method: str, path: str, body: bytes | None = None, headers: dict | None = None) -> None:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        response.read()
        if response.status != 200:
            raise RuntimeError(f"{method} {path}: HTTP {response.status} from {lake.options['endpoint_url']}")

    data, commit = b"\0" * 2048, b"{}" * 400  # a small table's data file, a commit's actions
    started = time.monotonic()
    for i in range(tables):
        log_prefix = f"t{i}/_delta_log/"
        send("GET", f"/bench-floor?list-type=2&prefix={log_prefix}")
        send("PUT", f"/bench-floor/t{i}/part-00000.parquet", data)
        send("PUT", f"/bench-floor/{log_prefix}00000000000000000000.json", commit, {"If-None-Match": "*"})
    floor = time.monotonic() - started
    result = {"delta_tables_request_floor_s": round(floor, 2),
              "delta_tables_growth_floor": round((one_table_seconds + floor) / one_table_seconds, 2)}
    print(f"request floor: {tables} x (LIST, PUT, conditional PUT) {floor:.2f} s: growth >= "
          f"{result['delta_tables_growth_floor']} on this endpoint")
    return result


def lake_storage(where: str, batches: StorageSpec, base: Path) -> StorageSpec:
    """The lake: a bucket of its own beside the batches' (moto's server lists a bucket's keys one by
    one for every listing, so the batches' objects would slow every table's log read), or a local
    directory."""
    if where == "file":
        return StorageSpec(f"file://{base}/lake")
    import boto3

    boto3.client("s3", **batches.options).create_bucket(Bucket="bench-lake")
    return StorageSpec("s3://bench-lake/lake", batches.options)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000, help="change rows of each spread")
    parser.add_argument("--tables", default="1,1000", help="table counts of the growth figure, comma-separated")
    parser.add_argument("--small-tables", type=int, default=50)
    parser.add_argument("--small-rows", type=int, default=20, help="change rows per table of the small batch")
    parser.add_argument("--repeat", type=int, default=3, help="merges into tables holding rows; the median is reported")
    parser.add_argument("--lake", choices=("s3", "file"), default="s3",
                        help="where the lake is: a bucket of its own on the S3 endpoint, or the local file system "
                             "(its figures then carry the suffix _file_lake)")
    parser.add_argument("--keyless", action="store_true",
                        help="tables without a primary key (multisets; figures with the suffix _keyless)")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (datadirs, logs)")
    args = parser.parse_args()
    counts = [int(n) for n in args.tables.split(",")]
    started = time.monotonic()
    with leader_and_follower("bench-delta-tables-", args.keep) as servers:
        work = servers.base / "work"
        work.mkdir()
        with s3_storage(servers.base) as storage:
            bench = Bench(servers, storage, lake_storage(args.lake, storage, servers.base), work,
                          KEYS["none" if args.keyless else "bigint"])
            results = small_batch(bench, args.small_tables, args.small_rows, args.repeat)
            results.update(ddl_between(bench, args.small_tables, args.small_rows, args.repeat,
                                       results["delta_small_batch_s"]))
            results.update(growth(bench, counts, args.rows, args.repeat))
            if args.lake == "s3":
                results.update(request_floor(bench.lake, counts[-1], results[f"delta_merge_{counts[0]}_tables_seconds"]))
    results["delta_tables_bench_seconds"] = round(time.monotonic() - started, 1)
    suffix = ("_keyless" if args.keyless else "") + ("" if args.lake == "s3" else "_file_lake")
    print(json.dumps({key + suffix: value for key, value in results.items()}, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
