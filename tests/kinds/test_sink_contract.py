"""What every follower kind's sink must do, run against every kind in ``kinds.KINDS``: a new kind
proves itself by adding its ``Kind`` below (its pipeline, how it is compared with the leader, how
its merge job is submitted, its crash points).

Every scenario runs the real merge job on real servers: a leader's workload, captured, merged,
and the follower compared with the leader by the kind's own comparison (a MySQL follower's
definitions and rows; a lake's rows at its consistent cut, read with delta-rs, never with the
product's reader). Each kind's own tests (``tests/kinds/<kind>``) hold what only it has (a MySQL
follower's flavors, a lake's changelog tables and maintenance)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import pytest

from iceberg_helpers import assert_iceberg_equals_leader, iceberg_submit
from lake_helpers import assert_lake_equals_leader, lake_submit
from merge_helpers import assert_same_database, job_output, spark_submit
from spark_under_test import SPARK_LINE
from mysql_cdc.capture.filters import TableFilter
from mysql_cdc.contracts import BinlogPosition
from mysql_cdc.kinds import KINDS
from mysql_cdc.spark_lines import DEFAULT_LINE
from mysql_cdc.kinds.delta.state.location import LakeLocation
from mysql_cdc.kinds.delta.verify import checksum_sides as lake_checksums
from mysql_cdc.kinds.iceberg.verify import checksum_sides as iceberg_checksums
from mysql_cdc.server_state import MySQLStateStore
from mysql_cdc.kinds.mysql.verify import checksum_sides as mysql_checksums
from mysql_cdc.merge import netting
from mysql_cdc.merge.errors import CheckpointError
from mysql_cdc.merge.job import run_merge
from mysql_cdc.merge.reader import change_schema
from mysql_cdc.merge.report import TableReport
from mysql_cdc.merge.session import RefusedSession
from mysql_cdc.merge.sink import ArrowRows, BatchJob, NetRows, SparkRows
from mysql_cdc.merge.spark_read import read_changes
from mysql_cdc.merge.transforms import after_checkpoint, net_changes
from mysql_cdc.storage import read_manifest
from mysql_cdc.monitor.verify import verify_pipeline
from mysql_cdc.pipeline_options import VerifyOptions


@dataclass(frozen=True)
class Kind:
    make: Callable  # request -> a started pipeline of this kind
    assert_equal: Callable  # pipeline -> None: the follower equals the leader
    submit: Callable  # (pipeline, batch, work_dir, env) -> the merge job's CompletedProcess
    row_crash_points: tuple[str, ...]  # the points of a row segment's commit
    ddl_crash_points: tuple[str, ...]
    copy_crash_points: tuple[str, ...]
    sides_and_state: Callable  # pipeline -> (its kind's checksum sides, its state store), for verification
    # why the default Spark line proves it for every line (another line's run, `make test-spark`,
    # skips it then); "": it runs on every line
    default_line_only: str = ""
    # a kind's variant (its sink with other settings) runs the tests whose scenarios its settings
    # change (their names; empty: every test), and of ``DDL_ACTIONS`` those named here (empty: all)
    only: frozenset[str] = frozenset()
    ddl_crash_actions: frozenset[str] = frozenset()
    # what the kind merges with no Spark at all (``FollowerKind.spark_needed`` says None): "rows" (a
    # batch of small tables and DDL), "copy" (a copy with nothing to fold in)
    without_spark: frozenset[str] = frozenset()

    def runs(self, test: str) -> bool:
        return not self.only or test in self.only


KIND_UNDER_TEST = {
    "mysql": Kind(
        make=lambda request: request.getfixturevalue("make_pipeline")(),
        assert_equal=lambda p: assert_same_database(p.leader, p.follower, p.database),
        submit=lambda p, batch, work_dir, env: spark_submit(p, batch, work_dir, env),
        row_crash_points=("after_staging", "before_commit"),
        ddl_crash_points=("after_ddl",),
        copy_crash_points=("before_swap", "after_swap"),
        sides_and_state=lambda p: (mysql_checksums(p.follower_settings), MySQLStateStore(p.follower_settings)),
        without_spark=frozenset({"rows", "copy"}),
    ),
    "delta": Kind(
        make=lambda request: request.getfixturevalue("lake_pipeline")(),
        assert_equal=assert_lake_equals_leader,
        submit=lambda p, batch, work_dir, env: lake_submit(p, batch, work_dir, env),
        row_crash_points=("after_staging", "between_tables", "before_checkpoint"),
        ddl_crash_points=("before_checkpoint",),
        copy_crash_points=("before_checkpoint",),
        sides_and_state=lambda p: (lake_checksums(LakeLocation(p.lake)), p.state),
    ),
    "iceberg": Kind(
        make=lambda request: request.getfixturevalue("iceberg_pipeline")(),
        assert_equal=assert_iceberg_equals_leader,
        submit=lambda p, batch, work_dir, env: iceberg_submit(p, batch, work_dir, env),
        row_crash_points=("between_tables", "before_checkpoint"),
        ddl_crash_points=("before_checkpoint",),
        copy_crash_points=("before_checkpoint",),
        sides_and_state=lambda p: (iceberg_checksums(p.catalog), p.state),
        default_line_only="it writes no table with Spark (pyiceberg, from the driver)",
        without_spark=frozenset({"rows"}),
    ),
}
# Delta's portable tables (no deletion vectors, no column mapping) change how rows are rewritten
# and how a column is renamed or dropped (the table rewritten); commits, crash points, copies and
# verification are the same code as for the default tables
KIND_UNDER_TEST["delta portable"] = replace(
    KIND_UNDER_TEST["delta"], make=lambda request: request.getfixturevalue("lake_pipeline")(features="portable"),
    default_line_only="the same Spark jobs as delta's, on tables of other properties",
    only=frozenset({"test_keyed_and_keyless_tables_and_key_changes_batch_after_batch",
                    "test_a_replayed_batch_changes_nothing", "test_ddl_is_replayed_in_binlog_order_between_rows",
                    "test_a_copy_is_swapped_in_whole_then_the_stream_follows", "test_every_type_round_trips_exactly",
                    "test_a_crash_in_every_ddl_action_then_the_retry"}),
    ddl_crash_actions=frozenset({"rename column", "drop column"}))


def test_every_kind_is_under_test():
    assert sorted({name.split()[0] for name in KIND_UNDER_TEST}) == sorted(KINDS)
    # a test's id starts with its kind, up to the first "-" (tests/conftest.py's scheduling)
    assert not [name for name in KIND_UNDER_TEST if "-" in name]
    for name, under_test in KIND_UNDER_TEST.items():
        assert under_test.only <= {n for n in globals() if n.startswith("test_")}, name
        assert under_test.ddl_crash_actions <= {action for action, _ in DDL_ACTIONS}, name


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Each test against each kind that runs it."""
    if "kind" in metafunc.fixturenames:
        kinds = [name for name in sorted(KIND_UNDER_TEST) if KIND_UNDER_TEST[name].runs(metafunc.function.__name__)]
        metafunc.parametrize("kind", kinds, indirect=True)


