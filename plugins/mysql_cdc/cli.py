"""Run capture by hand, without Airflow.

    PYTHONPATH=plugins python -m mysql_cdc.cli position --host 127.0.0.1 --port 3306 --user cdc
    PYTHONPATH=plugins python -m mysql_cdc.cli extract --host … --user cdc --pipeline shop \
        --storage-uri file:///data/cdc --start binlog.000003:4 --end binlog.000003:1146 --include 'shop.*'
    PYTHONPATH=plugins python -m mysql_cdc.cli batches --storage-uri file:///data/cdc --pipeline shop

Passwords are read from the environment (MYSQL_CDC_LEADER_PASSWORD; AWS_* for s3:// through
boto3's usual chain, AWS_ENDPOINT_URL for MinIO), never from argv.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from .capture.extract import CaptureError, extract_range
from .capture.filters import TableFilter
from .capture.leader import Leader, PreflightError
from .contracts import BinlogPosition, InvalidPosition, PositionRange
from .settings import MySQLSettings
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
    batch = extract_range(settings, store, args.pipeline, range_, TableFilter(tuple(args.include or ["*.*"]),
                                                                             tuple(args.exclude or [])))
    if batch is None:
        print(f"empty range {range_}: no batch")
    else:
        print(store.uri_of(f"{batch.prefix}/manifest.json"))
    return 0


def _batches(args) -> int:
    for batch in list_batches(open_store(args.storage_uri), args.pipeline):
        print(f"{batch.batch_id}  [{batch.start}, {batch.end})  {len(batch.segments)} segments  {batch.row_count} rows")
    return 0


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

    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        return args.run(args)
    except (PreflightError, CaptureError, InvalidPosition, StorageError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
