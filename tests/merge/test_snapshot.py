"""Snapshot: tables copied whole from the real leader, consistent with one binlog position, applied
to the real follower, then streaming from there; resnapshot of chosen tables while the others
stream. After every step the follower equals the leader."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
from dataclasses import asdict
from pathlib import Path

import pytest

import mysql_cdc
from apply_workload import Workload
from merge_helpers import assert_same_database, job_output, leader_position, spark_submit, table_rows
from mysql_cdc.crash_points import CRASH_ENV
from mysql_cdc.capture.stream.extract import CaptureError
from mysql_cdc.pipeline_options import SnapshotOptions
from mysql_cdc.contracts import COPYING, DONE, SWAPPING, SnapshotPendingError, plan_replay
from mysql_cdc.kinds.mysql.sink import MySQLSink
from mysql_cdc.merge.job import run_merge
from mysql_cdc.merge.netting import DRIVER_NET_ROWS
from test_merge_types import COLUMNS, NULLS, ROW_1, ROW_2


def type_tables(db: str) -> list[str]:
    return [
        f"CREATE DATABASE {db}",
        f"USE {db}",
        f"CREATE TABLE types (id INT NOT NULL PRIMARY KEY, {COLUMNS})",
        f"CREATE TABLE bag ({COLUMNS})",  # no key, duplicate rows
        "CREATE TABLE empty_one (id INT PRIMARY KEY, v VARCHAR(10))",
        "CREATE TABLE gen (id INT PRIMARY KEY, a INT, b INT AS (a * 2) VIRTUAL)",
        f"INSERT INTO types VALUES (1, {ROW_1}), (2, {ROW_2}), (3, {NULLS})",
        f"INSERT INTO bag VALUES ({ROW_1}), ({ROW_1}), ({ROW_2}), ({NULLS}), ({NULLS})",
        "INSERT INTO gen (id, a) VALUES (1, 10), (2, NULL)",
    ]


@pytest.mark.parametrize("flavor", ["mariadb", "mysql"])
def test_first_snapshot_then_stream(make_pipeline, spark, flavor):
    pipeline = make_pipeline(flavor=flavor, start=False)
    leader, follower, db = pipeline.leader, pipeline.follower, pipeline.database
    leader.run_sql(type_tables(db))

    batch = pipeline.snapshot()
    assert [s.table for s in batch.segments] == ["bag", "empty_one", "gen", "types"]
    assert all(s.full for s in batch.segments) and batch.row_count == 10
    assert {p.state for p in pipeline.table_positions().by_table.values()} == {COPYING}
    assert pipeline.checkpoint().position == batch.start  # a first snapshot starts the pipeline at its position
    run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets)
    assert_same_database(leader, follower, db)
    positions = pipeline.table_positions()
    assert {(k, p.position, p.state) for k, p in positions.by_table.items()} == {
        ((db, s.table), s.at, DONE) for s in batch.segments}
    assert all(batch.start <= s.at for s in batch.segments)
    assert sum(table_rows(follower, db, "bag").values()) == 5

    # applying the same snapshot again changes nothing
    again = run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets)
    assert again.noop

    stream = pipeline.capture([f"USE {db}", "UPDATE types SET vc = 'streamed' WHERE id = 1",
                               "DELETE FROM bag WHERE ti = 127", "INSERT INTO empty_one VALUES (1, 'x')",
                               "ALTER TABLE gen ADD COLUMN c INT DEFAULT 7", "UPDATE gen SET a = 11 WHERE id = 1"])
    assert stream.start == batch.start
    run_merge(spark, pipeline.manifest_uri(stream), pipeline.secrets)
    assert_same_database(leader, follower, db)


CHUNKED = SnapshotOptions(split_rows=25, workers=2)


@pytest.mark.parametrize("flavor, options", [("mariadb", SnapshotOptions()), ("mariadb", CHUNKED), ("mysql", CHUNKED)],
                         ids=["mariadb-whole", "mariadb-chunked", "mysql-chunked"])
def test_copy_while_a_writer_changes_the_tables(make_pipeline, spark, flavor, options):
    """The copy's positions are exact: rows written while the copy runs are either in it or after its
    position, never both, never neither (MariaDB: no lock at all). Copied in chunks, each at its own
    position, the changes between them (key changes across chunks included) catch every chunk up."""
    pipeline = make_pipeline(flavor=flavor, start=False)
    leader, follower, db = pipeline.leader, pipeline.follower, pipeline.database
    workload = Workload(20261126, db)
    setup = leader.connect()
    try:
        workload.setup(setup)
        workload.run(setup, transactions=40)
        with setup.cursor() as cur:  # a table with an integer key, which a chunked copy splits
            cur.execute(f"CREATE TABLE {db}.chunky (id INT PRIMARY KEY, v INT)")
            cur.execute(f"INSERT INTO {db}.chunky VALUES " + ", ".join(f"({i}, {i})" for i in range(1, 201)))
    finally:
        setup.close()
    stop = threading.Event()
    rng = random.Random(7)

    def chunky_change() -> str:
        row = rng.randint(1, 400)
        return rng.choice([f"UPDATE {db}.chunky SET v = v + 1 WHERE id = {row}",
                           f"UPDATE IGNORE {db}.chunky SET id = {rng.randint(1, 400)} WHERE id = {row}",  # key moves
                           f"INSERT IGNORE INTO {db}.chunky VALUES ({row}, 0)",
                           f"DELETE FROM {db}.chunky WHERE id = {row}"])

    def write_workload():
        conn = leader.connect()
        # DDL too: a table that changes during its copy is copied again. A few statements, then rows
        # only: a rename or drop makes the copy list the tables again, and a copy slowed down by a
        # busy machine met so many that it gave up after its 20 listings (as it should, with an error
        # that says so); the test is about positions, not about a leader renaming tables non-stop.
        ddl_left = 6
        try:
            while not stop.is_set():
                done = workload.run(conn, transactions=3, ddl_probability=0.05 if ddl_left > 0 else 0)
                ddl_left -= done["ddl"]
                stop.wait(0.01)  # a steady writer, not a flood the stream then has to carry
        finally:
            conn.close()

    def write_chunky():
        # A writer of its own, one short transaction after another: the chunks' read views open
        # a few milliseconds apart, and a change between two of them must be there to catch up.
        # (Sharing the workload's loop, a slow iteration on a busy machine let all chunks open at
        # one position now and then.)
        conn = leader.connect()
        try:
            while not stop.is_set():
                with conn.cursor() as cur:
                    cur.execute(chunky_change())
                conn.commit()
                stop.wait(0.002)
        finally:
            conn.close()

    writers = [threading.Thread(target=write_workload), threading.Thread(target=write_chunky)]
    for writer in writers:
        writer.start()
    try:
        batch = pipeline.snapshot(options=options)
    finally:
        stop.set()
        for writer in writers:
            writer.join()
    if options is CHUNKED:
        chunked = [s for s in batch.segments if len(s.chunks) > 1]
        assert chunked, "no table was copied in chunks: the test proves nothing"
        assert any(len({c.at for c in s.chunks}) > 1 and s.catch_up for s in chunked), \
            "every chunk was read at one position: the catch-up is not exercised"
    run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets)
    stream = pipeline.capture([])  # everything the writer did after the copy's position
    assert stream.row_count > 0, "the writer wrote nothing after the copy: the test proves nothing"
    run_merge(spark, pipeline.manifest_uri(stream), pipeline.secrets)
    assert_same_database(leader, follower, db)


def kv_tables(db: str) -> list[str]:
    return [f"CREATE DATABASE {db}", f"USE {db}",
            "CREATE TABLE kv (id INT PRIMARY KEY, v VARCHAR(20))", "CREATE TABLE other (id INT PRIMARY KEY, v INT)",
            "INSERT INTO kv VALUES (1, 'a'), (2, 'b'), (3, 'c')", "INSERT INTO other VALUES (1, 1), (2, 2)"]


@pytest.mark.parametrize("damage", ["rows", "dropped"])
def test_resnapshot_repairs_one_table_while_the_others_stream(make_pipeline, leader, follower, spark, damage):
    pipeline = make_pipeline()
    db = pipeline.database
    first = pipeline.capture(kv_tables(db))
    run_merge(spark, pipeline.manifest_uri(first), pipeline.secrets)
    follower.run_sql([f"DELETE FROM {db}.kv WHERE id = 2" if damage == "rows" else f"DROP TABLE {db}.kv"])
    # changes to both tables, then the repair of kv, then more changes to both
    leader.run_sql([f"UPDATE {db}.kv SET v = 'c2' WHERE id = 3", f"UPDATE {db}.other SET v = 10 WHERE id = 1"])
    repair = pipeline.snapshot(only=[f"{db}.kv"])
    assert [s.table for s in repair.segments] == ["kv"] and not repair.segments[0].full
    leader.run_sql([f"INSERT INTO {db}.kv VALUES (4, 'd')", f"INSERT INTO {db}.other VALUES (3, 3)"])
    stream = pipeline.extract(pipeline.position, leader_position(pipeline.leader_settings))

    # the stream batch waits for the copy: applying it first is refused
    with pytest.raises(SnapshotPendingError, match=f"unfinished snapshot \\(batch {repair.batch_id}\\)"):
        run_merge(spark, pipeline.manifest_uri(stream), pipeline.secrets)
    run_merge(spark, pipeline.manifest_uri(repair), pipeline.secrets)
    assert pipeline.checkpoint().position == first.end  # a partial copy leaves the stream's position alone
    run_merge(spark, pipeline.manifest_uri(stream), pipeline.secrets)  # kv's changes before the copy: skipped
    assert_same_database(leader, follower, db)


# where a crash stops a copy swapped in through its shadow table, and what readers then see of kv
SWAP_CRASHES = {
    "after_staging": (COPYING, "old"),  # the shadow is loaded, nothing is marked
    "before_swap": (SWAPPING, "old"),  # marked swapping, the shadow not yet renamed in
    "after_swap": (SWAPPING, "copy"),  # renamed in, the old table not yet dropped
    "before_commit": (SWAPPING, "copy"),  # everything but the table's position
}


@pytest.mark.parametrize("point", sorted(SWAP_CRASHES))
def test_a_crashed_snapshot_merge_is_finished_by_its_retry(make_pipeline, leader, follower, spark, tmp_path, point):
    """The copy goes into a shadow table, loaded by the driver's threads in parallel, and is renamed
    into the table's place: readers see the old rows (here: none) or the whole copy, and a crash
    at any step is finished by the retry, whose follower equals the leader."""
    pipeline = make_pipeline(start=False)
    db = pipeline.database
    leader.run_sql(kv_tables(db))
    batch = pipeline.snapshot()
    crashed = spark_submit(pipeline, batch, tmp_path / "job", {CRASH_ENV: point})
    assert crashed.returncode != 0 and f"{CRASH_ENV}={point}" in job_output(crashed), job_output(crashed)[-2000:]
    state, seen = SWAP_CRASHES[point]
    assert pipeline.table_positions().of(db, "kv").state == state
    assert table_rows(follower, db, "kv") == ({} if seen == "old" else table_rows(leader, db, "kv"))
    if seen == "old":  # the whole copy waits in the shadow table
        assert table_rows(follower, db, "__mcdc_new_kv") == table_rows(leader, db, "kv")
    assert pipeline.table_positions().pending_batch() == batch.batch_id
    with pytest.raises(SnapshotPendingError):
        plan_replay(pipeline.capture([f"INSERT INTO {db}.kv VALUES (9, 'z')"]), pipeline.checkpoint(),
                    pipeline.table_positions())
    # the retry: the same job again, here on the suite's session (the crash above was a real job's)
    run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets)
    assert pipeline.table_positions().pending_batch() is None
    run_merge(spark, pipeline.manifest_uri(pipeline.batches[-1]), pipeline.secrets)
    assert_same_database(leader, follower, db)  # no shadow or replaced table left behind either
    assert pipeline.staging_tables() == [] and pipeline.scratch_files() == []


def _no_spark():
    raise AssertionError("the merge started a Spark session")


@pytest.mark.parametrize("driver_rows", [DRIVER_NET_ROWS, 0], ids=["by-the-driver", "by-the-executors"])
def test_a_copy_with_nothing_to_fold_in_is_loaded_by_the_driver_without_spark_or_by_the_executors(
        make_pipeline, leader, follower, spark, driver_rows):
    """A copy whose table did not change during it goes from its files into the shadow table, each
    file in one LOAD DATA: by the driver's threads, never starting Spark, or by Spark's tasks when
    ``driverNetRows`` is 0 (a driver that only drives). The follower equals the leader either way."""
    pipeline = make_pipeline(start=False)
    db = pipeline.database
    kv = ", ".join(f"({i}, 'v{i}')" for i in range(1, 201))
    leader.run_sql([f"CREATE DATABASE {db}", f"USE {db}", "CREATE TABLE kv (id INT PRIMARY KEY, v VARCHAR(20))",
                    "CREATE TABLE bag (v INT)", f"INSERT INTO kv VALUES {kv}", "INSERT INTO bag VALUES (1), (1), (2)"])
    batch = pipeline.snapshot(options=CHUNKED)
    copies = {s.table: s for s in batch.segments}
    assert len(copies["kv"].chunks) == 8 and all(s.catch_up is None for s in batch.segments)

    summary = run_merge(_no_spark if driver_rows else spark, pipeline.manifest_uri(batch), pipeline.secrets,
                        driver_rows)

    assert {t.table: t.rows_written for t in summary.tables} == {f"{db}.kv": 200, f"{db}.bag": 3}
    assert_same_database(leader, follower, db)
    assert pipeline.staging_tables() == [] and pipeline.scratch_files() == []


@pytest.mark.parametrize("point", ["before_swap", "after_swap"])
def test_a_crashed_resnapshot_keeps_the_damaged_rows_readable_until_the_copy_replaces_them(
        make_pipeline, leader, follower, spark, tmp_path, point):
    """A repair that crashes: readers of the damaged table see its old rows, then the whole copy,
    never a partial one; the other table is untouched; the retry finishes, the stream goes on."""
    pipeline = make_pipeline()
    db = pipeline.database
    run_merge(spark, pipeline.manifest_uri(pipeline.capture(kv_tables(db))), pipeline.secrets)
    follower.run_sql([f"DELETE FROM {db}.kv WHERE id = 2", f"UPDATE {db}.kv SET v = 'wrong' WHERE id = 1"])
    damaged, other = table_rows(follower, db, "kv"), table_rows(follower, db, "other")
    repair = pipeline.snapshot(only=[f"{db}.kv"])
    crashed = spark_submit(pipeline, repair, tmp_path / "job", {CRASH_ENV: point})
    assert crashed.returncode != 0 and f"{CRASH_ENV}={point}" in job_output(crashed), job_output(crashed)[-2000:]
    assert table_rows(follower, db, "kv") == (damaged if point == "before_swap" else table_rows(leader, db, "kv"))
    assert table_rows(follower, db, "other") == other
    retried = spark_submit(pipeline, repair, tmp_path / "retry")
    assert retried.returncode == 0, job_output(retried)[-3000:]
    assert "finishing the swap of its copy that a crash interrupted" in job_output(retried)
    leader.run_sql([f"INSERT INTO {db}.kv VALUES (4, 'd')", f"UPDATE {db}.other SET v = 20 WHERE id = 2"])
    run_merge(spark, pipeline.manifest_uri(pipeline.capture([])), pipeline.secrets)
    assert_same_database(leader, follower, db)


@pytest.mark.parametrize("point", ["after_staging", "before_commit"])
def test_a_table_a_rename_would_break_is_loaded_in_the_commit(make_pipeline, leader, follower, spark, tmp_path,
                                                               point):
    """Foreign keys name their tables and a rename takes a table's triggers along: such tables
    are loaded in the transaction that records their position, and keep their keys and triggers;
    a crash in it shows nothing of the copy, and the retry finishes it."""
    pipeline = make_pipeline(start=False)
    db = pipeline.database
    leader.run_sql(kv_tables(db) + [
        "CREATE TABLE child (id INT PRIMARY KEY, kv_id INT, FOREIGN KEY (kv_id) REFERENCES kv (id))",
        "INSERT INTO child VALUES (1, 1), (2, 3)"])
    batch = pipeline.snapshot()
    # the follower already has `other` as the leader does (so the copy keeps it), with a trigger
    follower.run_sql([f"CREATE DATABASE {db}", f"CREATE TABLE {db}.other (id INT PRIMARY KEY, v INT)",
                      f"CREATE TRIGGER {db}.other_audit BEFORE INSERT ON {db}.other FOR EACH ROW SET NEW.v = NEW.v"])
    crashed = spark_submit(pipeline, batch, tmp_path / "job", {CRASH_ENV: point})
    assert crashed.returncode != 0 and f"{CRASH_ENV}={point}" in job_output(crashed), job_output(crashed)[-2000:]
    assert "not through a shadow table: it has 0 trigger(s) and 1 foreign key(s)" in job_output(crashed)
    assert table_rows(follower, db, "child") == {} and pipeline.table_positions().of(db, "child").state == COPYING
    retried = spark_submit(pipeline, batch, tmp_path / "retry")
    assert retried.returncode == 0, job_output(retried)[-3000:]
    output = job_output(retried)
    assert f"{db}.kv: the copy is loaded in one stream" in output  # a foreign key points at it
    assert f"{db}.other: the copy is loaded in one stream inside the commit's transaction, not through a shadow " \
           "table: it has 1 trigger(s) and 0 foreign key(s)" in output
    assert_same_database(leader, follower, db)  # the foreign key is still there
    conn = follower.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT TRIGGER_NAME FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = %s", (db,))
            assert [t[0] for t in cur.fetchall()] == ["other_audit"]
    finally:
        conn.close()


CAUSES = {
    # rows a session wrote in STATEMENT format cannot be captured
    "statement rows": (["SET SESSION binlog_format = 'STATEMENT'", "UPDATE {db}.kv SET v = 'by statement' WHERE id = 1"],
                       r"statement-format DML .*resnapshot"),
    # a table altered with the binlog off: its rows change shape with no DDL to say how
    "altered unlogged": (["UPDATE {db}.kv SET v = 'before' WHERE id = 1", "SET SESSION sql_log_bin = 0",
                          "ALTER TABLE {db}.kv ADD COLUMN w INT DEFAULT 5", "SET SESSION sql_log_bin = 1",
                          "UPDATE {db}.kv SET v = 'after' WHERE id = 2"],
                         r"kv changed shape at .* without a DDL statement in the binlog.*resnapshot"),
}


@pytest.mark.parametrize("cause", sorted(CAUSES))
def test_uncapturable_rows_stop_the_stream_until_their_table_is_copied_again(make_pipeline, leader, follower, spark,
                                                                            cause):
    """Never stuck: the error names the resnapshot, and after it the stream goes on without losing
    the other table's changes."""
    pipeline = make_pipeline()
    db = pipeline.database
    first = pipeline.capture(kv_tables(db))
    run_merge(spark, pipeline.manifest_uri(first), pipeline.secrets)
    statements, error = CAUSES[cause]
    conn = leader.connect()
    try:
        with conn.cursor() as cur:
            for statement in statements:
                cur.execute(statement.format(db=db))
    finally:
        conn.close()
    with pytest.raises(CaptureError, match=error):
        pipeline.capture([f"UPDATE {db}.other SET v = 20 WHERE id = 2"])
    repair = pipeline.snapshot(only=[f"{db}.kv"])
    run_merge(spark, pipeline.manifest_uri(repair), pipeline.secrets)
    stream = pipeline.extract(pipeline.position, leader_position(pipeline.leader_settings))
    run_merge(spark, pipeline.manifest_uri(stream), pipeline.secrets)
    assert_same_database(leader, follower, db)


