"""The Spark work whose JVM classes go into the driver's class-data archive (``scripts/spark_cds.py``):
what every merge driver loads before its first row. A session, SQL planned and run, an Arrow batch
handed to Spark and a Python UDF over Arrow (the merge reads batches with ``mapInArrow``), a shuffle."""

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

if __name__ == "__main__":
    spark = SparkSession.builder.appName("mysql-cdc class-data warm-up").getOrCreate()
    rows = spark.createDataFrame(pa.table({"id": list(range(100)), "v": [str(i) for i in range(100)]}))
    doubled = rows.mapInArrow(lambda batches: (b.set_column(0, "id", pc.multiply(b.column(0), 2))
                                               for b in batches), rows.schema)
    doubled.groupBy((F.col("id") % 7).alias("k")).agg(F.count("*"), F.max("v")).collect()
    spark.sql("SELECT 1 AS one").join(spark.range(3), F.lit(True)).count()
    spark.stop()