@pytest.fixture
def kind(request) -> Kind:
    under_test = KIND_UNDER_TEST[request.param]
    if under_test.default_line_only and SPARK_LINE != DEFAULT_LINE:
        pytest.skip(f"{request.param}: {under_test.default_line_only}; proven on the default line, {DEFAULT_LINE}")
    return under_test


@pytest.fixture
def pipeline(kind, request):
    return kind.make(request)


def schema(db: str) -> list[str]:
    return [f"CREATE DATABASE {db}", f"USE {db}",
            "CREATE TABLE keyed (id INT PRIMARY KEY, v VARCHAR(16), n INT)",
            "CREATE TABLE composite (k1 INT, k2 VARCHAR(8), v INT, PRIMARY KEY (k1, k2))",
            "CREATE TABLE bag (a INT, b VARCHAR(8))"]


def test_keyed_and_keyless_tables_and_key_changes_batch_after_batch(kind, pipeline, spark):
    db = pipeline.database
    batches = [
        schema(db) + ["INSERT INTO keyed VALUES (1, 'a', 1), (2, 'b', 2), (3, 'c', 3)",
                      "INSERT INTO composite VALUES (1, 'x', 1), (1, 'y', 2)",
                      "INSERT INTO bag VALUES (1, 'p'), (1, 'p'), (NULL, NULL), (2, NULL)"],
        [f"USE {db}", "UPDATE keyed SET id = 10 WHERE id = 1", "UPDATE keyed SET id = 1 WHERE id = 2",
         "UPDATE composite SET k2 = 'z' WHERE k1 = 1 AND k2 = 'x'", "DELETE FROM bag WHERE a = 1 LIMIT 1",
         "INSERT INTO bag VALUES (NULL, NULL)", "UPDATE bag SET b = 'q' WHERE a = 2"],
        [f"USE {db}", "DELETE FROM keyed WHERE id = 10", "INSERT INTO keyed VALUES (10, 'again', 0)",
         "UPDATE keyed SET v = 'same' WHERE id IN (1, 3)", "UPDATE keyed SET v = 'same' WHERE id IN (1, 3)",
         "DELETE FROM bag", "INSERT INTO bag VALUES (NULL, NULL), (NULL, NULL)"],
    ]
    for statements in batches:
        batch = pipeline.capture(statements)
        assert not run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets).noop
        kind.assert_equal(pipeline)
        assert pipeline.checkpoint().position == batch.end


