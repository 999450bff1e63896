"""Extract throughput beside raw decoders, on one generated binlog range, in one run.

    .venv/bin/python bench/bench_extract.py [--rows 1000000] [--oltp-rows 100000] [--repeat 3] [--rss]

Prints extract rows/s (binlog -> Parquet batch in file:// storage, the compiled framer and row
decoder), also with the events framed by mysql-replication (the compiled decoder still reading the
rows), with the pure-Python decoder (`extract.decoder: python`) and read in two parts at once (the
range spans a binlog file per 50k inserts), next to:
  - raw mysql-replication decode of the same range with no output (the library's own cost),
  - `mariadb-binlog --base64-output=decode-rows -v` of the same range (the C decoder).
A second range of one-row transactions (an OLTP mix, where per-event work dominates) is extracted
and raw-decoded too. Ratios measured in the same run are the headline: absolute numbers move with
machine load. The last line printed is JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "scripts"), str(ROOT / "plugins")]

from local_services import MariaDBServer  # noqa: E402
from pymysqlreplication import BinLogStreamReader  # noqa: E402
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent  # noqa: E402

from mysql_cdc.capture.stream import extract  # noqa: E402
from mysql_cdc.capture.stream.extract import BatchTarget, RangeRequest, extract_range  # noqa: E402
from mysql_cdc.capture.leader import Leader  # noqa: E402
from mysql_cdc.contracts import PositionRange  # noqa: E402
from mysql_cdc.pipeline_options import ExtractOptions  # noqa: E402
from mysql_cdc.mysql_server import MySQLSettings  # noqa: E402
from mysql_cdc.storage import StorageSpec, open_store  # noqa: E402


def generate(server: MariaDBServer, rows: int, table: str = "orders") -> None:
    """A mixed workload of exactly ``rows`` changed rows: 80 % inserts, 15 % updates, 5 % deletes."""
    conn = server.connect()
    with conn.cursor() as cur:
        cur.execute("CREATE DATABASE IF NOT EXISTS bench")
        cur.execute(
            f"CREATE TABLE bench.{table} (id BIGINT PRIMARY KEY, customer INT, amount DECIMAL(12,2), "
            "status VARCHAR(16), note VARCHAR(64), created DATETIME(6))"
        )
        inserts = int(rows * 0.8)
        step = 50_000
        for lo in range(1, inserts + 1, step):
            hi = min(lo + step - 1, inserts)
            cur.execute(
                f"INSERT INTO bench.{table} SELECT seq, seq % 1000, seq / 7, ELT(1 + seq % 3, 'new', 'paid', 'sent'), "
                f"CONCAT('note ', seq), '2024-01-01 00:00:00' + INTERVAL seq SECOND FROM bench.seq_{lo}_to_{hi}"
            )
            cur.execute("FLUSH BINARY LOGS")  # a binlog file per step: a range a parallel extract can cut
        updates = int(rows * 0.15)
        cur.execute(f"UPDATE bench.{table} SET status = 'done', amount = amount + 1 WHERE id <= {updates}")
        deletes = rows - inserts - updates
        cur.execute(f"DELETE FROM bench.{table} WHERE id > {inserts - deletes}")
    conn.close()


def generate_oltp(server: MariaDBServer, rows: int) -> None:
    """``rows`` one-row transactions (autocommit): 60 % inserts, 30 % updates, 10 % deletes,
    written by a stored procedure so the client's round trips do not pace the leader."""
    conn = server.connect()
    with conn.cursor() as cur:
        cur.execute("CREATE DATABASE IF NOT EXISTS bench")
        cur.execute("CREATE TABLE bench.oltp (id BIGINT PRIMARY KEY, customer INT, amount DECIMAL(12,2), "
                    "status VARCHAR(16), note VARCHAR(64), created DATETIME(6))")
        cur.execute(f"""
            CREATE PROCEDURE bench.oltp_mix()
            BEGIN
              DECLARE i INT DEFAULT 0;
              WHILE i < {rows} DO
                IF i % 10 < 6 THEN
                  INSERT INTO bench.oltp VALUES (i, i % 1000, i / 7, 'new', CONCAT('note ', i), NOW(6));
                ELSEIF i % 10 < 9 THEN
                  UPDATE bench.oltp SET status = 'paid', amount = amount + 1 WHERE id = i - i % 10;
                ELSE
                  DELETE FROM bench.oltp WHERE id = i - i % 10 + 1;
                END IF;
                SET i = i + 1;
              END WHILE;
            END""")
        cur.execute("CALL bench.oltp_mix()")
    conn.close()


