"""The merge job's Spark session."""

from __future__ import annotations

import os
import sys
import threading

from pyspark.sql import SparkSession

PANDAS_WARNING = "PySpark does not yet fully support pandas"


def build_spark_session() -> SparkSession:
    """No appName here: spark-submit's ``--name`` (the merge task sets one per pipeline) must stay
    the application's name on the cluster; an appName in the builder would override it."""
    # Executors on this machine run the driver's interpreter unless told otherwise: the one that
    # has pyarrow and pymysql. A cluster sets PYSPARK_PYTHON itself.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYTHONWARNINGS", f"ignore:{PANDAS_WARNING}:FutureWarning")
    spark = (
        SparkSession.builder
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    return spark


def _import_pandas() -> None:
    import pandas  # noqa: F401 - pyspark's mapInArrow imports it on the driver; this is earlier


def start_spark() -> SparkSession:
    """The job's session. pandas is imported in the background meanwhile: the JVM takes seconds
    to start the session, and the driver's first ``mapInArrow`` would otherwise import pandas
    (~0.7 s) on the critical path."""
    threading.Thread(target=_import_pandas, name="import-pandas", daemon=True).start()
    return build_spark_session()


def submitted_property(name: str) -> str | None:
    """A Spark property given to spark-submit (``--conf``), read without starting a session:
    spark-submit's JVM already runs beside this Python driver and holds the properties as system
    properties, so asking costs a connection to its gateway, not a SparkContext."""
    from pyspark import SparkContext

    SparkContext._ensure_initialized()  # connects to spark-submit's gateway; creates no context
    return SparkContext._jvm.java.lang.System.getProperty(name)


class RefusedSession:
    """No session at all: the job runs outside spark-submit (``--without-spark``). A step that asks
    for one stops the job (``SparkRefused``) before it changes anything."""

    def __call__(self) -> SparkSession:
        from .errors import SparkRefused

        raise SparkRefused("this batch needs Spark after all (the step asking for it is in the traceback above); "
                           "the merge task submits it to Spark")

    def stop(self) -> None:
        pass


class LazySession:
    """The session, started on first use: a batch that needs no Spark work (a no-op replay, DDL
    only) never pays for the JVM."""

    def __init__(self):
        self._session: SparkSession | None = None

    def __call__(self) -> SparkSession:
        if self._session is None:
            self._session = start_spark()
        return self._session

    def stop(self) -> None:
        if self._session is not None:
            self._session.stop()
            self._session = None
