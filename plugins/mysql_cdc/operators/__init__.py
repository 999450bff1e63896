"""Airflow operators."""

from .extract import CdcExtractOperator
from .merge import CdcMergeOperator

__all__ = ["CdcExtractOperator", "CdcMergeOperator"]
