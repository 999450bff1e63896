"""A table the merge job's driver stages itself (netted on the driver, too large for statements, or
keyless) keeps its load files on the driver's disk for the commit to load: they never go to the
batch store and back. Spark's tasks, on other machines, still hand theirs over through the store.
Real MariaDB leader and follower, the batch store on the local file system (the driver's puts
counted)."""

from __future__ import annotations

import pytest

from merge_helpers import assert_same_database
from mysql_cdc.kinds.mysql.sink import MySQLSink
from mysql_cdc.kinds.mysql.sink.statements import STATEMENT_ROWS
from mysql_cdc.merge.job import run_merge
from mysql_cdc.merge.netting import DRIVER_NET_ROWS
from mysql_cdc.storage import LocalStore


@pytest.mark.parametrize("driver_rows", [DRIVER_NET_ROWS, 0], ids=["staged-by-the-driver", "staged-by-spark"])
def test_load_files_go_through_the_batch_store_only_from_spark_tasks(make_pipeline, leader, follower, spark,
                                                                     monkeypatch, driver_rows):
    pipeline = make_pipeline()
    db = pipeline.database
    rows = STATEMENT_ROWS + 500  # past the statements' limit: a staging table and a load file
    keyed = ", ".join(f"({i}, 'v{i}')" for i in range(1, rows + 1))
    batch = pipeline.capture([
        f"CREATE DATABASE {db}", f"USE {db}", "CREATE TABLE kv (id INT PRIMARY KEY, v VARCHAR(20))",
        "CREATE TABLE bag (v INT)", f"INSERT INTO kv VALUES {keyed}", "INSERT INTO bag VALUES (1), (1), (2)",
    ])
    run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets)
    changes = pipeline.capture([f"USE {db}", f"UPDATE kv SET v = CONCAT(v, '!') WHERE id <= {rows // 2}",
                                "DELETE FROM kv WHERE id = 3", "DELETE FROM bag WHERE v = 1 LIMIT 1",
                                "INSERT INTO bag VALUES (3)"])
    puts, load_dirs = [], []
    put_file, load_dir = LocalStore.put_file, MySQLSink.load_dir

    def counted_put(store, path, key):
        puts.append(key)
        return put_file(store, path, key)

    def recorded_dir(sink, segment):
        load_dirs.append(load_dir(sink, segment))
        return load_dirs[-1]

    monkeypatch.setattr(LocalStore, "put_file", counted_put)
    monkeypatch.setattr(MySQLSink, "load_dir", recorded_dir)

    run_merge(spark, pipeline.manifest_uri(changes), pipeline.secrets, driver_rows)

    if driver_rows:  # both tables staged here: their files kept here, never put in the store
        assert [key for key in puts if key.endswith(".tsv")] == [] and load_dirs, puts
        assert not any(d.exists() for d in load_dirs)  # and gone after the commit
    else:  # staged by Spark's tasks (whose puts, in their own processes, this cannot count)
        assert load_dirs == []
    assert_same_database(leader, follower, db)
    assert pipeline.scratch_files() == [] and pipeline.staging_tables() == []
