"""Airflow sensors."""

from .leader import LeaderAdvancedSensor

__all__ = ["LeaderAdvancedSensor"]
