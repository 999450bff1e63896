# Airflow targets, included by the top-level Makefile (which defines PY and `setup`).
#   make demo     the seed workload through real DAG runs (MariaDB leader/follower, Spark merge);
#                 CDC_DEMO_STORAGE=s3 keeps the batches in a local S3 endpoint instead of .local/
#   make airflow  airflow standalone with the demo pipeline on http://localhost:8080
PY ?= .venv/bin/python

.PHONY: demo airflow

demo: setup
	$(PY) scripts/demo.py

airflow: setup
	$(PY) scripts/airflow_local.py
