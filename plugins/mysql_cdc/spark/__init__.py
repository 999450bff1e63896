"""The Spark side of the merge job, shipped to spark-submit in the same zip as the contracts.

- ``transforms``: pure DataFrame functions (rows after the checkpoint, netting per key or row).
- ``merge``: the job's steps (read, stage, apply per segment kind) and ``run_merge``.
- ``session``: the job's SparkSession, started lazily.

``spark_jobs/merge_batch.py`` is the spark-submit entry point and only wires these.
"""