def timed(fn):
    t0 = time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, result


def cpu_seconds() -> float:
    """CPU time of this process and of its children that have exited (a pool's workers)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def cpu_timed(fn):
    """``(seconds, cpu seconds, result)`` of ``fn()``."""
    cpu = cpu_seconds()
    secs, result = timed(fn)
    return secs, cpu_seconds() - cpu, result


def events_in_range(settings: MySQLSettings, range_: PositionRange, server_id: int, **reader_options):
    """The library's events of ``range_`` as it frames them, read with ``reader_options``."""
    stream = BinLogStreamReader(
        connection_settings=settings.replication_settings(), server_id=server_id, log_file=range_.start.file,
        log_pos=range_.start.offset, resume_stream=True, blocking=False, enable_logging=False, **reader_options,
    )
    try:
        for event in stream:
            if stream.log_file == range_.end.file and event.packet.log_pos > range_.end.offset:
                return  # the first event past the range (more may follow it in the binlog)
            yield event
            if stream.log_file == range_.end.file and stream.log_pos >= range_.end.offset:
                return
    finally:
        stream.close()


ROWS_EVENTS = (WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent)


def raw_decode(settings: MySQLSettings, range_: PositionRange) -> int:
    """The library alone: decode every row of the range, keep nothing."""
    return sum(len(event.rows) for event in events_in_range(settings, range_, 987654, only_events=list(ROWS_EVENTS)))


@contextlib.contextmanager
def library_framing():
    """The compiled decoder's extract with the events framed by mysql-replication (the reference
    framing), to weigh the compiled framer in the same run."""
    extract.FRAMING_OF["native"] = "library"
    try:
        yield
    finally:
        extract.FRAMING_OF["native"] = "native"


def extract_rows_per_s(settings: MySQLSettings, range_: PositionRange, store_uri: str) -> tuple[float, int]:
    store = open_store(store_uri)
    secs, batch = timed(lambda: extract_range(settings, RangeRequest("bench", range_), BatchTarget(store),
                                              ExtractOptions(workers=1)))
    return batch.row_count / secs, batch.row_count


def mariadb_binlog(settings: MySQLSettings, range_: PositionRange) -> int:
    with Leader(settings) as leader:  # every file of the range: the start offset applies to the first
        names = [f.name for f in leader.binlog_files()]
    files = names[names.index(range_.start.file):names.index(range_.end.file) + 1]
    cmd = [
        "mariadb-binlog", "--read-from-remote-server", f"--host={settings.host}", f"--port={settings.port}",
        f"--user={settings.user}", "--base64-output=decode-rows", "-v",
        f"--start-position={range_.start.offset}", f"--stop-position={range_.end.offset}", *files,
    ]
    # the password goes through the environment, not argv
    out = subprocess.run(cmd, env={"MYSQL_PWD": settings.password, "PATH": "/usr/bin:/bin"},
                         capture_output=True, check=True)
    return out.stdout.count(b"\n### INSERT INTO") + out.stdout.count(b"\n### UPDATE") + out.stdout.count(b"\n### DELETE FROM")


def peak_rss_mb(settings: MySQLSettings, range_: PositionRange, store_uri: str, expected_rows: int) -> float:
    """Peak RSS of one extraction, in a fresh child process so earlier work does not count."""
    code = (
        "import sys, resource; sys.path[:0] = [sys.argv[1]]\n"
        "from mysql_cdc.capture.stream.extract import BatchTarget, RangeRequest, extract_range\n"
        "from mysql_cdc.contracts import PositionRange, BinlogPosition as P\n"
        "from mysql_cdc.mysql_server import MySQLSettings\n"
        "from mysql_cdc.storage import open_store\n"
        "import json, os\n"
        "s = MySQLSettings(**json.loads(os.environ['BENCH_LEADER']))\n"
        "r = RangeRequest('rss', PositionRange(P.parse(sys.argv[2]), P.parse(sys.argv[3])))\n"
        "b = extract_range(s, r, BatchTarget(open_store(sys.argv[4])))\n"
        "print(b.row_count, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
    )
    env = {"PATH": "/usr/bin:/bin", "BENCH_LEADER": json.dumps(settings.__dict__)}
    out = subprocess.run([sys.executable, "-c", code, str(ROOT / "plugins"), str(range_.start), str(range_.end),
                          store_uri], env=env, capture_output=True, text=True, check=True)
    rows, max_rss_kib = map(int, out.stdout.strip().splitlines()[-1].split())  # ru_maxrss: KiB on Linux
    assert rows == expected_rows, (rows, expected_rows)
    return max_rss_kib / 1024