def test_a_replayed_batch_changes_nothing(kind, pipeline, spark):
    db = pipeline.database
    first = pipeline.capture(schema(db) + ["INSERT INTO keyed VALUES (1, 'a', 1)", "INSERT INTO bag VALUES (1, 'p')"])
    run_merge(spark, pipeline.manifest_uri(first), pipeline.secrets)
    second = pipeline.capture([f"USE {db}", "INSERT INTO bag VALUES (1, 'p')", "UPDATE keyed SET n = n + 1"])
    run_merge(spark, pipeline.manifest_uri(second), pipeline.secrets)
    for batch in (first, second, second):
        assert run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets).noop
    kind.assert_equal(pipeline)
    assert pipeline.checkpoint().position == second.end


def test_ddl_is_replayed_in_binlog_order_between_rows(kind, pipeline, spark):
    db = pipeline.database
    statements = schema(db) + [
        "INSERT INTO keyed VALUES (1, 'a', 1)",
        "ALTER TABLE keyed ADD COLUMN extra VARCHAR(8)", "INSERT INTO keyed VALUES (2, 'b', 2, 'new')",
        "ALTER TABLE keyed RENAME COLUMN extra TO renamed", "UPDATE keyed SET renamed = 'r' WHERE id = 1",
        "ALTER TABLE keyed DROP COLUMN n", "INSERT INTO keyed VALUES (3, 'c', 'x')",
        "INSERT INTO bag VALUES (1, 'p')", "TRUNCATE TABLE bag", "INSERT INTO bag VALUES (2, 'q')",
        "CREATE TABLE later (id INT PRIMARY KEY)", "INSERT INTO later VALUES (1)",
        "RENAME TABLE later TO renamed_later", "INSERT INTO renamed_later VALUES (2)",
        "DROP TABLE composite",
    ]
    batch = pipeline.capture(statements)
    run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets)
    kind.assert_equal(pipeline)
    assert pipeline.checkpoint().position == batch.end


def test_a_copy_is_swapped_in_whole_then_the_stream_follows(kind, pipeline, spark):
    db = pipeline.database
    pipeline.leader.run_sql(schema(db) + ["INSERT INTO keyed VALUES (1, 'a', 1), (2, 'b', 2)",
                                          "INSERT INTO bag VALUES (1, 'p'), (1, 'p')"])
    copy = pipeline.snapshot()
    run_merge(spark, pipeline.manifest_uri(copy), pipeline.secrets)
    kind.assert_equal(pipeline)
    stream = pipeline.capture([f"USE {db}", "INSERT INTO keyed VALUES (3, 'c', 3)", "DELETE FROM bag LIMIT 1"])
    run_merge(spark, pipeline.manifest_uri(stream), pipeline.secrets)
    kind.assert_equal(pipeline)
    pipeline.leader.run_sql([f"UPDATE {db}.keyed SET n = n + 100"])  # a repair's copy of one table
    again = pipeline.snapshot(only=[f"{db}.keyed"])
    run_merge(spark, pipeline.manifest_uri(again), pipeline.secrets)
    kind.assert_equal(pipeline)


