"""A run that applies a copy leaves every table at one transaction boundary, checked right after
that run, on MariaDB and on MySQL 9.7 (leader and follower of the same kind).

The writer's transactions each write a copied table and two tables the resnapshot does not touch
(one keyed, one keyless), tagged with a tick: 1, 2, 3, ... in commit order. It commits before the
run (between the checkpoint and the copy) and during it. Whatever position the run ends at, the
follower must then hold ticks 1..K in every table for one K, never some tick in one table and not
in another (a transaction seen half applied), and K must reach every tick committed before the run
began. Before this was fixed, the copied table stood at the copy's tick while the others stood at
the checkpoint's, until the next run.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from merge_helpers import assert_same_database

SUCCESS = "success"
ALL_SUCCESS = {"wait_for_changes": SUCCESS, "extract_batch": SUCCESS, "merge_batch": SUCCESS, "check_lag": SUCCESS, "retire_batches": SUCCESS}
ACCOUNTS = 20


class TickWriter:
    """Transactions on the leader, tick k: a ledger row and an audit row (tables the resnapshot
    leaves alone) and account k % 20's balance and last tick (a table it copies)."""

    def __init__(self, server, db: str):
        self.server, self.db, self.ticks = server, db, 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None

    def commit(self, n: int) -> None:
        conn = self.server.connect(database=self.db)
        try:
            for _ in range(n):
                self._tick(conn)
        finally:
            conn.close()

    def _tick(self, conn) -> None:
        k = self.ticks + 1
        conn.begin()  # one transaction per tick (the servers' connect() is autocommit)
        with conn.cursor() as cur:
            cur.execute("INSERT INTO ledger (tick, amount) VALUES (%s, %s)", (k, k * 1.5))
            cur.execute("INSERT INTO audit VALUES (%s, 'tick')", (k,))
            cur.execute("UPDATE accounts SET balance = balance + 1, last_tick = %s WHERE id = %s", (k, k % ACCOUNTS))
        conn.commit()
        self.ticks = k

    def start(self) -> "TickWriter":
        def run():
            conn = self.server.connect(database=self.db)
            try:
                while not self._stop.is_set():
                    self._tick(conn)
                    self._stop.wait(0.02)
            except BaseException as exc:
                self.error = exc
            finally:
                conn.close()

        self._stop.clear()
        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        if self.error is not None:
            raise self.error


def rows(server, sql: str) -> list[tuple]:
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            return list(cur.fetchall())
    finally:
        conn.close()


def assert_one_transaction_boundary(follower, db: str, committed_before: int) -> int:
    """The follower holds ticks 1..K in every table for one K >= ``committed_before``; returns K."""
    ledger = sorted(r[0] for r in rows(follower, f"SELECT tick FROM `{db}`.ledger"))
    audit = Counter(r[0] for r in rows(follower, f"SELECT tick FROM `{db}`.audit WHERE tick IS NOT NULL"))
    k = len(ledger)
    assert ledger == list(range(1, k + 1)), f"ledger holds ticks {ledger[-5:]} of {k}"
    assert audit == Counter(range(1, k + 1)), f"audit differs from ledger at tick {k}: {sorted(audit)[-5:]}"
    accounts = dict(rows(follower, f"SELECT id, last_tick FROM `{db}`.accounts"))
    assert max(accounts.values()) == k, f"accounts stand at tick {max(accounts.values())}, the other tables at {k}"
    balances = dict(rows(follower, f"SELECT id, balance FROM `{db}`.accounts"))
    assert balances == {i: 100 + sum(1 for t in range(1, k + 1) if t % ACCOUNTS == i) for i in range(ACCOUNTS)}
    assert k >= committed_before, f"the run ended at tick {k}, before the {committed_before} committed before it"
    return k


@dataclass
class Flavor:
    name: str
    leader: object
    follower: object
    leader_conn: str
    follower_conn: str


@pytest.fixture(scope="module", params=["mariadb", "mysql"])
def flavor(request, airflow_connections) -> Flavor:
    if request.param == "mariadb":
        return Flavor("mariadb", request.getfixturevalue("leader"), request.getfixturevalue("follower"),
                      "mysql_leader", "mysql_follower")
    leader, follower = request.getfixturevalue("mysql_leader"), request.getfixturevalue("mysql_follower")
    users = request.getfixturevalue("mysql_leader_user"), request.getfixturevalue("mysql_follower_user")
    for conn_id, user in zip(("RS_MYSQL_LEADER", "RS_MYSQL_FOLLOWER"), users):
        os.environ[f"AIRFLOW_CONN_{conn_id}"] = json.dumps({
            "conn_type": "mysql", "host": user["host"], "port": user["port"], "login": user["user"],
            "password": user["password"]})
    return Flavor("mysql", leader, follower, "rs_mysql_leader", "rs_mysql_follower")


