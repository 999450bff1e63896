"""Airflow hooks: every connection lookup and every byte of I/O of the Airflow side lives here."""

from .connections import ConnectionConfigError, MySQLConnectionHook
from .follower import FollowerHookBase, follower_hook
from .leader import LeaderHook
from .merge_job import MergeJobHook, MergePlan
from .pipeline import CdcPipelineHook, ChangeStatus, ExtractResult
from .storage import BatchStorageHook

__all__ = [
    "BatchStorageHook",
    "CdcPipelineHook",
    "ChangeStatus",
    "ConnectionConfigError",
    "ExtractResult",
    "FollowerHookBase",
    "follower_hook",
    "LeaderHook",
    "MergeJobHook",
    "MergePlan",
    "MySQLConnectionHook",
]