COPY = """
import json, sys
from mysql_cdc.capture.filters import TableFilter
from mysql_cdc.capture.snapshot.copy import snapshot_tables
from mysql_cdc.pipeline_options import SnapshotOptions
from mysql_cdc.mysql_server import MySQLSettings
from mysql_cdc.storage import StorageSpec
args = json.load(sys.stdin)
snapshot_tables(MySQLSettings(**args["leader"]), StorageSpec(args["storage"]), args["pipeline"],
                TableFilter((args["include"],)), options=SnapshotOptions(**args["options"]))
"""


def chunk_records(pipeline) -> dict[str, str]:
    """Chunk record key (under its table's directory) -> the position it was copied at."""
    return {key.split("/batches/", 1)[1].split("/", 1)[1]: json.loads(pipeline.store.get_bytes(key))["at"]
            for key in pipeline.store.list_keys(f"{pipeline.name}/batches/") if key.endswith(".json")
            and "/chunk-" in key}


@pytest.mark.parametrize("point", ["copy_planned", "copy_after_chunk", "copy_before_manifest"])
def test_a_crashed_copy_resumes_from_what_it_wrote(make_pipeline, spark, point):
    """The extract dies (as a SIGKILL would) at each step of a copy; the leader changes meanwhile
    (rows in chunks copied and not yet copied, a row moved between chunks, a table dropped, one
    created, one altered); the retry resumes the same copy, reusing every chunk it had written,
    and the follower ends equal to the leader."""
    pipeline = make_pipeline(start=False)
    leader, follower, db = pipeline.leader, pipeline.follower, pipeline.database
    values = ", ".join(f"({i}, 'v{i}')" for i in range(1, 101))
    leader.run_sql([f"CREATE DATABASE {db}", f"USE {db}", "CREATE TABLE a_big (id INT PRIMARY KEY, v VARCHAR(20))",
                    "CREATE TABLE b_altered (id INT PRIMARY KEY, v INT)", "CREATE TABLE c_gone (id INT PRIMARY KEY)",
                    f"INSERT INTO a_big VALUES {values}", "INSERT INTO b_altered VALUES (1, 1), (2, 2)",
                    "INSERT INTO c_gone VALUES (1)",
                    # the copy splits a_big by the server's row estimate, which InnoDB updates in the
                    # background after the inserts (an estimate above 100, under load in CI, made 6
                    # chunks, not 5); measured now, it is exact for a table of one page
                    "ANALYZE TABLE a_big"])
    options = {"split_rows": 20, "workers": 1}  # one chunk at a time: the crash comes after the first
    crashed = subprocess.run(
        [sys.executable, "-c", COPY], capture_output=True, text=True, timeout=300,
        input=json.dumps({"leader": asdict(pipeline.leader_settings), "storage": pipeline.storage.uri,
                          "pipeline": pipeline.name, "include": f"{db}.*", "options": options}),
        env={**os.environ, CRASH_ENV: point, "PYTHONPATH": str(Path(mysql_cdc.__file__).parents[1])},
    )
    assert crashed.returncode == 137, crashed.stderr
    written = chunk_records(pipeline)
    assert len(written) == {"copy_planned": 0, "copy_after_chunk": 1, "copy_before_manifest": 7}[point]  # 5 + 1 + 1
    leader.run_sql([f"USE {db}", "UPDATE a_big SET v = 'changed' WHERE id IN (1, 50, 99)",
                    "UPDATE a_big SET id = 150 WHERE id = 2", "DELETE FROM a_big WHERE id = 60",
                    "INSERT INTO a_big VALUES (200, 'new')"])
    if point == "copy_planned":
        leader.run_sql([f"USE {db}", "DROP TABLE c_gone", "CREATE TABLE d_born (id INT PRIMARY KEY)",
                        "INSERT INTO d_born VALUES (1)", "ALTER TABLE b_altered ADD COLUMN w INT DEFAULT 5"])

    batch = pipeline.snapshot(options=SnapshotOptions(**options))
    reused = {k: at for k, at in chunk_records(pipeline).items() if written.get(k) == at}
    assert reused == written  # every chunk written before the crash is in the copy as it was
    if point == "copy_after_chunk":
        (big, *_) = batch.segments
        assert len(big.chunks) == 5 and big.catch_up is not None and big.catch_up.row_count == 6
    run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets)
    stream = pipeline.capture([f"USE {db}", "UPDATE a_big SET v = 'after' WHERE id = 3"])
    run_merge(spark, pipeline.manifest_uri(stream), pipeline.secrets)
    assert_same_database(leader, follower, db)


