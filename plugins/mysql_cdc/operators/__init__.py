"""Airflow operators."""

from .check import CdcLagCheckOperator
from .extract import CdcExtractOperator
from .maintain import CdcLakeMaintenanceOperator
from .merge import CdcMergeOperator
from .retention import CdcRetireBatchesOperator
from .verify import CdcVerifyOperator

__all__ = ["CdcExtractOperator", "CdcLagCheckOperator", "CdcLakeMaintenanceOperator", "CdcMergeOperator",
           "CdcRetireBatchesOperator", "CdcVerifyOperator"]
