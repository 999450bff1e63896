"""The merge job: apply one change batch to the follower, exactly once.

    spark-submit --py-files mysql_cdc.zip spark_jobs/merge_batch.py \
        --manifest-uri s3://bucket/root/<pipeline>/batches/<batch id>/manifest.json

or, for a batch the merge task judged to need no Spark (``merge: {spark: when_needed}``), the same
file run by Python alone, its Spark properties as arguments (there is no spark-submit to hold them):

    python spark_jobs/merge_batch.py --without-spark [--conf spark.mysql_cdc.driverNetRows=N] --manifest-uri ...

Secrets (the follower's sink spec with its credentials, the batch store's StorageSpec) come from the JSON file named
by ``MYSQL_CDC_SECRETS_FILE`` (``mysql_cdc.job_secrets.JobSecrets``), never from argv. The pipeline
comes from the manifest. Exit 0 on success, no-op replays included; otherwise 1 with a one-line
error on stderr. ``MYSQL_CDC_CRASH_AT`` is a test hook (``mysql_cdc.crash_points``).

This file only wires steps; what they do is in ``mysql_cdc.merge`` (see its ``merge`` module).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
import warnings
from typing import Sequence

from mysql_cdc.pyspark_path import prefer_installed

prefer_installed()  # before anything imports pyspark: its compiled copy, not spark-submit's zip

from mysql_cdc.merge.errors import MergeError, SparkRefused
from mysql_cdc.merge.report import SUMMARY_ENV, JobOutcome
from mysql_cdc.retry_policy import is_permanent
from mysql_cdc.job_secrets import JobSecrets
from mysql_cdc.merge.netting import DRIVER_NET_ROWS_PROPERTY, driver_net_rows
from mysql_cdc.merge.job import one_line, run_merges
from mysql_cdc.merge.session import PANDAS_WARNING, LazySession, RefusedSession, submitted_property

log = logging.getLogger("mysql_cdc.merge")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="merge_batch.py",
        description="Apply one mysql-cdc change batch to the follower (secrets via $MYSQL_CDC_SECRETS_FILE).",
    )
    parser.add_argument("--manifest-uri", required=True, action="append", dest="manifest_uris",
                        help="s3://... or file://.../manifest.json of the batch; given again, the batches are "
                             "applied in that order (a copy, then its catch-up)")
    parser.add_argument("--without-spark", action="store_true",
                        help="run outside spark-submit: a step that needs Spark stops the job (SparkRefused) "
                             "before it changes anything")
    parser.add_argument("--conf", action="append", default=[], type=_property, metavar="KEY=VALUE",
                        help="with --without-spark: a Spark property of the pipeline's the job reads")
    args = parser.parse_args(argv)
    if args.conf and not args.without_spark:
        parser.error("--conf is for --without-spark; spark-submit holds the properties of a submitted job")
    return args


def _property(text: str) -> tuple[str, str]:
    key, equals, value = text.partition("=")
    if not equals or not key:
        raise argparse.ArgumentTypeError(f"{text!r}: expected KEY=VALUE")
    return key, value


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)  # its INFO is one line per Spark call
    warnings.filterwarnings("ignore", message=PANDAS_WARNING, category=FutureWarning)
    spark = RefusedSession() if args.without_spark else LazySession()
    read_property = dict(args.conf).get if args.without_spark else submitted_property
    outcome = JobOutcome()
    try:
        driver_rows = driver_net_rows(read_property(DRIVER_NET_ROWS_PROPERTY))
        run_merges(spark, args.manifest_uris, JobSecrets.from_env(), outcome.summaries, driver_rows)
        return 0
    except Exception as exc:  # noqa: BLE001 - every failure becomes the one-line error below
        if isinstance(exc, SparkRefused):
            log.info("stopped where Spark was needed", exc_info=True)  # which step: for whoever reads why
        elif not isinstance(exc, (MergeError, ValueError)):
            log.error("merge failed", exc_info=True)  # unexpected: keep the traceback above the line
        outcome.error, outcome.permanent = one_line(exc), is_permanent(exc)
        outcome.spark_refused = isinstance(exc, SparkRefused)
        print(f"merge_batch: error: {outcome.error}", file=sys.stderr)
        return 1
    finally:
        if os.environ.get(SUMMARY_ENV):  # the merge task reads it back for its log, XCom and error
            Path(os.environ[SUMMARY_ENV]).write_text(outcome.to_json())
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())
