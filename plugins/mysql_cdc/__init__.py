"""mysql-cdc: MySQL/MariaDB binlog ranges -> Parquet change batches -> Spark merge into followers.

The package is importable without Airflow: ``contracts``, ``capture`` and ``storage`` are plain
Python and are shipped to the Spark job. Only ``hooks``, ``operators``, ``sensors`` and
``triggers`` import Airflow.
"""