def _crash_then_retry(kind, pipeline, spark, batch, point, work_dir):
    crashed = kind.submit(pipeline, batch, work_dir, {"MYSQL_CDC_CRASH_AT": point})
    assert crashed.returncode != 0 and f"MYSQL_CDC_CRASH_AT={point}" in job_output(crashed), job_output(crashed)[-2000:]
    run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets)  # the retry
    kind.assert_equal(pipeline)
    assert run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets).noop


def _net_rows(job: BatchJob, segment, targets, position, netted: str) -> list[NetRows]:
    """The segment's tables' net rows after ``position`` as the merge hands them to a writer, netted
    on the driver (Arrow) or by Spark (DataFrames)."""
    tables = segment.tables
    if netted == "driver":
        items = [(change_schema(t, frozenset()), t, position) for t in tables]
        rows = [ArrowRows(*pair) for pair in netting.read_and_net(job.store, job.batch.prefix, items)]
    else:
        changes = [after_checkpoint(read_changes(job.spark(), job.storage, job.batch.prefix, t, frozenset()), position)
                   for t in tables]
        rows = [SparkRows(c, net_changes(c, t)) for c, t in zip(changes, tables)]
    return [NetRows(i, t, targets[i], r, TableReport(t.qualified_name, t.row_count))
            for i, (t, r) in enumerate(zip(tables, rows))]


def test_what_the_kind_merges_without_spark_needs_no_session(kind, pipeline, spark):
    """``merge: {spark: when_needed}`` trusts the kind's word: a batch it says needs no Spark is
    merged with a session that refuses to start, and the follower equals the leader; what it says
    needs Spark (with the reason it gives) is merged by Spark. A copy, then rows and DDL."""
    db = pipeline.database
    pipeline.leader.run_sql(schema(db) + ["INSERT INTO keyed VALUES (1, 'a', 1), (2, 'b', 2)",
                                          "INSERT INTO bag VALUES (1, 'p'), (1, 'p')"])
    statements = [f"USE {db}", "UPDATE keyed SET id = 3 WHERE id = 1", "DELETE FROM bag LIMIT 1",
                  "ALTER TABLE keyed ADD COLUMN extra VARCHAR(8)", "INSERT INTO keyed VALUES (4, 'd', 4, 'x')",
                  "CREATE TABLE later (id INT PRIMARY KEY)", "INSERT INTO later VALUES (1)"]
    merged_without = set()
    for what in ("copy", "rows"):
        batch = pipeline.snapshot() if what == "copy" else pipeline.capture(statements)
        reason = pipeline.secrets.sink.spark_needed(read_manifest(pipeline.store, pipeline.manifest_uri(batch)),
                                                    netting.DRIVER_NET_ROWS)
        if reason is None:
            run_merge(RefusedSession(), pipeline.manifest_uri(batch), pipeline.secrets)
            merged_without.add(what)
        else:
            assert reason.strip(), what
            run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets)
        kind.assert_equal(pipeline)
    assert merged_without == kind.without_spark
    assert pipeline.checkpoint().position == batch.end


@pytest.mark.parametrize("netted", ["driver", "spark"])
def test_a_segments_commit_refuses_a_checkpoint_that_moved_and_writes_nothing(kind, pipeline, spark, netted):
    """The writer's commit carries the checkpoint it expects: given one the follower is not at (as
    when another merge of the pipeline moved it), it refuses with ``CheckpointError`` and nothing it
    staged reaches the follower (a keyless table's row would be there twice after the real merge)."""
    db = pipeline.database
    first = pipeline.capture(schema(db) + ["INSERT INTO keyed VALUES (1, 'a', 1)", "INSERT INTO bag VALUES (1, 'p')"])
    run_merge(spark, pipeline.manifest_uri(first), pipeline.secrets)
    second = pipeline.capture([f"USE {db}", "INSERT INTO keyed VALUES (2, 'b', 2)", "INSERT INTO bag VALUES (1, 'p')"])
    store = pipeline.secrets.storage.open()
    batch = read_manifest(store, pipeline.manifest_uri(second))
    (segment,) = [s for s in batch.segments if s.kind == "rows"]
    at = pipeline.checkpoint()
    elsewhere = replace(at, position=BinlogPosition(at.position.file, at.position.offset + 1))
    done = replace(at, position=segment.end, batch_id=batch.batch_id)
    with pipeline.secrets.sink.sink(batch.server_flavor) as sink:
        job = BatchJob(lambda: spark, pipeline.secrets.storage, store, batch)
        sink.begin(job)
        targets = sink.check_tables(list(segment.tables))
        with sink.segment(job, segment, elsewhere) as writer:
            writer.apply(_net_rows(job, segment, targets, at.position, netted))
            with pytest.raises(CheckpointError, match=f"checkpoint of pipeline '{pipeline.name}' moved"):
                writer.commit(done)
    assert pipeline.checkpoint().position == at.position
    run_merge(spark, pipeline.manifest_uri(second), pipeline.secrets)
    kind.assert_equal(pipeline)
    assert pipeline.checkpoint().position == second.end


