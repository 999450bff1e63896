"""Where a pipeline's state lives: its checkpoint, its tables' positions, its batch history and its
verification results.

The Airflow side (sensor, trigger, hooks, lag, verify, the CDC page and API, the failure callbacks)
reads and writes it through ``StateStore`` only; the merge job moves the checkpoint through its
sink, in the same commit as the rows (``mysql_cdc.sinks``). A follower kind brings both, each one
module: for a MySQL follower the state is the ``_mysql_cdc`` schema in the follower itself
(``state.mysql``). ``mysql_cdc.followers`` says which store a pipeline's follower uses.
"""

from .base import StateStore

__all__ = ["StateStore"]
