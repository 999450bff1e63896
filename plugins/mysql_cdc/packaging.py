"""What ``spark-submit`` needs to run the merge job with the same contract code as the Airflow side.

``build_py_files`` zips this very package (``mysql_cdc``) for ``--py-files``: the job imports the
contracts from the zip, so there is one definition of each, shipped with every submit.
``driver_java_options`` adds the driver JVM's defaults to the submit's Spark properties.
"""

from __future__ import annotations

import compileall
import importlib.util
import os
import py_compile
import zipfile
from pathlib import Path
from typing import Any, Mapping

from .spark_lines import DEFAULT_LINE

PACKAGE_DIR = Path(__file__).resolve().parent
# spark_jobs/ sits beside plugins/ in the repository and in the docker-compose mounts;
# deployments that place it elsewhere set MYSQL_CDC_SPARK_JOBS_DIR.
SPARK_JOBS_DIR = Path(os.environ.get("MYSQL_CDC_SPARK_JOBS_DIR", PACKAGE_DIR.parent.parent / "spark_jobs"))
MERGE_JOB = SPARK_JOBS_DIR / "merge_batch.py"
MAINTAIN_JOB = SPARK_JOBS_DIR / "maintain_lake.py"
# The driver JVM's class-data archive (``scripts/spark_cds.py``, written by ``make setup``): used by
# every submit when it exists. Deployments that write it elsewhere set MYSQL_CDC_SPARK_CDS_ARCHIVE.
SPARK_CDS_ARCHIVE = Path(os.environ.get("MYSQL_CDC_SPARK_CDS_ARCHIVE",
                                        PACKAGE_DIR.parent.parent / ".local" / "spark" / "driver.jsa"))
LAUNCHER_OPTS_ENV = "SPARK_LAUNCHER_OPTS"  # spark-class passes it to the launcher JVM's command line


def launcher_archive(driver_archive: Path) -> Path:
    """The class-data archive of the launcher JVM that spark-submit starts first to build the
    driver's command line (``org.apache.spark.launcher.Main``): beside the driver's archive, written
    by the same run of ``scripts/spark_cds.py``."""
    return driver_archive.with_name("launcher.jsa")


SPARK_LAUNCHER_CDS_ARCHIVE = launcher_archive(SPARK_CDS_ARCHIVE)


def build_py_files(dest_dir: str | os.PathLike, package_dir: Path = PACKAGE_DIR) -> str:
    """Zip the ``mysql_cdc`` package (``package_dir``) into ``dest_dir``; returns the zip's path.

    Each module goes with its bytecode (``bytecode``) beside it as ``<module>.pyc``, which zipimport
    reads in place of compiling the source: it writes no bytecode cache of its own, so a zip of
    sources is compiled afresh by every driver and Python worker at each start (0.57-0.76 s against
    0.41-0.52 s to import the merge's modules here). A Python of another version (a cluster's)
    finds the bytecode's magic number not its own and compiles the source, as before."""
    dest = Path(dest_dir) / "mysql_cdc.zip"
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(package_dir.rglob("*.py")):
            name = Path("mysql_cdc") / path.relative_to(package_dir)
            zf.write(path, name)
            code = bytecode(path)
            if code is not None:
                zf.writestr(str(name.with_suffix(".pyc")), code, zipfile.ZIP_STORED)
    return str(dest)


def bytecode(source: Path) -> bytes | None:
    """The module's bytecode as this interpreter's import system caches it (``__pycache__``), compiled
    there first when missing or stale (``compileall``'s check of the source's time and size: the
    same check zipimport makes against the zipped source). That cache is what keeps a merge task's
    zip from compiling every module each time (0.36 s for the whole package here). None when the
    cache cannot be written (a read-only deployment): the zip then carries the source alone."""
    if not compileall.compile_file(str(source), quiet=2, invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP):
        return None
    try:
        return Path(importlib.util.cache_from_source(str(source))).read_bytes()
    except OSError:
        return None


LOG4J2_CONFIG = PACKAGE_DIR / "merge" / "log4j2.properties"
DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"


# the merge driver's JVM options unless the user's own ``spark.driver.extraJavaOptions`` sets the
# same thing (the word each option is recognised by -> the option)
DRIVER_DEFAULTS = {
    # Spark's INFO lines kept out of the task log (``merge/log4j2.properties``: warnings only)
    "log4j2.configurationFile": f"-Dlog4j2.configurationFile=file:{LOG4J2_CONFIG}",
    # The JIT's first tier only. Every merge is a fresh JVM that lives seconds to minutes, too short
    # for the second tier's compiles to pay for the CPU they take: on 2 cores a 1M-row merge took
    # 1.3 s less wall time, a 5M-row snapshot merge about 1 s (docs/performance.md). A merge that
    # runs many minutes in local mode may want it back: -XX:TieredStopAtLevel=4.
    "TieredStopAtLevel": "-XX:TieredStopAtLevel=1",
}


def cds_option(spark_line: str) -> str | None:
    """The JVM option that maps the class-data archive, when this machine has one for Spark
    ``spark_line`` (``make spark-cds`` makes it for the venv's pyspark, the default line): the JVM maps
    Spark's classes from it instead of loading them one by one, which halves an empty job's
    spark-submit here (13-14 s -> 7 s of CPU; ``scripts/spark_cds.py``). A JVM that cannot use it
    (another JDK build, a driver on a machine without the file) runs without it."""
    if spark_line != DEFAULT_LINE or not SPARK_CDS_ARCHIVE.is_file():
        return None
    return f"-XX:SharedArchiveFile={SPARK_CDS_ARCHIVE.resolve()}"


def launcher_env(spark_line: str) -> dict[str, str]:
    """The environment that maps the launcher JVM's class-data archive, when this machine has one
    for Spark ``spark_line``: every spark-submit first runs a JVM that only builds the driver's
    command, 0.47-0.52 s here, 0.21-0.23 s with its archive (docs/performance-journal.md). Empty when
    there is none, or when ``SPARK_LAUNCHER_OPTS`` is set already (the deployment's own options)."""
    if spark_line != DEFAULT_LINE or not SPARK_LAUNCHER_CDS_ARCHIVE.is_file() or LAUNCHER_OPTS_ENV in os.environ:
        return {}
    return {LAUNCHER_OPTS_ENV: f"-XX:SharedArchiveFile={SPARK_LAUNCHER_CDS_ARCHIVE.resolve()}"}


def driver_defaults(spark_line: str) -> dict[str, str]:
    """``DRIVER_DEFAULTS``, and the class-data archive's option (``cds_option``) when there is one."""
    defaults = dict(DRIVER_DEFAULTS)
    archive = cds_option(spark_line)
    if archive:
        defaults["SharedArchiveFile"] = archive
    return defaults


def driver_java_options(conf: Mapping[str, Any], spark_line: str) -> dict[str, Any]:
    """``conf`` with ``driver_defaults(spark_line)`` added to the driver's Java options; an option the user
    set already (by its word, e.g. their own log4j2 configuration) is theirs."""
    conf = dict(conf)
    options = str(conf.get(DRIVER_JAVA_OPTIONS, ""))
    added = [option for word, option in driver_defaults(spark_line).items() if word not in options]
    conf[DRIVER_JAVA_OPTIONS] = " ".join([options, *added]).strip()
    return conf