def test_a_unique_value_that_moves_between_chunks_is_loaded_once(make_pipeline, spark):
    """The chunks of a copy are read at different positions, so together they can hold a state the
    leader never had: here the first chunk (written, then the copy crashed) holds email 'x' at id
    1, and the rest, copied after 'x' moved to id 90, holds it at id 90 too. The merge folds each
    chunk's catch-up into its rows before the load, so the follower's UNIQUE key never sees both
    (loaded as they were, LOAD DATA refused the duplicate and the snapshot could never finish)."""
    pipeline = make_pipeline(start=False)
    leader, follower, db = pipeline.leader, pipeline.follower, pipeline.database
    rows = ", ".join(f"({i}, {repr('x') if i == 1 else 'NULL'})" for i in range(1, 101))
    leader.run_sql([f"CREATE DATABASE {db}", f"USE {db}",
                    "CREATE TABLE people (id INT PRIMARY KEY, email VARCHAR(20) NULL, UNIQUE KEY (email))",
                    f"INSERT INTO people VALUES {rows}"])
    options = {"split_rows": 20, "workers": 1}
    crashed = subprocess.run(
        [sys.executable, "-c", COPY], capture_output=True, text=True, timeout=300,
        input=json.dumps({"leader": asdict(pipeline.leader_settings), "storage": pipeline.storage.uri,
                          "pipeline": pipeline.name, "include": f"{db}.*", "options": options}),
        env={**os.environ, CRASH_ENV: "copy_after_chunk", "PYTHONPATH": str(Path(mysql_cdc.__file__).parents[1])},
    )
    assert crashed.returncode == 137 and len(chunk_records(pipeline)) == 1, crashed.stderr
    leader.run_sql([f"USE {db}", "BEGIN", "UPDATE people SET email = NULL WHERE id = 1",
                    "UPDATE people SET email = 'x' WHERE id = 90", "COMMIT"])

    batch = pipeline.snapshot(options=SnapshotOptions(**options))
    (people,) = batch.segments
    assert people.catch_up is not None and people.catch_up.row_count == 2, "the chunks were not apart"
    summary = run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets)

    assert_same_database(leader, follower, db)
    (report,) = summary.tables
    # the catch-up updates id 1 only: id 90's chunk was copied after the move
    assert (report.rows_in, report.updated, report.rows_written) == (100, 1, 100)


