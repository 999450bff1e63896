"""The merge job's parts that are the same for every follower kind, free of Spark so that the
executors (and the Airflow side) can import them anywhere.

- ``reader``: a table's change rows read from the batch as Arrow, by executors (``read_units``)
  or on the driver (``read_tables``, packs included).
- ``netting``: the netting of ``spark.transforms`` on Arrow, for small tables on the driver
  (``read_and_net``: a group of them read and netted at once).
- ``report``: what a merge did, per table; ``errors``: the merge's errors.

What a follower kind does with the net rows is its sink's (``mysql_cdc.merge.sink``); which parts of
a batch still need applying is ``contracts.replay`` (shared with the Airflow side).
``mysql_cdc.merge`` runs these from the Spark job.
"""
