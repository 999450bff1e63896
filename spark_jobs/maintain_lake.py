"""The lake maintenance job: compact and vacuum a Delta Lake follower's tables.

    spark-submit --jars <the Delta jars> --py-files mysql_cdc.zip spark_jobs/maintain_lake.py \
        --pipeline shop_lake --retain-hours 168

The follower (a Delta Lake location and its credentials) comes from the JSON file named by
``MYSQL_CDC_SECRETS_FILE`` (``mysql_cdc.job_secrets.JobSecrets``), never from argv. Prints one line
``maintenance summary [...]`` per run; exit 1 with a one-line error otherwise. What it does and why
it never breaks the consistent cut: ``mysql_cdc.kinds.delta.sink.maintenance``.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from dataclasses import asdict
from typing import Sequence

from mysql_cdc.pyspark_path import prefer_installed

prefer_installed()  # before anything imports pyspark: its compiled copy, not spark-submit's zip

from mysql_cdc.job_secrets import JobSecrets
from mysql_cdc.merge.job import one_line
from mysql_cdc.merge.session import start_spark


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="maintain_lake.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--pipeline", required=True)
    parser.add_argument("--retain-hours", type=float, required=True)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    spark = None
    try:
        follower = JobSecrets.from_env().sink
        if not follower.follower_kind.maintained:
            raise ValueError(f"a {follower.kind} follower has no maintenance job; only a lake's pipeline has one")
        spark = start_spark()
        done = follower.follower_kind.maintain(spark, follower.settings, args.pipeline, args.retain_hours)
        print(f"maintenance summary {json.dumps([asdict(d) for d in done])}", file=sys.stderr)
        return 0
    except Exception as exc:  # noqa: BLE001 - every failure becomes the one-line error below
        print(f"maintain_lake: error: {one_line(exc)}", file=sys.stderr)
        return 1
    finally:
        if spark is not None:
            spark.stop()


if __name__ == "__main__":
    sys.exit(main())