def test_a_crash_at_each_point_of_a_row_segment_then_the_retry(kind, pipeline, spark, tmp_path):
    db = pipeline.database
    first = pipeline.capture(schema(db) + ["INSERT INTO keyed VALUES (1, 'a', 100), (2, 'b', 100)",
                                           "INSERT INTO bag VALUES (1, 'p')"])
    run_merge(spark, pipeline.manifest_uri(first), pipeline.secrets)
    for n, point in enumerate(kind.row_crash_points):
        transfer = pipeline.capture([f"USE {db}", "BEGIN", "UPDATE keyed SET n = n - 30 WHERE id = 1",
                                     "UPDATE keyed SET n = n + 30 WHERE id = 2", f"INSERT INTO bag VALUES ({n}, 'moved')",
                                     f"INSERT INTO composite VALUES ({n}, 'k', {n})", "COMMIT"])
        _crash_then_retry(kind, pipeline, spark, transfer, point, tmp_path / point)
        assert pipeline.checkpoint().position == transfer.end


def test_a_crash_at_each_point_of_a_ddl_segment_then_the_retry(kind, pipeline, spark, tmp_path):
    db = pipeline.database
    first = pipeline.capture(schema(db) + ["INSERT INTO keyed VALUES (1, 'a', 1)"])
    run_merge(spark, pipeline.manifest_uri(first), pipeline.secrets)
    for n, point in enumerate(kind.ddl_crash_points):
        ddl = pipeline.capture([f"USE {db}", f"ALTER TABLE keyed ADD COLUMN c{n} INT",
                                f"UPDATE keyed SET c{n} = {n}"])
        _crash_then_retry(kind, pipeline, spark, ddl, point, tmp_path / point)
        assert pipeline.checkpoint().position == ddl.end


# each DDL action a sink replays, in an order one schema goes through, with rows after it, so that a
# retry that redid an action wrongly (a table renamed twice, a column dropped with its values, rows
# lost or doubled) shows
DDL_ACTIONS = (
    ("create table", ["CREATE TABLE fresh (id INT PRIMARY KEY, v INT)", "INSERT INTO fresh VALUES (1, 1)"]),
    ("rename column", ["ALTER TABLE keyed RENAME COLUMN v TO label", "UPDATE keyed SET label = 'r' WHERE id = 1"]),
    ("drop column", ["ALTER TABLE keyed DROP COLUMN n", "INSERT INTO keyed VALUES (9, 'z')"]),
    ("truncate", ["TRUNCATE TABLE bag", "INSERT INTO bag VALUES (3, 'r')"]),
    ("drop table", ["DROP TABLE composite", "INSERT INTO keyed VALUES (10, 'y')"]),
    ("rename table", ["RENAME TABLE keyed TO moved", "INSERT INTO moved VALUES (11, 'x')"]),
)


def test_a_crash_in_every_ddl_action_then_the_retry(kind, pipeline, spark, tmp_path):
    db = pipeline.database
    first = pipeline.capture(schema(db) + ["INSERT INTO keyed VALUES (1, 'a', 1), (2, 'b', 2)",
                                           "INSERT INTO composite VALUES (1, 'x', 1)",
                                           "INSERT INTO bag VALUES (1, 'p'), (1, 'p'), (2, 'q')"])
    run_merge(spark, pipeline.manifest_uri(first), pipeline.secrets)
    (point, *_) = kind.ddl_crash_points
    for action, statements in DDL_ACTIONS:
        if kind.ddl_crash_actions and action not in kind.ddl_crash_actions:
            continue
        # the DDL is the batch's first segment: the first time the job reaches the point is in its replay
        ddl = pipeline.capture([f"USE {db}", *statements])
        _crash_then_retry(kind, pipeline, spark, ddl, point, tmp_path / action.replace(" ", "_"))
        assert pipeline.checkpoint().position == ddl.end, action


