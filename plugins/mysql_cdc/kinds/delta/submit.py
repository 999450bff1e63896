"""What the merge job of a Delta Lake follower needs from spark-submit: the jars fetched into the
project for the Spark line the job is submitted to (Delta for that line, Hadoop's S3A matching its
Hadoop; pinned in ``mk/spark-lines/<line>.txt``, fetched by ``make jars`` for the default line and
``make spark-line SPARK=<line>`` for the others) and the properties that turn Delta on in the
session. Plain Python: the merge task asks it before Spark starts. ``MYSQL_CDC_JARS_DIR`` names
another directory (a deployment's copy of the jars, one ``spark-<line>`` directory per line)."""

from __future__ import annotations

import os
from pathlib import Path

from ...spark_lines import DEFAULT_LINE
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


def jars_dir(line: str) -> Path:
    """Where the jars for Spark ``line`` are: ``<MYSQL_CDC_JARS_DIR or .local/jars>/spark-<line>``."""
    configured = os.environ.get(JARS_ENV)
    root = Path(configured) if configured else Path(__file__).resolve().parents[4] / ".local" / "jars"
    return root / f"spark-{line}"


def delta_jars(line: str) -> tuple[str, ...]:
    directory = jars_dir(line)
    jars = tuple(sorted(str(p) for p in directory.glob("*.jar")))
    if not any(Path(j).name.startswith(f"delta-spark_{line}_") for j in jars):
        fetch = "make jars" if line == DEFAULT_LINE else f"make spark-line SPARK={line}"
        raise FileNotFoundError(
            f"no Delta Lake jars for Spark {line} in {directory}: run `{fetch}` in the project (it fetches "
            f"them from Maven Central, pinned in mk/spark-lines/{line}.txt), or set {JARS_ENV} to a directory "
            f"holding spark-{line}/")
    return jars


def submit_needs(line: str) -> SubmitNeeds:
    return SubmitNeeds(jars=delta_jars(line), conf=DELTA_CONF)
