"""`make bench`: every figure of docs/performance.md in one run, with its side-by-side reference.

Runs the sub-benchmarks (each prints a JSON object as its last line), merges their figures,
prints one table and writes bench/results/latest.json (+ a timestamped copy). Ratios (ours /
reference, measured in the same run) are the headline: absolute numbers move with machine load.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"

ROWS = [
    # (figure, ours key, reference key, reference label, ratio key, target)
    ("extract rows/s (binlog -> Parquet batch, compiled decoder)", "extract_rows_per_s", "raw_decode_rows_per_s",
     "raw mysql-replication decode", "extract_vs_raw_decode", ">= 10"),
    ("", None, "mariadb_binlog_rows_per_s", "mariadb-binlog -v decode-rows", "extract_vs_c_decode", ">= 1.0"),
    ("", None, "extract_library_framing_rows_per_s", "the same, events framed by mysql-replication",
     "native_vs_library_framing", ""),
    ("", None, "extract_python_decoder_rows_per_s", "extract with the pure-Python decoder",
     "native_vs_python_decoder", ""),
    ("extract rows/s, one-row transactions (OLTP)", "extract_oltp_rows_per_s", "raw_decode_oltp_rows_per_s",
     "raw mysql-replication decode", "extract_oltp_vs_raw_decode", ">= 5"),
    ("", None, "extract_oltp_library_framing_rows_per_s", "the same, events framed by mysql-replication",
     "oltp_native_vs_library_framing", ""),
    ("extract rows/s, range read in 2 parts at once", "extract_parallel_rows_per_s", "extract_rows_per_s",
     "one reader", "extract_parallel_speedup", ">= 1.7"),
    ("... of the 5M-row range", None, None, "one reader", "extract_parallel_speedup_5m", ">= 1.7"),
    ("... CPU seconds of the 2 parts / one reader's, 1M rows", None, None, "",
     "extract_parallel_cpu_ratio", "2 / this: the most 2 cores give"),
    ("... CPU seconds of the 2 parts / one reader's, 5M rows", None, None, "",
     "extract_parallel_cpu_ratio_5m", "2 / this: the most 2 cores give"),
    ("snapshot copy, 2 workers vs 1 (s)", "snapshot_copy_s", "snapshot_copy_1_worker_s", "one worker",
     "snapshot_copy_parallel_speedup", ""),
    ("extract peak RSS MB at 1M / 5M rows", "extract_rss_mb_1m", "extract_rss_mb_5m", "at 5M rows",
     "rss_5m_vs_1m", "<= 1.1"),
    ("merge rows/s, 1M-row batch", "merge_rows_per_s", "load_data_rows_per_s", "LOAD DATA LOCAL INFILE",
     "merge_vs_load_data", ">= 0.6"),
    ("merge of 100k change rows over 1,000 tables (s)", "merge_1000_tables_seconds", "merge_1_tables_seconds",
     "the same rows in one table", "merge_tables_growth", "<= 3"),
    ("... the follower's own CPU in that merge (s)", "merge_1000_tables_follower_cpu_seconds", "merge_1_tables_seconds",
     "the one-table merge", "merge_tables_follower_floor", "the growth's floor"),
    ("... the same, batches on S3 (moto's server) (s)", "merge_1000_tables_seconds_s3", "merge_1_tables_seconds_s3",
     "the same rows in one table, on S3", "merge_tables_growth_s3", "<= 3"),
    ("... the same, tables keyed by BINARY(16) (s)", "merge_1000_tables_seconds_binary_key",
     "merge_1_tables_seconds_binary_key", "the same rows in one table", "merge_tables_growth_binary_key", ""),
    ("... capture of the 1,000 tables' changes, on S3 (s)", "extract_1000_tables_seconds_s3",
     "extract_1_tables_seconds_s3", "the same rows in one table", "extract_tables_growth_s3", ""),
    ("... its change rows exported as plain Parquet, on S3 (s)", "export_1000_tables_seconds_s3",
     "extract_1000_tables_seconds_s3", "the capture of the same changes", "export_vs_extract_s3", ""),
    ("largest seconds behind, 5 min of small transactions, deployed Airflow", "lag_under_load", None,
     "", None, "<= 120 s"),
    ("... the same, schedule @continuous", "lag_under_load_continuous", None, "", None, "<= 30 s"),
    ("... the same, @continuous, merge: {spark: when_needed}", "lag_under_load_continuous_without_spark", None, "",
     None, "<= 30 s"),
    ("... the same into a Delta follower on S3, every minute", "delta_lag_under_load", None, "", None, "<= 120 s"),
    ("... the same into a Delta follower on S3, @continuous", "delta_lag_under_load_continuous", None, "", None,
     "<= 60 s"),
    ("one row, the leader's commit -> the follower's checkpoint, deployed, @continuous (s)", "fixed_cost_applied_s",
     None, "", None, "lower is better"),
    ("... the merge task of it (s)", "fixed_cost_merge_s", "fixed_cost_merge_work_s", "the merge job's own work", None,
     ""),
    ("... the same, merge: {spark: when_needed} (s)", "fixed_cost_without_spark_applied_s", None, "", None,
     "lower is better"),
    ("... the merge task of it, without spark-submit (s)", "fixed_cost_without_spark_merge_s",
     "fixed_cost_without_spark_merge_work_s", "the merge job's own work", None, ""),
    ("... the sensor's detection of it (s)", "fixed_cost_detect_s", None, "", None, ""),
    ("scheduled run, tiny batch (s)", "tiny_run_s", "bare_spark_submit_s", "bare spark-submit",
     "tiny_run_minus_spark_submit_s", "<= +15 s"),
    ("scheduled run, nothing new (s)", "nochange_run_s", None, "", None, "<= 10 s"),
    ("... tiny batch, merge: {spark: when_needed} (s)", "tiny_run_without_spark_s", "bare_spark_submit_without_spark_s",
     "bare spark-submit", None, "lower is better"),
    ("snapshot rows/s, leader -> follower end to end", "snapshot_rows_per_s", "dump_rows_per_s",
     "mariadb-dump --single-transaction | mariadb", "snapshot_vs_dump", ">= 1.5"),
    ("range applied end to end (s): extract + merge", "e2e_s", "e2e_replica_apply_s",
     "a MariaDB replica, START SLAVE UNTIL", "e2e_vs_replica", "<= 2.5"),
    ("... merge: {spark: when_needed} (no spark-submit) (s)", "e2e_without_spark_s",
     "e2e_without_spark_replica_apply_s",
     "a MariaDB replica, START SLAVE UNTIL", "e2e_without_spark_vs_replica", "<= 2.5"),
    ("snapshot copy peak RSS MB at 1M / 5M rows", "snapshot_rss_mb_1m", "snapshot_rss_mb_5m", "at 5M rows",
     "snapshot_rss_5m_vs_1m", "<= 1.1"),
    ("Delta follower: 1M-change batch merged (rows/s)", "delta_merge_rows_per_s", "delta_append_rows_per_s",
     "plain Spark append of the same net rows", "delta_merge_vs_append", ">= 0.5"),
    ("Delta follower: 10k changes into a 5M-row table (s)", "delta_merge_big_table_s", "delta_merge_small_table_s",
     "the same batch into a 50k-row table", "delta_merge_growth", "<= 3"),
    ("... both tables merged by Spark's MERGE (s)", "delta_merge_big_table_by_spark_s",
     "delta_merge_small_table_by_spark_s", "the same batch into a 50k-row table, by Spark",
     "delta_merge_growth_spark_alone", ""),
    ("Delta follower: one-row batch, spark-submit (s)", "delta_tiny_run_s", "delta_bare_spark_submit_s",
     "bare spark-submit with the Delta jars", "delta_tiny_run_minus_spark_submit_s", "<= +15 s"),
    ("Iceberg follower: 1M-change batch merged (rows/s)", "iceberg_merge_rows_per_s", "iceberg_append_rows_per_s",
     "pyiceberg's append of the same net rows", "iceberg_merge_vs_append", ">= 0.5"),
    ("Iceberg follower: 10k changes into a 5M-row table (s)", "iceberg_merge_big_table_s",
     "iceberg_merge_small_table_s", "the same batch into a 50k-row table", "iceberg_merge_growth", "<= 3"),
    ("Iceberg follower: one-row batch, spark-submit (s)", "iceberg_tiny_run_s", "iceberg_bare_spark_submit_s",
     "bare spark-submit", "iceberg_tiny_run_minus_spark_submit_s", "<= +15 s"),
    ("Delta follower: 200k changes into a 1M-row soft_deletes table (s)", "delta_soft_deletes_merge_s",
     "delta_plain_merge_s", "the same batch into a plain table", "delta_soft_deletes_vs_plain", ""),
    ("... into a history (SCD type 2) table (s)", "delta_history_merge_s", "delta_plain_merge_s",
     "the same batch into a plain table", "delta_history_vs_plain", ""),
    ("Iceberg follower: 200k changes into a 1M-row soft_deletes table (s)", "iceberg_soft_deletes_merge_s",
     "iceberg_plain_merge_s", "the same batch into a plain table", "iceberg_soft_deletes_vs_plain", ""),
    ("... into a history (SCD type 2) table (s)", "iceberg_history_merge_s", "iceberg_plain_merge_s",
     "the same batch into a plain table", "iceberg_history_vs_plain", ""),
    ("Delta follower on S3: 100k change rows over 1,000 tables (s)", "delta_merge_1000_tables_seconds",
     "delta_merge_1_tables_seconds", "the same rows in one table", "delta_tables_growth", "<= 3"),
    ("... the least requests of any Delta writer for 1,000 tables, on the same S3 (s)", "delta_tables_request_floor_s",
     "delta_merge_1_tables_seconds", "the same rows in one table (with the requests added)",
     "delta_tables_growth_floor", ""),
    ("Delta follower on S3: 50 tables x 20 change rows (s)", "delta_small_batch_s", "mysql_small_batch_s",
     "the same batch into a MySQL follower", "delta_small_batch_vs_mysql", "<= 3"),
    ("... the same rows in 3 row segments split by DDL on other tables (s)", "delta_ddl_between_s",
     "delta_small_batch_s", "the same rows in one segment", "delta_ddl_between_vs_one_segment", ""),
    ("... the same two, the lake on the local file system (s)", "delta_merge_1000_tables_seconds_file_lake",
     "delta_merge_1_tables_seconds_file_lake", "the same rows in one table", "delta_tables_growth_file_lake", ""),
    ("", "delta_small_batch_s_file_lake", "mysql_small_batch_s_file_lake", "the same batch into a MySQL follower",
     "delta_small_batch_vs_mysql_file_lake", ""),
]


def run_child(args: list[str]) -> dict:
    print(f"$ {' '.join(args)}", flush=True)
    out = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True)
    sys.stdout.write(out.stdout)
    if out.returncode != 0:
        sys.stderr.write(out.stderr[-4000:])
        raise SystemExit(f"{args[0]} failed with exit code {out.returncode}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{os.cpu_count()} cores {cpu}, {mem_gb:.0f} GiB, {platform.system()} {platform.release()}, Python {platform.python_version()}"


def table(results: dict) -> str:
    lines = ["| figure | ours | reference | ratio / delta | target |", "|---|---|---|---|---|"]
    for figure, ours, ref, ref_label, ratio, target in ROWS:
        ours_v = f"{results[ours]:,}" if ours and ours in results else ""
        ref_v = f"{results[ref]:,} ({ref_label})" if ref and ref in results else ""
        ratio_v = f"{results[ratio]}" if ratio and ratio in results else ""
        lines.append(f"| {figure} | {ours_v} | {ref_v} | {ratio_v} | {target} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    # throughput does not depend on the range size past the first seconds; RSS runs 1M and 5M anyway
    parser.add_argument("--extract-rows", type=int, default=1_000_000)
    parser.add_argument("--merge-rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--snapshot-rows", type=int, default=5_000_000)
    parser.add_argument("--replica-rows", type=int, default=1_000_000)
    parser.add_argument("--delta-big-rows", type=int, default=5_000_000)
    parser.add_argument("--lag-minutes", type=float, default=5.0, help="how long bench_lag's writer writes")
    parser.add_argument("--tables-rows", type=int, default=100_000, help="change rows spread over 1/100/1000 tables")
    parser.add_argument("--quick", action="store_true", help="small sizes, one repetition (a smoke run)")
    args = parser.parse_args()
    if args.quick:
        args.extract_rows, args.merge_rows, args.repeat, args.snapshot_rows, args.replica_rows = (
            50_000, 50_000, 1, 100_000, 100_000)
        args.delta_big_rows, args.tables_rows, args.lag_minutes = 500_000, 20_000, 1.5

    results: dict = {"machine": machine(), "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
    extract_args = ["bench/bench_extract.py", "--rows", str(args.extract_rows), "--repeat", str(args.repeat)]
    if args.quick:
        extract_args += ["--oltp-rows", "5000"]
    if not args.quick:
        extract_args.append("--rss")
    results.update(run_child(extract_args))
    results.update(run_child(["bench/bench_merge.py", "--rows", str(args.merge_rows), "--repeat", str(args.repeat)]))
    results.update(run_child(["bench/bench_tables.py", "--rows", str(args.tables_rows), "--repeat", str(args.repeat)]))
    # the same on S3, as a deployed pipeline keeps its batches (every object a request): 1 and 1,000 tables
    results.update(run_child(["bench/bench_tables.py", "--rows", str(args.tables_rows), "--repeat", str(args.repeat),
                              "--tables", "1,1000", "--store", "s3"]))
    # tables keyed by BINARY(16), as OLTP schemas keep UUIDs: 1 and 1,000 tables
    results.update(run_child(["bench/bench_tables.py", "--rows", str(args.tables_rows), "--repeat", str(args.repeat),
                              "--tables", "1,1000", "--key", "binary16"]))
    results.update(run_child(["bench/bench_runs.py", "--repeat", str(args.repeat)]))
    results.update(run_child(["bench/bench_runs.py", "--repeat", str(args.repeat), "--merge-spark", "when_needed"]))
    for merge_spark in ("always", "when_needed"):
        results.update(run_child(["bench/bench_fixed_costs.py", "--repeat", str(max(args.repeat, 5)),
                                  "--merge-spark", merge_spark]))
    snapshot_args = ["bench/bench_snapshot.py", "--rows", str(args.snapshot_rows), "--repeat", str(args.repeat)]
    results.update(run_child(snapshot_args + ([] if args.quick else ["--rss"])))
    for merge_spark in ("always", "when_needed"):
        results.update(run_child(["bench/bench_replica.py", "--rows", str(args.replica_rows), "--repeat",
                                  str(args.repeat), "--merge-spark", merge_spark]))
    results.update(run_child(["bench/bench_lag.py", "--minutes", str(args.lag_minutes)]))
    results.update(run_child(["bench/bench_lag.py", "--minutes", str(args.lag_minutes), "--continuous"]))
    results.update(run_child(["bench/bench_lag.py", "--minutes", str(args.lag_minutes), "--continuous",
                              "--merge-spark", "when_needed"]))
    for schedule in ([], ["--continuous"]):
        results.update(run_child(["bench/bench_lag.py", "--minutes", str(args.lag_minutes), "--follower", "delta",
                                  *schedule]))
    delta_args = ["bench/bench_delta.py", "--rows", str(args.merge_rows), "--big", str(args.delta_big_rows)]
    results.update(run_child(delta_args))
    results.update(run_child(["bench/bench_iceberg.py", "--rows", str(args.merge_rows), "--big", str(args.delta_big_rows)]))
    results.update(run_child(["bench/bench_history_modes.py", "--rows", str(args.merge_rows),
                              "--repeat", str(args.repeat)]))
    results.update(run_child(["bench/bench_delta_tables.py", "--rows", str(args.tables_rows),
                              "--repeat", str(args.repeat)]))
    # the same with the lake on the local file system: what the object store's requests cost
    results.update(run_child(["bench/bench_delta_tables.py", "--rows", str(args.tables_rows),
                              "--repeat", str(args.repeat), "--lake", "file"]))
    if "snapshot_rss_mb_5m" in results:
        results["snapshot_rss_5m_vs_1m"] = round(results["snapshot_rss_mb_5m"] / results["snapshot_rss_mb_1m"], 3)
    if "extract_rss_mb_1m" in results:
        results["rss_5m_vs_1m"] = round(results["extract_rss_mb_5m"] / results["extract_rss_mb_1m"], 3)
    if "extract_1_tables_seconds_s3" in results:
        results["extract_tables_growth_s3"] = round(
            results["extract_1000_tables_seconds_s3"] / results["extract_1_tables_seconds_s3"], 2)
    if "export_1000_tables_seconds_s3" in results:
        results["export_vs_extract_s3"] = round(
            results["export_1000_tables_seconds_s3"] / results["extract_1000_tables_seconds_s3"], 2)
    if "tiny_run_s" in results:
        results["tiny_run_minus_spark_submit_s"] = round(results["tiny_run_s"] - results["bare_spark_submit_s"], 1)

    RESULTS.mkdir(parents=True, exist_ok=True)
    body = json.dumps(results, indent=1, sort_keys=True) + "\n"
    (RESULTS / "latest.json").write_text(body)
    (RESULTS / f"{results['date'].replace(':', '')}.json").write_text(body)
    print()
    print(f"machine: {results['machine']}")
    print(table(results))
    print(f"\nwritten: {RESULTS / 'latest.json'}")


if __name__ == "__main__":
    main()
