"""The follower side of the merge job, free of Spark so it can be imported anywhere.

Which parts of a batch still need applying is ``contracts.replay`` (shared with the Airflow side).

- ``reader``: executor side, reads a table's change rows from storage as Arrow.
- ``encoding``: Arrow columns -> exact ``LOAD DATA`` text.
- ``staging``: executor side, per partition: removals into a staging table, final rows into a
  load file in the batch store.
- ``follower``: driver side, the follower transaction (checkpoint lock, deletes, LOAD DATA) and DDL
  replay with the pending-DDL marker.

``mysql_cdc.spark`` runs these from the Spark job.
"""
