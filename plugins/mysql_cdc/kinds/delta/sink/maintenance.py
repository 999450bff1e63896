"""Small files and old files of a Delta Lake follower: ``OPTIMIZE`` (compaction) and ``VACUUM`` of
every table of the pipeline's consistent cut, of their changelog tables and of the pipeline's state
tables.

Every MERGE adds small files (and deletion vectors); compaction rewrites them into few large ones in
a commit that changes no row (readers at any version see the same rows). ``VACUUM`` deletes files
no version within ``retain_hours`` needs. The cut must stay readable: a table whose latest version
is past the cut's (a merge committed it and has not moved the state row yet, or is being retried)
may need files a newer commit removed, so such a table is compacted but not vacuumed this time.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass

from pyspark.sql import SparkSession

from ..state.location import LakeLocation
from ..state.tables import CHECKPOINT, CHECKPOINT_INTERVAL, FAILED_TRIES, HISTORY, VERIFICATION, StateTables
from .tables import DeltaTableRef

log = logging.getLogger("mysql_cdc.maintenance")

MIN_RETAIN_HOURS = 1.0  # below it a reader of an older state version loses its files mid-read
_DELTA_DEFAULT_RETAIN_HOURS = 168.0  # Delta refuses less unless its safety check is turned off
# VACUUM lists a table's files in `parallelPartitionDiscovery.parallelism` tasks (Spark's default:
# 10,000) and joins them with the log's files over `shuffle.partitions` (200); OPTIMIZE shuffles
# too. For a CDC lake's many small tables that is thousands of empty tasks per table: a 3-file
# table took 80-95 s to vacuum on 2 cores, 6-9 s with both at 2x the cores. A pipeline's own
# spark_conf (given to spark-submit) keeps its values.
_SIZED_TO_THE_CORES = ("spark.sql.sources.parallelPartitionDiscovery.parallelism", "spark.sql.shuffle.partitions")


@dataclass
class TableMaintenance:
    table: str
    files_before: int
    files_after: int
    vacuumed: bool
    why_not: str = ""


def file_count(spark: SparkSession, table: DeltaTableRef) -> int:
    return spark.sql(f"DESCRIBE DETAIL {table.sql}").first()["numFiles"]


def maintain_lake(spark: SparkSession, location: LakeLocation, pipeline: str, retain_hours: float,
                  latest_version) -> list[TableMaintenance]:
    """Compact and vacuum every table of the pipeline's cut and its state tables.
    ``latest_version(database, table)``: the table's latest Delta version (read with delta-rs)."""
    if retain_hours < MIN_RETAIN_HOURS:
        raise ValueError(f"retain_hours {retain_hours:g} is below {MIN_RETAIN_HOURS:g}: readers of the lake "
                         "(and of its older consistent cuts) would lose files while they read")
    if retain_hours < _DELTA_DEFAULT_RETAIN_HOURS:
        spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    _size_to_the_cores(spark)
    state = StateTables(location).read_state(pipeline)
    if state is None:
        raise LookupError(f"pipeline {pipeline!r} has no state at {location.state_uri(pipeline, CHECKPOINT)}")
    done = []
    for name, version in sorted(state.versions.items()):
        database, table = name.split(".", 1)
        ref = DeltaTableRef(name, location.spark_path(location.table_uri(database, table)))
        ahead = latest_version(database, table) > version
        done.append(_maintain(spark, ref, retain_hours,
                              f"a commit past the cut's version {version} awaits its state row" if ahead else ""))
    # The state tables, and the changelog tables of the cut's tables (append-only: any version of
    # them reads the same rows up to the cut's position, so they are vacuumed like the state).
    others = [DeltaTableRef(f"_mysql_cdc.{pipeline}.{name}", location.spark_path(location.state_uri(pipeline, name)))
              for name in (CHECKPOINT, HISTORY, FAILED_TRIES, VERIFICATION)]
    others += [DeltaTableRef(f"changelog of {name}", location.spark_path(location.changelog_uri(pipeline, *name.split(".", 1))))
               for name in sorted(state.versions)]
    for ref in others:
        try:
            done.append(_maintain(spark, ref, retain_hours, ""))
        except Exception as exc:  # noqa: BLE001 - a record table not written yet, a table without a changelog
            if "DELTA_MISSING_DELTA_TABLE" not in str(exc) and "is not a Delta table" not in str(exc):
                raise
    return done


def _checkpoint_often(spark: SparkSession, ref: DeltaTableRef) -> None:
    """A table created before the lake's tables had ``tables.CHECKPOINT_INTERVAL`` gets it (one
    metadata commit, once)."""
    interval = spark.sql(f"SHOW TBLPROPERTIES {ref.sql} ('delta.checkpointInterval')").first()[1]
    if interval != CHECKPOINT_INTERVAL:
        spark.sql(f"ALTER TABLE {ref.sql} SET TBLPROPERTIES ('delta.checkpointInterval' = '{CHECKPOINT_INTERVAL}')")


def _size_to_the_cores(spark: SparkSession) -> None:
    submitted = spark.sparkContext.getConf()
    tasks = str(2 * spark.sparkContext.defaultParallelism)
    for key in _SIZED_TO_THE_CORES:
        if not submitted.contains(key):
            spark.conf.set(key, tasks)


def _maintain(spark: SparkSession, ref: DeltaTableRef, retain_hours: float, keep_files: str) -> TableMaintenance:
    before = file_count(spark, ref)
    _checkpoint_often(spark, ref)
    spark.sql(f"OPTIMIZE {ref.sql}")
    if not keep_files:
        spark.sql(f"VACUUM {ref.sql} RETAIN {retain_hours:g} HOURS")
    result = TableMaintenance(ref.name, before, file_count(spark, ref), not keep_files, keep_files)
    log.info("maintained %s: %s", ref.name, asdict(result))
    return result