@pytest.mark.parametrize("table, refusal", [
    # keyless, with duplicate rows of its own: only the driver's count of the shadow sees it
    ("bag (v INT)", r"loaded 6 rows where 3 were staged .*run the merge again"),
    # keyed: the second load fails on the duplicate keys, before any count
    ("kv (v INT PRIMARY KEY)", r"Duplicate entry '1' for key 'PRIMARY' \(code 1062\)"),
])
def test_a_copy_loaded_twice_is_refused_and_the_rerun_loads_it_afresh(make_pipeline, leader, follower, spark,
                                                                     monkeypatch, table, refusal):
    """A Spark task retried after its load would load its rows into the shadow twice: the merge
    fails with nothing swapped in, and running the merge again, as the keyless error says, loads
    the copy afresh."""
    pipeline = make_pipeline(start=False)
    db, name = pipeline.database, table.split()[0]
    leader.run_sql([f"CREATE DATABASE {db}", f"CREATE TABLE {db}.{table}",
                    f"INSERT INTO {db}.{name} VALUES " + ("(1), (1), (2)" if name == "bag" else "(1), (2), (3)")])
    batch = pipeline.snapshot()
    load_once = MySQLSink._load_files

    def load_twice(sink, job, copy, plan):  # what a task that Spark ran again after its load leaves
        return load_once(sink, job, copy, plan) + load_once(sink, job, copy, plan)

    monkeypatch.setattr(MySQLSink, "_load_files", load_twice)
    with pytest.raises(Exception, match=refusal):
        run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets)
    monkeypatch.undo()
    assert table_rows(follower, db, name) == {} and pipeline.table_positions().of(db, name).state == COPYING
    run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets)
    assert_same_database(leader, follower, db)  # the doubled shadow is gone too
