"""Which Spark a merge job is submitted to, and whether the job is known to run there.

The merge task submits to whatever Spark its connection's ``spark-binary`` names (or the
``spark-submit`` beside Airflow's Python). The lake kinds' jars are built per Spark line (Delta's
``delta-spark_4.1_2.13`` for Spark 4.1, Hadoop's S3A matching that Spark's Hadoop), so the line is
read from that Spark itself before anything is submitted, and a line the job has not been tested
on is refused here, naming the tested ones, rather than found as a ``ClassNotFoundException`` in
an executor. ``docs/spark.md`` says which lines and why.

Plain Python, no Spark import: the Airflow side asks it before Spark starts.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .errors import PermanentError

# Lines the suites run on (`make test` on the default, `make test-spark SPARK=<line>` on the others;
# CI runs one other line). Delta 4.4 is built for these three; no Delta release runs on Spark 4.3.
TESTED_LINES = ("4.0", "4.1", "4.2")
DEFAULT_LINE = "4.2"  # the pyspark requirements.txt installs, the one `make setup` prepares

_CORE_JAR = re.compile(r"^spark-core_2\.\d+-(\d+\.\d+\.\d+)")
_BANNER = re.compile(r"version (\d+\.\d+\.\d+)")


class UntestedSparkError(PermanentError, RuntimeError):
    """The Spark a job would be submitted to is of a line the job is not tested on."""


def spark_line(version: str) -> str:
    """``"4.1"`` of ``"4.1.4"`` (or of ``"4.1.0-SNAPSHOT"``)."""
    major, minor = version.split(".")[:2]
    return f"{major}.{minor}"


def _version_from_jars(jars: Path) -> str | None:
    for jar in sorted(jars.glob("spark-core_*.jar")):
        match = _CORE_JAR.match(jar.name)
        if match:
            return match.group(1)
    return None


def _jars_dirs(binary: Path) -> list[Path]:
    """Where a ``spark-submit``'s Spark keeps its jars, by the layouts Spark is installed in: a
    distribution (``<home>/bin/spark-submit``, ``<home>/jars``) and pip's pyspark (the venv's
    ``bin/spark-submit`` beside ``find_spark_home.py``; the jars in the venv's ``pyspark/jars``)."""
    home = binary.resolve().parent.parent
    dirs = [home / "jars"]
    if (binary.parent / "find_spark_home.py").is_file():
        dirs += sorted(binary.parent.parent.glob("lib/python3*/site-packages/pyspark/jars"))
    return dirs


@lru_cache(maxsize=None)
def _spark_version(binary: str, mtime: float) -> str:
    for jars in _jars_dirs(Path(binary)):
        found = _version_from_jars(jars)
        if found:
            return found
    # Another layout (a wrapper script, a vendor's launcher): ask the Spark itself. It starts a
    # JVM, a second or two, which the layouts above spare every merge.
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UntestedSparkError(f"could not ask {binary} for its Spark version ({exc}): check the Spark "
                                 "connection's spark-binary") from None
    match = _BANNER.search(out.stdout + out.stderr)
    if not match:
        raise UntestedSparkError(
            f"{binary} --version did not print a Spark version (exit {out.returncode}): check the Spark "
            f"connection's spark-binary; it printed: {(out.stderr or out.stdout).strip()[-300:]}")
    return match.group(1)


def spark_version(binary: str) -> str:
    """The version (``"4.1.4"``) of the Spark ``binary`` (a ``spark-submit``) runs: read from the
    name of its ``spark-core`` jar, else from ``spark-submit --version``."""
    return _spark_version(binary, Path(binary).stat().st_mtime)


@dataclass(frozen=True)
class SparkTarget:
    """A ``spark-submit`` and the Spark it runs."""

    binary: str
    version: str  # "4.1.4"

    @property
    def line(self) -> str:
        return spark_line(self.version)


def spark_target(binary: str) -> SparkTarget:
    """The Spark ``binary`` runs, if the job is tested on its line; else ``UntestedSparkError``
    naming the tested lines and how to point the connection at one."""
    target = SparkTarget(binary, spark_version(binary))
    if target.line not in TESTED_LINES:
        raise UntestedSparkError(
            f"{binary} runs Spark {target.version}; the merge job is tested on Spark {', '.join(TESTED_LINES)} "
            f"(docs/spark.md): set the Spark connection's spark-binary to the spark-submit of one of "
            f"those lines (pip install 'pyspark=={DEFAULT_LINE}.*' brings one)")
    return target
