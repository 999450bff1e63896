"""A Delta Lake follower: real MariaDB/MySQL leaders, the real merge job (in-process on the session's
SparkSession with Delta, or spark-submit as the merge task runs it), lakes on ``file://`` and on a
real S3 endpoint (moto). The lake is read back with delta-rs at the consistent cut and compared
with the leader, table by table, value by value."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from apply_workload import Workload
from lake_helpers import (
    LakePipeline, assert_lake_equals_leader, changelog, lake_maintain, lake_rows, lake_submit, leader_rows,
)
from merge_helpers import job_output
from mysql_cdc.merge.netting import DRIVER_NET_ROWS, DRIVER_NET_ROWS_PROPERTY
from mysql_cdc.capture.filters import TableFilter
from mysql_cdc.contracts import BinlogPosition, Checkpoint
from mysql_cdc.monitor.verify import verify_pipeline
from mysql_cdc.kinds.delta.verify import checksum_sides
from mysql_cdc.pipeline_options import VerifyOptions
from mysql_cdc.kinds.delta.state.location import LakeLocation
from mysql_cdc.merge.job import run_merge
from test_merge_types import FILL_NULLS, UPDATE_ALL, type_tables


def seed_workload(db: str) -> list[str]:
    return [
        f"CREATE DATABASE {db}", f"USE {db}",
        "CREATE TABLE owner (id INT PRIMARY KEY, name VARCHAR(40) NOT NULL, since DATETIME(6) NULL)",
        "CREATE TABLE pet (name VARCHAR(20), owner VARCHAR(20), species VARCHAR(20), sex CHAR(1), birth DATE)",
        "INSERT INTO owner VALUES (1, 'Harold', '2020-01-01 10:00:00.5'), (2, 'Gwen', NULL), (3, 'Benny', NULL)",
        "INSERT INTO pet VALUES ('Fluffy','Harold','cat','f','1993-02-04'), ('Claws','Gwen','cat','m','1994-03-17'),"
        " ('Buffy','Harold','dog','f','1989-05-13'), ('Buffy','Harold','dog','f','1989-05-13'),"
        " ('Whistler','Gwen','bird',NULL,'1997-12-09')",
        "UPDATE owner SET name = 'Harold H' WHERE id = 1",
        "UPDATE owner SET id = 30 WHERE id = 3",  # a key change
        "DELETE FROM owner WHERE id = 2",
        "DELETE FROM pet WHERE name = 'Buffy' LIMIT 1",  # one of two equal rows
        "UPDATE pet SET sex = 'm' WHERE name = 'Whistler'",  # NULL -> value in a keyless table
    ]


def test_keyed_and_keyless_tables_merge_into_delta_batch_after_batch(lake_pipeline, spark):
    pipeline = lake_pipeline()
    db = pipeline.database
    first = pipeline.capture(seed_workload(db))
    summary = run_merge(spark, pipeline.manifest_uri(first), pipeline.secrets)
    assert not summary.noop
    assert_lake_equals_leader(pipeline)
    assert pipeline.checkpoint().position == first.end
    assert sum(leader_rows(pipeline.leader, db, "pet").values()) == 4

    # a transaction across both tables, a delete of a row inserted before, duplicates added
    second = pipeline.capture([
        f"USE {db}", "BEGIN", "INSERT INTO owner VALUES (4, 'Diane', NOW(6))",
        "INSERT INTO pet VALUES ('Chirpy','Diane','bird','f','1998-09-11'), ('Chirpy','Diane','bird','f','1998-09-11')",
        "DELETE FROM owner WHERE id = 30", "UPDATE pet SET owner = 'Harold H' WHERE owner = 'Harold'", "COMMIT"])
    run_merge(spark, pipeline.manifest_uri(second), pipeline.secrets)
    assert_lake_equals_leader(pipeline)
    cut = pipeline.cut()
    assert cut.position == second.end == pipeline.checkpoint().position

    # the same batch again is a no-op: nothing committed, the cut unchanged
    again = run_merge(spark, pipeline.manifest_uri(second), pipeline.secrets)
    assert again.noop and pipeline.cut().versions == cut.versions


def test_change_data_feed_is_on_and_readable(lake_pipeline, spark):
    pipeline = lake_pipeline()
    db = pipeline.database
    batch = pipeline.capture([f"CREATE DATABASE {db}", f"USE {db}", "CREATE TABLE t (id INT PRIMARY KEY, v INT)",
                              "INSERT INTO t VALUES (1, 10), (2, 20)", "UPDATE t SET v = 11 WHERE id = 1",
                              "DELETE FROM t WHERE id = 2"])
    run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets)
    more = pipeline.capture([f"UPDATE {db}.t SET v = 12 WHERE id = 1", f"INSERT INTO {db}.t VALUES (3, 30)"])
    run_merge(spark, pipeline.manifest_uri(more), pipeline.secrets)
    path = pipeline.cut().location.spark_path(pipeline.cut().location.table_uri(db, "t"))
    changes = {(r["id"], r["v"], r["_change_type"]) for r in spark.sql(
        f"SELECT * FROM table_changes_by_path('{path}', 2)").collect()}
    assert changes == {(1, 11, "update_preimage"), (1, 12, "update_postimage"), (3, 30, "insert")}


def test_changelog_tables_keep_every_change_row_once(lake_pipeline, spark):
    pipeline = lake_pipeline(changelog=("*.owner",))
    db = pipeline.database
    first = pipeline.capture(seed_workload(db))
    run_merge(spark, pipeline.manifest_uri(first), pipeline.secrets)
    second = pipeline.capture([f"USE {db}", "BEGIN", "INSERT INTO owner VALUES (4, 'Diane', NULL)",
                               "UPDATE owner SET name = 'H', since = NULL WHERE id = 1", "COMMIT"])
    run_merge(spark, pipeline.manifest_uri(second), pipeline.secrets)
    pipeline.state.move(pipeline.checkpoint(), Checkpoint(pipeline.name, first.end, batch_id=first.batch_id))
    run_merge(spark, pipeline.manifest_uri(second), pipeline.secrets)  # applied again: nothing twice
    assert_lake_equals_leader(pipeline)

    log = changelog(pipeline, "owner")
    before = [r["_before"] and (r["_before"]["id"], r["_before"]["name"]) for r in log]
    assert [(r["_op"], r["id"], r["name"], b) for r, b in zip(log, before)] == [
        ("I", 1, "Harold", None), ("I", 2, "Gwen", None), ("I", 3, "Benny", None),
        ("U", 1, "Harold H", (1, "Harold")), ("U", 30, "Benny", (3, "Benny")), ("D", 2, "Gwen", None),
        ("I", 4, "Diane", None), ("U", 1, "H", (1, "Harold H")),
    ]
    assert log[0]["since"] == log[3]["_before"]["since"] == dt.datetime(2020, 1, 1, 10, 0, 0, 500000)
    assert log[-1]["since"] is None
    seqs = [r["_change_seq"] for r in log]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    # one transaction, one id; every row its position and commit time
    assert log[-1]["_txn"] == log[-2]["_txn"] != log[-3]["_txn"] and log[-1]["_gtid"] == log[-2]["_gtid"]
    assert all(r["_commit_ts"] is not None for r in log)
    assert all(first.start <= BinlogPosition(r["_binlog_file"], r["_binlog_pos"]) < second.end for r in log)
    # only the tables the patterns name have one
    pet = LakeLocation(pipeline.lake).changelog_uri(pipeline.name, db, "pet")
    assert not DeltaTable.is_deltatable(pet)

    # the leader widens the key and adds a column: the changelog follows, its rows unchanged
    third = pipeline.capture([f"USE {db}", "ALTER TABLE owner MODIFY id BIGINT NOT NULL",
                              "UPDATE owner SET name = 'Z' WHERE id = 4", "ALTER TABLE owner ADD COLUMN note VARCHAR(9)",
                              "INSERT INTO owner VALUES (5, 'E', NULL, 'n')"])
    run_merge(spark, pipeline.manifest_uri(third), pipeline.secrets)
    assert_lake_equals_leader(pipeline)
    widened = changelog(pipeline, "owner")
    def without_note(row):
        before = row["_before"] and {k: v for k, v in row["_before"].items() if k != "note"}
        return {**{k: v for k, v in row.items() if k != "note"}, "_before": before}

    assert [without_note(r) for r in widened[:len(log)]] == log
    assert [(r["_op"], r["id"], r["name"], r["note"]) for r in widened[len(log):]] == [
        ("U", 4, "Z", None), ("I", 5, "E", "n")]
    assert {f.name: f.type for f in pa.schema(DeltaTable(LakeLocation(pipeline.lake).changelog_uri(
        pipeline.name, db, "owner")).schema().to_arrow())}["id"] == pa.int64()


@pytest.mark.parametrize("flavor, driver_rows",
                         [("mariadb", DRIVER_NET_ROWS), ("mariadb", 0), ("mysql", DRIVER_NET_ROWS)],
                         ids=["mariadb-driver", "mariadb-spark", "mysql-driver"])
def test_every_type_is_exact_in_delta(lake_pipeline, spark, flavor, driver_rows):
    """Netted on the driver (Arrow rows handed to Spark) and by Spark: the same exact values."""
    pipeline = lake_pipeline(flavor=flavor)
    db = pipeline.database
    first = pipeline.capture(type_tables(db))
    run_merge(spark, pipeline.manifest_uri(first), pipeline.secrets, driver_rows)
    assert_lake_equals_leader(pipeline)
    second = pipeline.capture([
        f"USE {db}", f"UPDATE types {UPDATE_ALL} WHERE id = 1", f"UPDATE types {FILL_NULLS} WHERE id = 3",
        "DELETE FROM types WHERE id = 2", f"UPDATE bag {UPDATE_ALL} WHERE ti = 127",
        "DELETE FROM bag WHERE ti = -128 LIMIT 1", f"UPDATE bag {FILL_NULLS} WHERE ti IS NULL LIMIT 1",
    ])
    run_merge(spark, pipeline.manifest_uri(second), pipeline.secrets, driver_rows)
    assert_lake_equals_leader(pipeline)

    # the verification's checksums over the lake agree with the leader's on every type, chunk by
    # chunk (types: by id; bag: keyless, one chunk)
    result = verify_lake(pipeline)
    assert (result.status, result.tables, result.chunks, result.rows) == ("ok", 2, 3, 2 + 4), result.describe()
    # a change the binlog never carried (drift): the one chunk that holds it, and nothing else
    pipeline.leader.run_sql(["SET sql_log_bin = 0", f"UPDATE {db}.types SET f = 0.75 WHERE id = 3",
                             f"UPDATE {db}.bag SET tm6 = '00:00:01' WHERE ti IS NULL"])
    drift = verify_lake(pipeline)
    assert [(c.table, c.lo, c.hi) for c in drift.drifted] == [(f"{db}.bag", None, None), (f"{db}.types", 3, None)]
    assert "resnapshot" in drift.describe()


def verify_lake(pipeline: LakePipeline):
    return verify_pipeline(pipeline.name, pipeline.leader_settings, checksum_sides(LakeLocation(pipeline.lake)), pipeline.state,
                           TableFilter((f"{pipeline.database}.*",)), VerifyOptions(chunk_rows=1, rechecks=0),
                           log=lambda _: None)


def test_ddl_follows_the_leader_in_binlog_order(lake_pipeline, spark):
    pipeline = lake_pipeline()
    db = pipeline.database
    batch = pipeline.capture([
        f"CREATE DATABASE {db}", f"USE {db}",
        "CREATE TABLE a (id INT PRIMARY KEY, v VARCHAR(10), gone INT)", "INSERT INTO a VALUES (1, 'x', 1), (2, 'y', 2)",
        "CREATE TABLE b (id INT PRIMARY KEY, n SMALLINT)", "INSERT INTO b VALUES (1, 1)",
        "CREATE TABLE c (id INT PRIMARY KEY)", "INSERT INTO c VALUES (1), (2)",
        "CREATE TABLE d (id INT PRIMARY KEY)", "INSERT INTO d VALUES (7)",
    ])
    run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets)
    assert_lake_equals_leader(pipeline)
    ddl = pipeline.capture([
        f"USE {db}",
        "ALTER TABLE a RENAME COLUMN v TO label", "ALTER TABLE a DROP COLUMN gone", "ALTER TABLE a ADD COLUMN extra INT",
        "UPDATE a SET extra = id * 10 WHERE id = 1",
        "ALTER TABLE b MODIFY n BIGINT", "UPDATE b SET n = 9000000000 WHERE id = 1",  # widened in place
        "TRUNCATE TABLE c", "INSERT INTO c VALUES (3)",
        "RENAME TABLE d TO d2", "INSERT INTO d2 VALUES (8)",
        "CREATE TABLE e (id INT PRIMARY KEY)", "INSERT INTO e VALUES (5)", "DROP TABLE e",
        # tables created and left empty are in the lake (and the cut) from their CREATE on
        "CREATE TABLE empty (id INT PRIMARY KEY, `price, net` DECIMAL(5,2) UNSIGNED DEFAULT '1.00', KEY (`price, net`))",
        "CREATE TABLE e (id BIGINT UNSIGNED PRIMARY KEY, w ENUM('a,b', 'c') NULL, at DATETIME(6))",  # after its DROP
    ])
    run_merge(spark, pipeline.manifest_uri(ddl), pipeline.secrets)
    assert_lake_equals_leader(pipeline)
    assert {"empty", "e"} <= {name.split(".")[1] for name in pipeline.cut().versions}
    assert [f.name for f in pipeline.cut().tables[f"{db}.e"].schema().fields] == ["id", "w", "at"]


def test_snapshot_and_resnapshot_replace_tables_in_one_commit(lake_pipeline, spark):
    pipeline = lake_pipeline()
    db = pipeline.database
    pipeline.leader.run_sql([f"CREATE DATABASE {db}", f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT)",
                             f"INSERT INTO {db}.t VALUES (1, 1), (2, 2), (3, 3)",
                             f"CREATE TABLE {db}.k (v INT)", f"INSERT INTO {db}.k VALUES (1), (1)"])
    copy = pipeline.snapshot()
    run_merge(spark, pipeline.manifest_uri(copy), pipeline.secrets)
    assert_lake_equals_leader(pipeline)
    stream = pipeline.capture([f"INSERT INTO {db}.t VALUES (4, 4)", f"DELETE FROM {db}.k LIMIT 1"])
    run_merge(spark, pipeline.manifest_uri(stream), pipeline.secrets)
    assert_lake_equals_leader(pipeline)
    pipeline.leader.run_sql([f"UPDATE {db}.t SET v = v + 100"])
    again = pipeline.snapshot(only=[f"{db}.t"])
    run_merge(spark, pipeline.manifest_uri(again), pipeline.secrets)
    catch_up = pipeline.capture([f"INSERT INTO {db}.k VALUES (9)"])
    run_merge(spark, pipeline.manifest_uri(catch_up), pipeline.secrets)
    assert_lake_equals_leader(pipeline)


def test_a_lake_on_s3_through_spark_submit(lake_pipeline, tmp_path):
    pipeline = lake_pipeline(s3=True)
    batch = pipeline.capture(seed_workload(pipeline.database))
    result = lake_submit(pipeline, batch, tmp_path / "job")
    assert result.returncode == 0, job_output(result)[-4000:]
    assert_lake_equals_leader(pipeline)


SEED = 20261125


def test_random_workload_into_delta(lake_pipeline, spark):
    pipeline = lake_pipeline()
    workload = Workload(SEED, pipeline.database)
    conn = pipeline.leader.connect()
    try:
        for number in range(3):
            def run():
                if number == 0:
                    workload.setup(conn)
                workload.run(conn, transactions=15)

            batch = pipeline.capture(run)
            run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets)
            assert_lake_equals_leader(pipeline)
    finally:
        conn.close()


@pytest.mark.parametrize("crash_at", ["in_executor", "after_staging", "between_tables", "before_checkpoint"])
def test_a_crash_at_each_step_then_the_retry_leaves_every_table_equal(lake_pipeline, spark, tmp_path, crash_at):
    """A transaction across two tables, the merge job killed at each step of its segment (the
    suite's fault injection: os._exit, no cleanup). Until the retry, the consistent cut is the
    previous batch's whole: the transaction is seen whole or not at all, though a table's own
    latest version may already hold its half. The retry (as Airflow's) commits what is missing,
    once, changelog tables included."""
    pipeline = lake_pipeline(changelog=("*.*",))
    db = pipeline.database
    first = pipeline.capture([f"CREATE DATABASE {db}", f"USE {db}",
                              "CREATE TABLE account (id INT PRIMARY KEY, balance INT)",
                              "CREATE TABLE ledger (account INT, amount INT)",
                              "INSERT INTO account VALUES (1, 100), (2, 100)"])
    run_merge(spark, pipeline.manifest_uri(first), pipeline.secrets)
    before = pipeline.cut()
    transfer = pipeline.capture([f"USE {db}", "BEGIN", "UPDATE account SET balance = balance - 30 WHERE id = 1",
                                 "UPDATE account SET balance = balance + 30 WHERE id = 2",
                                 "INSERT INTO ledger VALUES (1, -30), (2, 30)", "COMMIT"])

    # small tables are netted on the driver; an executor's read needs them sent through Spark
    through_spark = {DRIVER_NET_ROWS_PROPERTY: 0} if crash_at == "in_executor" else None
    crashed = lake_submit(pipeline, transfer, tmp_path / "crash", {"MYSQL_CDC_CRASH_AT": crash_at}, conf=through_spark)
    assert crashed.returncode != 0 and f"MYSQL_CDC_CRASH_AT={crash_at}" in job_output(crashed)
    cut = pipeline.cut()
    assert (cut.position, cut.versions) == (before.position, before.versions)
    balances = {row[0]: row[1] for row in lake_rows(pipeline, pipeline.leader, db, "account")}
    assert balances == {1: 100, 2: 100}, "the cut shows the transfer whole or not at all"
    # a changelog read at the cut (rows before its position) has none of the transfer either
    at_cut = [(r["_op"], r["id"]) for r in changelog(pipeline, "account")
              if BinlogPosition(r["_binlog_file"], r["_binlog_pos"]) < cut.position]
    assert at_cut == [("I", 1), ("I", 2)]

    # the retry: the same job again, here on the suite's session (the kill above was a real job's)
    run_merge(spark, pipeline.manifest_uri(transfer), pipeline.secrets)
    assert_lake_equals_leader(pipeline)
    assert pipeline.checkpoint().position == transfer.end
    # each table got the transfer's rows in one commit, though two attempts ran: Delta skipped the
    # commit the killed attempt had made. `account` had rows: a MERGE, by delta-rs from the driver's
    # Arrow rows (a small keyed table; at in_executor the killed attempt's was Spark's). `ledger` was
    # empty: an append of the driver's Arrow rows by delta-rs (the retry nets on the driver; so did
    # the killed attempt, but at in_executor)
    for name, expected in ((f"{db}.account", ("MERGE", "delta-rs")), (f"{db}.ledger", ("WRITE", "delta-rs"))):
        table = pipeline.cut().tables[name]
        writes = [(h["operation"], h["engineInfo"].split(":")[0].split("/")[0]) for h in table.history()
                  if h["operation"] in ("MERGE", "WRITE") and h["version"] > before.versions.get(name, -1)]
        assert writes == [expected], (name, writes)
    assert [(r["_op"], r["id"], r["balance"]) for r in changelog(pipeline, "account")] == [
        ("I", 1, 100), ("I", 2, 100), ("U", 1, 70), ("U", 2, 130)]
    assert [(r["_op"], r["account"], r["amount"]) for r in changelog(pipeline, "ledger")] == [("I", 1, -30), ("I", 2, 30)]


def test_maintenance_compacts_and_vacuums_and_never_breaks_the_cut(lake_pipeline, spark, tmp_path):
    """The maintenance job after several merges: fewer files, the same rows at the cut; with a
    merge committed past the cut (killed before its state row), that table is compacted but not
    vacuumed, and the retry still finishes the merge."""
    import json
    import re

    pipeline = lake_pipeline(changelog=("*.u",))
    db = pipeline.database
    schema = pipeline.capture([f"CREATE DATABASE {db}", f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT)",
                               f"CREATE TABLE {db}.u (id INT PRIMARY KEY)"])
    run_merge(spark, pipeline.manifest_uri(schema), pipeline.secrets)
    for n in range(3):
        batch = pipeline.capture([f"INSERT INTO {db}.t VALUES ({n}, {n})", f"INSERT INTO {db}.u VALUES ({n})",
                                  f"UPDATE {db}.t SET v = v + 10"])
        run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets)
    pending = pipeline.capture([f"INSERT INTO {db}.t VALUES (9, 9)"])
    crashed = lake_submit(pipeline, pending, tmp_path / "crash", {"MYSQL_CDC_CRASH_AT": "before_checkpoint"})
    assert crashed.returncode != 0

    done = lake_maintain(pipeline, tmp_path / "maintain", retain_hours=1)
    assert done.returncode == 0, job_output(done)[-4000:]
    summary = {t["table"]: t for t in json.loads(re.search(r"maintenance summary (\[.*\])", job_output(done))[1])}
    assert summary[f"{db}.u"]["vacuumed"] and summary[f"{db}.u"]["files_after"] < summary[f"{db}.u"]["files_before"]
    assert not summary[f"{db}.t"]["vacuumed"] and "past the cut" in summary[f"{db}.t"]["why_not"]
    assert f"_mysql_cdc.{pipeline.name}.checkpoint" in summary
    logged = summary[f"changelog of {db}.u"]  # u's changelog: one file per merge, compacted
    assert logged["vacuumed"] and logged["files_after"] < logged["files_before"]
    assert f"changelog of {db}.t" not in summary
    assert [r["id"] for r in changelog(pipeline, "u")] == [0, 1, 2]

    run_merge(spark, pipeline.manifest_uri(pending), pipeline.secrets)  # the retry, on the suite's session
    assert_lake_equals_leader(pipeline)


def _writers(pipeline: LakePipeline, name: str, since: int) -> list[tuple[str, str]]:
    """The (operation, engine) of each row commit of a table after its version ``since``."""
    table = pipeline.cut().tables[name]
    return [(h["operation"], h["engineInfo"].split(":")[0].split("/")[0]) for h in table.history()
            if h["operation"] in ("MERGE", "WRITE") and h["version"] > since]


@pytest.mark.parametrize("driver_merge_bytes", [None, 0], ids=["small-tables-in-the-driver", "every-merge-by-spark"])
def test_who_merges_a_table_follows_its_key_and_size_and_the_lake_is_the_same(lake_pipeline, spark, monkeypatch,
                                                                               driver_merge_bytes):
    """A small table's net rows are merged by delta-rs in the driver (no Spark job), a keyed table's
    by key and a keyless one's as a multiset rewrite; a table whose files hold more than
    ``DRIVER_MERGE_BYTES``, by Spark's MERGE. Either way the lake equals the leader, after each batch."""
    from mysql_cdc.kinds.delta import sink as delta_sink

    if driver_merge_bytes is not None:
        monkeypatch.setattr(delta_sink, "DRIVER_MERGE_BYTES", driver_merge_bytes)
    pipeline = lake_pipeline()
    db = pipeline.database
    first = pipeline.capture(seed_workload(db))
    run_merge(spark, pipeline.manifest_uri(first), pipeline.secrets)
    before = pipeline.cut().versions
    second = pipeline.capture([
        f"USE {db}", "BEGIN", "UPDATE owner SET name = 'Harold I' WHERE id = 1", "DELETE FROM owner WHERE id = 30",
        "INSERT INTO owner VALUES (5, 'Ed', NULL)", "INSERT INTO pet VALUES ('Buffy','Harold','dog','f','1989-05-13')",
        "DELETE FROM pet WHERE name = 'Claws'", "COMMIT",
    ])
    run_merge(spark, pipeline.manifest_uri(second), pipeline.secrets)

    assert_lake_equals_leader(pipeline)
    engine = "delta-rs" if driver_merge_bytes is None else "Apache-Spark"
    assert _writers(pipeline, f"{db}.owner", before[f"{db}.owner"]) == [("MERGE", engine)]
    assert _writers(pipeline, f"{db}.pet", before[f"{db}.pet"]) == [("MERGE", engine)]
    # a replay of the batch changes nothing (each table's commit skipped under its transaction id)
    versions = pipeline.cut().versions
    run_merge(spark, pipeline.manifest_uri(second), pipeline.secrets)
    assert pipeline.cut().versions == versions
    assert_lake_equals_leader(pipeline)


def test_rows_netted_by_spark_are_appended_into_an_empty_table_then_merged(lake_pipeline, spark):
    """Every table's rows netted by Spark (``driverNetRows`` 0) are written by Spark: appended while
    the table is still empty (a WRITE, with no MERGE's join against nothing), merged once it holds
    rows; the sink knows which from delta-rs's read of the table when the segment opened it."""
    pipeline = lake_pipeline()
    db = pipeline.database
    first = pipeline.capture(seed_workload(db))
    run_merge(spark, pipeline.manifest_uri(first), pipeline.secrets, 0)
    assert_lake_equals_leader(pipeline)
    assert [_writers(pipeline, f"{db}.{t}", -1) for t in ("owner", "pet")] == [[("WRITE", "Apache-Spark")]] * 2
    before = pipeline.cut().versions
    second = pipeline.capture([
        f"USE {db}", "UPDATE owner SET name = 'Harold I' WHERE id = 1", "DELETE FROM pet WHERE name = 'Claws'"])
    run_merge(spark, pipeline.manifest_uri(second), pipeline.secrets, 0)
    assert_lake_equals_leader(pipeline)
    assert [_writers(pipeline, f"{db}.{t}", before[f"{db}.{t}"]) for t in ("owner", "pet")] == \
        [[("MERGE", "Apache-Spark")]] * 2


def test_a_rename_that_changes_only_a_columns_case_keeps_merging(lake_pipeline, spark):
    """MySQL's column names ignore case: after ``RENAME COLUMN name TO Name`` the batch says ``Name``
    where the lake still says ``name``. Spark's MERGE and delta-rs's (a small keyed table: the driver's)
    both find the column; delta-rs's would otherwise change nothing, silently."""
    pipeline = lake_pipeline()
    db = pipeline.database
    first = pipeline.capture([f"CREATE DATABASE {db}", f"USE {db}",
                              "CREATE TABLE owner (id INT PRIMARY KEY, name VARCHAR(40))",
                              "INSERT INTO owner VALUES (1, 'a'), (2, 'b')"])
    run_merge(spark, pipeline.manifest_uri(first), pipeline.secrets)
    second = pipeline.capture([f"USE {db}", "ALTER TABLE owner RENAME COLUMN name TO Name",
                               "UPDATE owner SET Name = 'A' WHERE id = 1", "INSERT INTO owner VALUES (3, 'c')"])
    run_merge(spark, pipeline.manifest_uri(second), pipeline.secrets)
    assert_lake_equals_leader(pipeline)
    assert lake_rows(pipeline, pipeline.leader, db, "owner") == {(1, "A"): 1, (2, "b"): 1, (3, "c"): 1}