def measure_rss(server: MariaDBServer, settings: MySQLSettings, tmp: str) -> dict:
    with Leader(settings) as leader:
        start = leader.current_position()
        generate(server, 1_000_000, "rss_a")
        one = leader.current_position()
        generate(server, 4_000_000, "rss_b")
        five = leader.current_position()
    # the parallel read again on the long range, where the parts' process start-up weighs less
    long_range = PositionRange(start, five)
    single, single_cpu, _ = cpu_timed(lambda: extract_range(settings, RangeRequest("bench", long_range),
                                                            BatchTarget(open_store(f"file://{tmp}/long1")),
                                                            ExtractOptions(workers=1)))
    spec = StorageSpec(f"file://{tmp}/long2")
    parallel, parallel_cpu, _ = cpu_timed(lambda: extract_range(settings, RangeRequest("bench", long_range),
                                                                BatchTarget(spec.open(), spec),
                                                                ExtractOptions(workers=2, min_part_mb=0)))
    return {
        "extract_rss_mb_1m": round(peak_rss_mb(settings, PositionRange(start, one), f"file://{tmp}/rss1", 1_000_000), 1),
        "extract_rss_mb_5m": round(peak_rss_mb(settings, long_range, f"file://{tmp}/rss5", 5_000_000), 1),
        "extract_parallel_speedup_5m": round(single / parallel, 3),
        "extract_parallel_cpu_ratio_5m": round(parallel_cpu / single_cpu, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--oltp-rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rss", action="store_true", help="also measure peak RSS at 1M and 5M changed rows")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        server = MariaDBServer(Path(tmp), "leader", 1, True, die_with_parent=True).start()
        try:
            settings = MySQLSettings(server.host, server.port, server.root_user, server.root_password)
            with Leader(settings) as leader:
                start = leader.current_position()
            generate(server, args.rows)
            with Leader(settings) as leader:
                end = leader.current_position()
            range_ = PositionRange(start, end)
            generate_oltp(server, args.oltp_rows)
            with Leader(settings) as leader:
                oltp = PositionRange(end, leader.current_position())
            results = {k: [] for k in ("extract", "extract_python", "extract_parallel", "raw", "mariadb_binlog",
                                       "extract_library_framing", "oltp_extract", "oltp_raw",
                                       "oltp_library_framing", "extract_cpu", "extract_parallel_cpu")}
            counts = {}
            one_reader = ExtractOptions(workers=1)
            for i in range(args.repeat):
                store = open_store(f"file://{tmp}/store{i}")
                secs, cpu, batch = cpu_timed(lambda: extract_range(settings, RangeRequest("bench", range_),
                                                                   BatchTarget(store), one_reader))
                results["extract"].append(batch.row_count / secs)
                results["extract_cpu"].append(cpu)
                counts["extract"] = batch.row_count
                with library_framing():
                    rate, counts["extract_library_framing"] = extract_rows_per_s(settings, range_,
                                                                                 f"file://{tmp}/framed{i}")
                results["extract_library_framing"].append(rate)
                store = open_store(f"file://{tmp}/python{i}")
                secs, batch = timed(lambda: extract_range(settings, RangeRequest("bench", range_), BatchTarget(store),
                                                          ExtractOptions(workers=1, decoder="python")))
                results["extract_python"].append(batch.row_count / secs)
                counts["extract_python"] = batch.row_count
                spec = StorageSpec(f"file://{tmp}/parallel{i}")
                secs, cpu, batch = cpu_timed(lambda: extract_range(settings, RangeRequest("bench", range_),
                                                                   BatchTarget(spec.open(), spec),
                                                                   ExtractOptions(workers=2, min_part_mb=0)))
                results["extract_parallel"].append(batch.row_count / secs)
                results["extract_parallel_cpu"].append(cpu)
                counts["extract_parallel"] = batch.row_count
                secs, n = timed(lambda: raw_decode(settings, range_))
                results["raw"].append(n / secs)
                counts["raw"] = n
                secs, n = timed(lambda: mariadb_binlog(settings, range_))
                results["mariadb_binlog"].append(n / secs)
                counts["mariadb_binlog"] = n
                store = open_store(f"file://{tmp}/oltp{i}")
                secs, batch = timed(lambda: extract_range(settings, RangeRequest("bench", oltp), BatchTarget(store),
                                                          one_reader))
                results["oltp_extract"].append(batch.row_count / secs)
                counts["oltp_extract"] = batch.row_count
                secs, n = timed(lambda: raw_decode(settings, oltp))
                results["oltp_raw"].append(n / secs)
                counts["oltp_raw"] = n
                with library_framing():
                    rate, counts["oltp_library_framing"] = extract_rows_per_s(settings, oltp, f"file://{tmp}/oltpf{i}")
                results["oltp_library_framing"].append(rate)
            if args.rss:
                rss = measure_rss(server, settings, tmp)
        finally:
            server.stop()

    med = {k: statistics.median(v) for k, v in results.items()}
    assert (counts["extract"] == counts["extract_python"] == counts["extract_parallel"] == counts["raw"]
            == counts["mariadb_binlog"] == counts["extract_library_framing"]), counts
    assert counts["oltp_extract"] == counts["oltp_raw"] == counts["oltp_library_framing"] == args.oltp_rows, counts
    report = {
        "changed_rows": counts["extract"],
        "extract_rows_per_s": round(med["extract"]),
        "extract_python_decoder_rows_per_s": round(med["extract_python"]),
        "extract_library_framing_rows_per_s": round(med["extract_library_framing"]),
        "native_vs_library_framing": round(med["extract"] / med["extract_library_framing"], 3),
        "raw_decode_rows_per_s": round(med["raw"]),
        "mariadb_binlog_rows_per_s": round(med["mariadb_binlog"]),
        "extract_vs_raw_decode": round(med["extract"] / med["raw"], 3),
        "extract_vs_c_decode": round(med["extract"] / med["mariadb_binlog"], 3),
        "native_vs_python_decoder": round(med["extract"] / med["extract_python"], 3),
        "extract_parallel_rows_per_s": round(med["extract_parallel"]),
        "extract_parallel_speedup": round(med["extract_parallel"] / med["extract"], 3),
        "oltp_rows": args.oltp_rows,
        "extract_oltp_rows_per_s": round(med["oltp_extract"]),
        "raw_decode_oltp_rows_per_s": round(med["oltp_raw"]),
        "extract_oltp_vs_raw_decode": round(med["oltp_extract"] / med["oltp_raw"], 3),
        # the same extract with the events framed by mysql-replication: what the compiled framer gives
        "extract_oltp_library_framing_rows_per_s": round(med["oltp_library_framing"]),
        "oltp_native_vs_library_framing": round(med["oltp_extract"] / med["oltp_library_framing"], 3),
        # CPU seconds of the 2-part read over one reader's: two cores give at most 2 / this
        "extract_parallel_cpu_ratio": round(med["extract_parallel_cpu"] / med["extract_cpu"], 3),
    }
    if args.rss:
        report.update(rss)
    print(f"{'figure':40} {'rows/s':>12}")
    print(f"{'extract (binlog -> Parquet batch)':40} {report['extract_rows_per_s']:>12,}")
    print(f"{'... events framed by mysql-replication':40} {report['extract_library_framing_rows_per_s']:>12,}")
    print(f"{'extract, pure-Python decoder':40} {report['extract_python_decoder_rows_per_s']:>12,}")
    print(f"{'extract, 2 parts at once':40} {report['extract_parallel_rows_per_s']:>12,}")
    print(f"{'raw mysql-replication decode':40} {report['raw_decode_rows_per_s']:>12,}")
    print(f"{'mariadb-binlog -v decode-rows':40} {report['mariadb_binlog_rows_per_s']:>12,}")
    print(f"{'extract, one-row transactions':40} {report['extract_oltp_rows_per_s']:>12,}")
    print(f"{'raw decode, one-row transactions':40} {report['raw_decode_oltp_rows_per_s']:>12,}")
    print(f"{'... events framed by mysql-replication':40} {report['extract_oltp_library_framing_rows_per_s']:>12,}")
    print(f"extract / raw decode = {report['extract_vs_raw_decode']}, / mariadb-binlog = {report['extract_vs_c_decode']}, "
          f"OLTP / raw decode = {report['extract_oltp_vs_raw_decode']}  (median of {args.repeat}, {counts['extract']:,} rows)")
    if args.rss:
        print(f"extract peak RSS: {rss['extract_rss_mb_1m']} MB at 1M rows, {rss['extract_rss_mb_5m']} MB at 5M rows")
        print(f"extract in 2 parts at once, 5M rows: {rss['extract_parallel_speedup_5m']}x one reader, "
              f"{rss['extract_parallel_cpu_ratio_5m']}x its CPU seconds")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
