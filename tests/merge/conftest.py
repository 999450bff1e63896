"""The merge tests' settings (their pipelines, ``make_pipeline``, are ``tests/conftest.py``'s)."""

from __future__ import annotations

import pytest



def pytest_configure(config):
    # pyspark warns on every import that it does not fully support the pandas 3 that Airflow pins;
    # the merge job does not use pandas
    config.addinivalue_line("filterwarnings", "ignore:PySpark does not yet fully support pandas:FutureWarning")
