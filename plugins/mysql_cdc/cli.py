"""Run capture by hand, without Airflow; and read a pipeline's lag where Airflow runs.

    PYTHONPATH=plugins python -m mysql_cdc.cli position --host 127.0.0.1 --port 3306 --user cdc
    PYTHONPATH=plugins python -m mysql_cdc.cli extract --host … --user cdc --pipeline shop \
        --storage-uri file:///data/cdc --start binlog.000003:4 --end binlog.000003:1146 --include 'shop.*'
    PYTHONPATH=plugins python -m mysql_cdc.cli batches --storage-uri file:///data/cdc --pipeline shop
    PYTHONPATH=plugins python -m mysql_cdc.cli changes --storage-uri file:///data/cdc --pipeline shop \
        --out file:///data/shop-changes [--table 'shop.orders'] [--start FILE:OFFSET] [--end FILE:OFFSET]
    PYTHONPATH=plugins python -m mysql_cdc.cli lag [--pipeline shop] [--json]

Passwords are read from the environment (MYSQL_CDC_LEADER_PASSWORD; AWS_* for s3:// through
boto3's usual chain, AWS_ENDPOINT_URL for MinIO), never from argv. ``lag`` reads the pipelines
file (``$CDC_PIPELINES_FILE``, else the DAGs folder's ``pipelines.yaml``) and the pipelines'
Airflow connections, like the CDC page: run it where Airflow runs (its connections and
``AIRFLOW_CONN_*`` variables); it prints the figures of ``GET /cdc/api/pipelines``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

from .capture.stream.extract import BatchTarget, CaptureError, RangeRequest, extract_range
from .capture.filters import TableFilter
from .capture.leader import Leader, PreflightError
from .contracts import BinlogPosition, InvalidPosition, PositionRange
from .mysql_server import MySQLSettings
from .storage import StorageError, list_batches, open_store


def _leader(args) -> MySQLSettings:
    return MySQLSettings(args.host, args.port, args.user, os.environ.get("MYSQL_CDC_LEADER_PASSWORD", ""))


def _position(args) -> int:
    with Leader(_leader(args)) as leader:
        leader.check_settings()
        print(f"current  {leader.current_position()}")
        print(f"earliest {leader.earliest_position()}")
        print(f"gtid     {leader.current_gtid()}")
    return 0


def _extract(args) -> int:
    settings = _leader(args)
    with Leader(settings) as leader:
        end = BinlogPosition.parse(args.end) if args.end else leader.current_position()
    range_ = PositionRange(BinlogPosition.parse(args.start), end)
    store = open_store(args.storage_uri)
    table_filter = TableFilter(tuple(args.include or ["*.*"]), tuple(args.exclude or []))
    batch = extract_range(settings, RangeRequest(args.pipeline, range_, table_filter), BatchTarget(store))
    if batch is None:
        print(f"empty range {range_}: no batch")
    else:
        print(store.uri_of(f"{batch.prefix}/manifest.json"))
    return 0


def _batches(args) -> int:
    for batch in list_batches(open_store(args.storage_uri), args.pipeline):
        print(f"{batch.batch_id}  [{batch.start}, {batch.end})  {len(batch.segments)} segments  {batch.row_count} rows")
    return 0


def _changes(args) -> int:
    from .change_export import export_changes

    written = export_changes(open_store(args.storage_uri), args.pipeline, open_store(args.out),
                             tuple(args.table or ["*.*"]),
                             BinlogPosition.parse(args.start) if args.start else None,
                             BinlogPosition.parse(args.end) if args.end else None)
    for file in written:
        print(f"{file.uri}  {file.rows} rows")
    if not written:
        print("no change rows in that range", file=sys.stderr)
    return 0


LAG_COLUMNS = ("pipeline", "checkpoint", "leader", "bytes behind", "seconds behind", "last batch", "verification")


def lag_rows(views: list[dict]) -> list[tuple[str, ...]]:
    """One row per pipeline of ``/cdc/api/pipelines``' JSON: what a person reads first."""
    def last_batch(b: dict | None) -> str:
        if b is None:
            return "none yet"
        tries = f", {len(b['failed_tries'])} failed tr{'y' if len(b['failed_tries']) == 1 else 'ies'}" \
            if b.get("failed_tries") else ""
        return f"{b['kind']} {b['status']} ({b['rows_in']:,} rows{tries})"

    def verification(v: dict | None) -> str:
        return "not verified" if v is None else f"{v['status']} at {(v['finished_at'] or '?')[:19]}"

    rows = []
    for view in views:
        if view.get("error"):
            rows.append((view["name"], "?", "?", "?", "?", f"error: {view['error']}", ""))
            continue
        seconds = view["seconds_behind"]
        rows.append((view["name"], view["checkpoint_position"] or "none yet", view["leader_position"] or "?",
                     "?" if view["bytes_behind"] is None else f"{view['bytes_behind']:,}",
                     "?" if seconds is None else f"{seconds:,.1f}", last_batch(view["last_batch"]),
                     verification(view["verification"])))
    return rows


