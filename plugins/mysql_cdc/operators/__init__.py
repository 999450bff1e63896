"""Airflow operators."""

from .check import CdcLagCheckOperator
from .extract import CdcExtractOperator
from .merge import CdcMergeOperator
from .verify import CdcVerifyOperator

__all__ = ["CdcExtractOperator", "CdcLagCheckOperator", "CdcMergeOperator", "CdcVerifyOperator"]
