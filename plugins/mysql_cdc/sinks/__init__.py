"""What the merge job writes a batch with: one ``Sink`` per follower kind, each one module.

``spark.merge`` reads a batch, keeps what the checkpoint has not covered and nets it per key
(``spark.transforms``), the same for every kind; the sink takes it from there: check or create a
table, prepare and apply a table's net rows, replay a DDL statement, put a copy in a table's
place, and commit each with the batch's position. ``mysql_cdc.followers`` names each kind's sink
and state store; ``sinks.mysql`` is a MySQL/MariaDB server.
"""

from .base import BatchJob, NetTable, Sink, TableCopy

__all__ = ["BatchJob", "NetTable", "Sink", "TableCopy"]