def format_table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(str(x)) for x in column) for column in zip(header, *rows)]
    line = lambda row: "  ".join(str(x).ljust(w) for x, w in zip(row, widths)).rstrip()  # noqa: E731
    return "\n".join([line(header), line(tuple("-" * w for w in widths)), *map(line, rows)])


def _log_to_stderr() -> None:
    """The product's log lines on stderr, whatever logging importing Airflow set up (its handlers
    write to stdout): stdout is the command's output, ``--json`` included."""
    logger = logging.getLogger("mysql_cdc")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logger.handlers, logger.propagate, logger.disabled = [handler], False, False


def _lag(args) -> int:
    # the same code as the CDC page and GET /cdc/api/pipelines: the same figures
    from .ui.data import configured_pipelines, read_pipeline

    _log_to_stderr()  # after the import: Airflow configures logging when it is imported

    configs = [c for c in configured_pipelines() if args.pipeline in (None, c.name)]
    if not configs:
        raise ValueError(f"no pipeline named {args.pipeline!r} in the pipelines file")
    views = [read_pipeline(c).to_json() for c in configs]
    if args.json:
        print(json.dumps(views if args.pipeline is None else views[0], indent=2, sort_keys=True))
    else:
        print(format_table(LAG_COLUMNS, lag_rows(views)))
    return 1 if any(v.get("error") for v in views) else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mysql_cdc.cli", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    def leader_args(p):
        p.add_argument("--host", required=True)
        p.add_argument("--port", type=int, default=3306)
        p.add_argument("--user", required=True)

    p = sub.add_parser("position", help="the leader's current and earliest binlog positions")
    leader_args(p)
    p.set_defaults(run=_position)
    p = sub.add_parser("extract", help="extract [start, end) into one change batch")
    leader_args(p)
    p.add_argument("--pipeline", required=True)
    p.add_argument("--storage-uri", required=True)
    p.add_argument("--start", required=True, help="FILE:OFFSET")
    p.add_argument("--end", help="FILE:OFFSET (default: the leader's current position)")
    p.add_argument("--include", action="append", help="db.table glob (repeatable)")
    p.add_argument("--exclude", action="append", help="db.table glob (repeatable)")
    p.set_defaults(run=_extract)
    p = sub.add_parser("batches", help="list a pipeline's committed batches")
    p.add_argument("--pipeline", required=True)
    p.add_argument("--storage-uri", required=True)
    p.set_defaults(run=_batches)
    p = sub.add_parser("changes", help="a pipeline's change rows as plain Parquet, one file per table and segment "
                                       "(mysql_cdc.change_export)")
    p.add_argument("--pipeline", required=True)
    p.add_argument("--storage-uri", required=True, help="where the pipeline's batches are")
    p.add_argument("--out", required=True, help="a file:// or s3:// location for the Parquet files")
    p.add_argument("--table", action="append", help="db.table glob (repeatable; default: all)")
    p.add_argument("--start", help="FILE:OFFSET (default: the first batch)")
    p.add_argument("--end", help="FILE:OFFSET (default: the last batch)")
    p.set_defaults(run=_changes)
    p = sub.add_parser("lag", help="how far behind each pipeline is (the figures of GET /cdc/api/pipelines)")
    p.add_argument("--pipeline", help="one pipeline of the pipelines file (default: all)")
    p.add_argument("--json", action="store_true", help="the API's JSON instead of a table")
    p.set_defaults(run=_lag)

    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        return args.run(args)
    except (PreflightError, CaptureError, InvalidPosition, StorageError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