def test_a_crash_at_each_point_of_a_copy_then_the_retry(kind, pipeline, spark, tmp_path):
    db = pipeline.database
    pipeline.leader.run_sql(schema(db) + ["INSERT INTO keyed VALUES (1, 'a', 1), (2, 'b', 2)"])
    run_merge(spark, pipeline.manifest_uri(pipeline.snapshot()), pipeline.secrets)
    for n, point in enumerate(kind.copy_crash_points):
        pipeline.leader.run_sql([f"UPDATE {db}.keyed SET n = n + {n + 1}"])
        repair = pipeline.snapshot(only=[f"{db}.keyed"])
        _crash_then_retry(kind, pipeline, spark, repair, point, tmp_path / point)
        # a repair's copy moves its table's position, not the pipeline's
        (copied,) = [p for p in pipeline.table_positions().by_table.values() if p.table == "keyed"]
        (segment,) = repair.segments
        assert copied.position == segment.at


def test_every_type_round_trips_exactly(kind, pipeline, spark):
    """Every MySQL type of the type tests (``tests/merge/test_merge_types.py``'s columns: DECIMAL,
    BIGINT UNSIGNED above 2^63, temporal types with microseconds, YEAR, JSON, ENUM, SET, BIT,
    binaries, utf8mb4), keyed and keyless, inserted, updated to other values and from NULLs."""
    from test_merge_types import FILL_NULLS, UPDATE_ALL, type_tables

    db = pipeline.database
    first = pipeline.capture(type_tables(db))
    run_merge(spark, pipeline.manifest_uri(first), pipeline.secrets)
    kind.assert_equal(pipeline)
    second = pipeline.capture([
        f"USE {db}", f"UPDATE types {UPDATE_ALL} WHERE id = 1", f"UPDATE types {FILL_NULLS} WHERE id = 3",
        "DELETE FROM types WHERE id = 2", f"UPDATE bag {UPDATE_ALL} WHERE ti = -128 LIMIT 1",
        f"UPDATE bag {FILL_NULLS} WHERE ti IS NULL LIMIT 1", "DELETE FROM bag WHERE ti = 127",
    ])
    run_merge(spark, pipeline.manifest_uri(second), pipeline.secrets)
    kind.assert_equal(pipeline)


def _verify(kind, pipeline, **options):
    sides, state = kind.sides_and_state(pipeline)
    return verify_pipeline(pipeline.name, pipeline.leader_settings, sides, state,
                           TableFilter((f"{pipeline.database}.*",)), VerifyOptions(**{"chunk_rows": 2, **options}),
                           log=lambda _: None)


def test_verification_right_after_a_leader_change_is_never_drift(kind, pipeline, spark):
    """Started right after the leader changed (a new table, changed rows) and before the merge:
    with no merge within ``settle_timeout`` it says the follower is behind and compares nothing;
    with the merge during its wait it compares the follower at the leader's position: equal."""
    import threading
    import time

    db = pipeline.database
    first = pipeline.capture(schema(db) + ["INSERT INTO keyed VALUES (1, 'a', 1), (2, 'b', 2)"])
    run_merge(spark, pipeline.manifest_uri(first), pipeline.secrets)
    assert _verify(kind, pipeline, rechecks=0).status == "ok"
    change = pipeline.capture([f"USE {db}", "CREATE TABLE created_later (id INT PRIMARY KEY, v INT)",
                               "INSERT INTO created_later VALUES (1, 1)", "UPDATE keyed SET n = 7 WHERE id = 1"])

    behind = _verify(kind, pipeline, rechecks=2, settle_timeout=1)
    assert (behind.status, behind.drifted, behind.missing) == ("behind", [], [])

    def merge_soon():
        time.sleep(2)
        run_merge(spark, pipeline.manifest_uri(change), pipeline.secrets)

    merger = threading.Thread(target=merge_soon)
    merger.start()
    try:
        waited = _verify(kind, pipeline, rechecks=1, settle_timeout=300)
    finally:
        merger.join()
    assert waited.status == "ok", waited.describe()
    assert waited.tables == 4 and waited.missing == []
