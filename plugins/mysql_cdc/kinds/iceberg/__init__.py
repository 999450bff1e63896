"""Apache Iceberg tables as a follower: the leader's table ``db.t`` is the Iceberg table ``db.t``
of a catalog the user names, an Iceberg JDBC catalog in a MySQL/MariaDB database (``catalog``),
which Spark, Trino and Flink open by name with Iceberg's own ``JdbcCatalog``.

- ``types``: the leader's columns as Iceberg columns, exactly;
- ``commit``: one table's commit (``TableCommit``): staged on the table's current snapshot,
  committed only if that snapshot is still current, and carrying the pipeline and the binlog
  position in its snapshot summary, so a retry skips a table that already holds them.
"""
