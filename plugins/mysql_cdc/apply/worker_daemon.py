"""Spark's Python worker daemon, with the merge job's imports done once, before it forks.

Spark starts one daemon per executor and forks a Python worker from it for every Python task.
A forked worker then imports what the task's function needs: pyarrow, pandas (pyspark's Arrow
serializers require it), pymysql, numpy and our modules. Measured on the 1M-row benchmark (2
cores), that import is 1.5-3 s per task, paid again in every stage. Importing them here, in the
daemon, makes every fork start with them loaded.

The merge job sets ``spark.python.daemon.module`` to this module (``build_spark_session``); it
reaches the executors in the ``--py-files`` zip. Nothing here runs threads, so forking stays safe.
"""

import numpy  # noqa: F401
import pandas  # noqa: F401
import pyarrow  # noqa: F401
import pyarrow.compute  # noqa: F401
import pyarrow.parquet  # noqa: F401
import pymysql  # noqa: F401
from pyspark import daemon
from pyspark.sql.pandas import serializers  # noqa: F401

from mysql_cdc.apply import reader, staging  # noqa: F401

if __name__ == "__main__":
    daemon.manager()
