"""What the merge job of a Delta Lake follower needs from spark-submit: the jars ``make jars``
fetched into the project (Delta for Spark 4.2, Hadoop's S3A; pinned in ``mk/spark-jars.txt``) and
the two properties that turn Delta on in the session. Plain Python: the merge task asks it before
Spark starts. ``MYSQL_CDC_JARS_DIR`` names another directory (a deployment's copy of the jars)."""

from __future__ import annotations

import os
from pathlib import Path

from ..base import SubmitNeeds

JARS_ENV = "MYSQL_CDC_JARS_DIR"
DELTA_CONF = (
    ("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension"),
    ("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog"),
    # Delta rebuilds a table's state from its log in this many tasks before each MERGE; its default
    # (50) is sized for huge logs, and for the small, frequent commits of a CDC merge the tasks'
    # overhead is most of a small table's MERGE. A pipeline's spark_conf overrides it.
    ("spark.databricks.delta.snapshotPartitions", "4"),
)


def jars_dir() -> Path:
    configured = os.environ.get(JARS_ENV)
    if configured:
        return Path(configured)
    return Path(__file__).resolve().parents[4] / ".local" / "jars"


def delta_jars() -> tuple[str, ...]:
    directory = jars_dir()
    jars = tuple(sorted(str(p) for p in directory.glob("*.jar")))
    if not any(Path(j).name.startswith("delta-spark_") for j in jars):
        raise FileNotFoundError(
            f"no Delta Lake jars in {directory}: run `make jars` in the project (it fetches them from Maven "
            f"Central, pinned in mk/spark-jars.txt), or set {JARS_ENV} to a directory holding them")
    return jars


def submit_needs() -> SubmitNeeds:
    return SubmitNeeds(jars=delta_jars(), conf=DELTA_CONF)