@pytest.fixture
def pipeline(flavor, tmp_path):
    """A database on the leader with history, a pipeline whose first run copies it."""
    db = f"rs_{uuid.uuid4().hex[:8]}"
    flavor.leader.run_sql([
        f"CREATE DATABASE {db}", f"USE {db}",
        "CREATE TABLE accounts (id INT PRIMARY KEY, balance INT NOT NULL, last_tick INT NOT NULL DEFAULT 0)",
        "CREATE TABLE notes (id INT PRIMARY KEY, body VARCHAR(40))",
        "CREATE TABLE ledger (id INT AUTO_INCREMENT PRIMARY KEY, tick INT NOT NULL, amount DECIMAL(12,2))",
        "CREATE TABLE audit (tick INT, what VARCHAR(10))",  # no key: duplicates would show
        "INSERT INTO accounts (id, balance) VALUES " + ", ".join(f"({i}, 100)" for i in range(ACCOUNTS)),
        "INSERT INTO notes VALUES (1, 'a'), (2, 'b'), (3, 'c')",
        "INSERT INTO audit VALUES (NULL, 'before'), (NULL, 'before')",
    ], database=None)
    name = f"cdc_{db}"
    config = {"name": name, "schedule": None, "leader_conn_id": flavor.leader_conn,
              "follower_conn_id": flavor.follower_conn, "storage_uri": f"file://{tmp_path / 'batches'}",
              "include": [f"{db}.*"], "wait_timeout": 3, "poke_interval": 1, "retries": 1, "retry_delay": 1}
    Path(os.environ["CDC_PIPELINES_FILE"]).write_text(yaml.safe_dump({"pipelines": [config]}))
    return name, db


def resnapshot_with_writer(dag_runner, flavor, name: str, db: str, writer: TickWriter, conf: dict):
    """The resnapshot run while the writer commits; the ticks committed before it began."""
    committed_before = writer.ticks
    writer.start()
    try:
        result = dag_runner.run(name, conf=conf)
    finally:
        writer.stop()
    return result, committed_before


def test_a_resnapshot_of_a_damaged_and_a_dropped_table_leaves_one_position(dag_runner, flavor, pipeline):
    name, db = pipeline
    first = dag_runner.run(name)  # the snapshot
    assert first.tasks == ALL_SUCCESS, first.log_file
    assert_same_database(flavor.leader, flavor.follower, db)

    writer = TickWriter(flavor.leader, db)
    writer.commit(15)  # between the checkpoint and the copy: tables copied and not alike
    # DDL on a table the resnapshot does not copy, in the same window
    flavor.leader.run_sql([f"ALTER TABLE {db}.ledger ADD COLUMN note VARCHAR(20) DEFAULT 'n'"])
    writer.commit(5)
    flavor.follower.run_sql([f"DELETE FROM {db}.accounts WHERE id % 3 = 0", f"UPDATE {db}.accounts SET balance = -1",
                             f"DROP TABLE {db}.notes"])

    repair, committed_before = resnapshot_with_writer(
        dag_runner, flavor, name, db, writer, {"resnapshot": [f"{db}.accounts", f"{db}.notes"]})
    assert repair.tasks == ALL_SUCCESS, repair.log_file
    # right after the run, before any other: one transaction boundary in every table
    assert_one_transaction_boundary(flavor.follower, db, committed_before)
    assert rows(flavor.follower, f"SELECT id, body FROM {db}.notes ORDER BY id") == [(1, "a"), (2, "b"), (3, "c")]
    assert "catching up every other table" in repair.log, repair.log_file

    writer.commit(3)  # the stream goes on from there (the writer's thread may have committed none after the copy)
    after = dag_runner.run(name)
    assert after.tasks == ALL_SUCCESS, after.log_file
    assert_same_database(flavor.leader, flavor.follower, db)


def test_a_crash_between_the_copy_and_the_catch_up_is_finished_by_the_retry(dag_runner, flavor, pipeline,
                                                                             spark_submit_spy):
    name, db = pipeline
    assert dag_runner.run(name).tasks == ALL_SUCCESS
    writer = TickWriter(flavor.leader, db)
    writer.commit(10)
    flavor.follower.run_sql([f"UPDATE {db}.accounts SET balance = 0"])
    calls = len(spark_submit_spy.calls())
    spark_submit_spy.crash_flag.write_text("between_batches")

    repair, committed_before = resnapshot_with_writer(dag_runner, flavor, name, db, writer,
                                                      {"resnapshot": [f"{db}.accounts"]})

    assert repair.tasks == ALL_SUCCESS, repair.log_file
    assert repair.tries["merge_batch"] == 2, repair.log_file
    crashed, retried = spark_submit_spy.calls()[calls:calls + 2]
    assert crashed["crash"] == "between_batches" and crashed["rc"] != 0, crashed
    assert retried["rc"] == 0, retried
    # the retry found the copy applied and applied only the catch-up: nothing doubled
    assert "is already applied" in repair.log, repair.log_file
    assert_one_transaction_boundary(flavor.follower, db, committed_before)
    writer.commit(3)
    assert dag_runner.run(name).tasks == ALL_SUCCESS
    assert_same_database(flavor.leader, flavor.follower, db)
