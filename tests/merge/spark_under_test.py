"""The Spark the suite runs on: the venv's pyspark (the default line), or the Spark home named by
``MYSQL_CDC_TEST_SPARK_HOME`` (``make test-spark SPARK=<line>``, which also puts that line's pyspark
first on the test process's PYTHONPATH, so the in-process session runs the same line)."""

from __future__ import annotations

import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from mysql_cdc.spark_lines import spark_line, spark_target

HOME_ENV = "MYSQL_CDC_TEST_SPARK_HOME"
_home = os.environ.get(HOME_ENV)
SPARK_SUBMIT = Path(_home).resolve() / "bin" / "spark-submit" if _home else Path(sys.executable).parent / "spark-submit"
SPARK = spark_target(str(SPARK_SUBMIT))
SPARK_LINE = SPARK.line
# its jars: those of the pyspark this process imports (``check_in_process_pyspark``: the same line)
SPARK_JARS = Path(importlib.util.find_spec("pyspark").origin).parent / "jars"


def check_in_process_pyspark() -> None:
    """The pyspark this process imports is of the line under test: a session of another line would
    load the wrong line's jars."""
    import pyspark

    if spark_line(pyspark.__version__) != SPARK_LINE:
        raise RuntimeError(
            f"this process imports pyspark {pyspark.__version__} from {Path(pyspark.__file__).parent}, but the "
            f"Spark under test ({SPARK_SUBMIT}) is {SPARK.version}: run the suite through `make test-spark "
            f"SPARK={SPARK_LINE}`, which puts that line's pyspark on PYTHONPATH")


@dataclass(frozen=True)
class FakeDistribution:
    """A Spark distribution's layout (``bin/spark-submit``, ``jars/spark-core_2.13-<v>.jar``) whose
    launcher only records that it ran: for the lines this machine does not install (3.5, 4.3)."""

    home: Path

    @property
    def binary(self) -> Path:
        return self.home / "bin" / "spark-submit"

    def ran(self) -> bool:
        return (self.home / "ran").exists()


def spark_distribution(home: Path, version: str) -> FakeDistribution:
    (home / "bin").mkdir(parents=True)
    (home / "jars").mkdir()
    (home / "jars" / f"spark-core_2.13-{version}.jar").write_bytes(b"")
    (home / "jars" / "spark-sql_2.13-0.0.0.jar").write_bytes(b"")
    launcher = home / "bin" / "spark-submit"
    launcher.write_text(f'#!/bin/sh\ntouch "{home}/ran"\nexit 97\n')
    launcher.chmod(0o755)
    return FakeDistribution(home)
