"""The reference for "fixed cost of one spark-submit": start a session, run one trivial action, stop."""

from pyspark.sql import SparkSession

if __name__ == "__main__":
    spark = SparkSession.builder.appName("mysql-cdc-noop").getOrCreate()
    spark.range(1).count()
    spark.stop()
