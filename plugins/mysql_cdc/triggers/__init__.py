"""Airflow triggers (run in the triggerer; ``dag.test()`` runs them inline)."""

from .leader import LeaderAdvancedTrigger

__all__ = ["LeaderAdvancedTrigger"]
