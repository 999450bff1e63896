"""The merge job: one change batch applied to the follower, exactly once, the same for every
follower kind. ``spark_jobs/merge_batch.py`` is its spark-submit entry point and only wires these.

- ``job``: the job's steps (read, net, stage, apply per segment kind) and ``run_merge``;
- ``sink``: the narrow commit API a follower kind implements (``Sink``, and its per-segment
  ``SegmentWriter``), and what the job hands it (``BatchJob``, ``NetRows``, ``TableCopy``);
- ``reader``: a table's change rows read from the batch as Arrow, by executors (``read_units``)
  or on the driver (``read_tables``, packs included; ``compiled_read``: the compiled core's
  reader of small files); ``spark_read``: the same as DataFrames;
- ``transforms``: pure DataFrame functions (rows after the checkpoint, netting per key or row);
  ``netting``: the same netting on Arrow, for tables small enough for the driver;
- ``report``: what a merge did, per table; ``errors``: the merge's errors; ``session``: the
  job's SparkSession, started lazily.

Spark-free modules (``reader``, ``netting``, ``report``, ``errors``) are imported by executors
and by the kinds alike; which parts of a batch still need applying is ``contracts.replay``
(shared with the Airflow side). The job never names a kind: it gets its sink from the follower's
spec in its secrets file.
"""
