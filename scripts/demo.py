#!/usr/bin/env python3
"""`make demo`: the seed document's flvDb.pet session replicated through real Airflow DAG runs.

1. starts a local MariaDB leader (ROW binlog) and follower (scripts/local_services.py), and gives the
   leader a history: a database with rows whose binlog is already purged;
2. creates a throw-away AIRFLOW_HOME with SQLite metadata whose dags/plugins folders are this
   repository's, and the connections the default pipelines file names (AIRFLOW_CONN_*);
3. `airflow dags test mysql_cdc`: the first run copies the existing tables (a snapshot); then the
   seed workload on the leader and another run: the deferrable sensor, the extract into a Parquet
   change batch, and spark-submit of the merge job;
4. runs the DAG once more with nothing new: it ends skipped in seconds, without Spark;
5. runs the verification DAG (checksums of every table on both sides) and prints the figures the
   CDC pipelines page shows (lag, the batches, the verification);
6. prints the leader's and the follower's `pet` side by side and exits non-zero unless equal.

Batches go to file://.local/demo/batches; CDC_DEMO_STORAGE=s3 puts them in a local S3 endpoint
(moto) through the aws_default connection instead. The merge runs in local[2]; CDC_DEMO_SPARK=cluster
starts a Spark standalone cluster (a master and a worker from pyspark's distribution) on loopback,
points spark_default at it, and shows the merge application in the master's list. CDC_DEMO_FOLLOWER=delta
makes the follower a Delta Lake (.local/demo/lake, or s3://.../lake with CDC_DEMO_STORAGE=s3): the
same runs, the leader's tables read back from the lake with delta-rs at its consistent cut.
CDC_DEMO_FOLLOWER=iceberg makes it Iceberg tables in a JDBC catalog (database iceberg_catalog on the
follower server; warehouse .local/demo/warehouse, or s3://.../warehouse), read back with pyiceberg
at the cut. Everything the demo writes is under
.local/demo/ (logs: .local/demo/runs/*.log). Servers are stopped on exit.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "scripts"), str(REPO / "plugins")]

from demo_workload import seed_statements  # noqa: E402
from local_services import MariaDBServer, MotoS3Server, SparkStandaloneCluster  # noqa: E402
from mysql_cdc.monitor.lag import pipeline_figures  # noqa: E402
from mysql_cdc.kinds.delta.state import DeltaStateStore, LakeLocation  # noqa: E402
from mysql_cdc.kinds.delta.state.cut import read_cut  # noqa: E402
from mysql_cdc.kinds.iceberg.catalog import CatalogRef  # noqa: E402
from mysql_cdc.kinds.iceberg.cut import read_cut as read_iceberg_cut  # noqa: E402
from mysql_cdc.kinds.iceberg.state import IcebergStateStore  # noqa: E402
from mysql_cdc.server_state import MySQLStateStore  # noqa: E402
from mysql_cdc.storage import StorageSpec  # noqa: E402
from mysql_cdc.mysql_server import MySQLSettings  # noqa: E402

VENV_BIN = Path(sys.executable).parent
WORK = REPO / ".local" / "demo"
DAG_ID = "mysql_cdc"  # the pipeline of dags/pipelines.yaml
DB, TABLE = "flvDb", "pet"
HISTORY_DB, HISTORY_TABLE = "shopDb", "orders"  # rows the leader had before the pipeline existed
S3_BUCKET = "mysql-cdc-demo"
ICEBERG_CATALOG_DB = "iceberg_catalog"  # on the follower server: the catalog's tables and the state
FOLLOWERS = ("mysql", "delta", "iceberg")


def say(message: str) -> None:
    print(message, flush=True)


class Demo:
    def __init__(self, storage: str, spark: str, follower: str = "mysql"):
        self.storage = storage
        self.spark = spark
        self.follower_kind = follower
        self.services: list = []
        self.env = dict(os.environ)
        self.runs = 0

    # -- setup ------------------------------------------------------------------------------

    def start_services(self) -> None:
        started = time.monotonic()
        self.leader = self._start(MariaDBServer(WORK / "services", "leader", server_id=1, binlog=True,
                                                die_with_parent=True))
        self.follower = self._start(MariaDBServer(WORK / "services", "follower", server_id=2, binlog=False,
                                                  die_with_parent=True))
        self.leader_user = self.leader.create_user("cdc_leader", "cdc-leader-pw",
                                                   ["REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.*"])
        self.follower_user = self.follower.create_user("cdc_follower", "cdc-follower-pw", ["ALL PRIVILEGES ON *.*"])
        say(f"leader   MariaDB on 127.0.0.1:{self.leader.port} (binlog ROW/FULL/FULL)")
        say(f"follower MariaDB on 127.0.0.1:{self.follower.port}")
        if self.storage == "s3":
            self.s3 = self._start(MotoS3Server(WORK / "services", die_with_parent=True))
            self.s3_client().create_bucket(Bucket=S3_BUCKET)
            say(f"S3       moto on {self.s3.endpoint_url}, bucket {S3_BUCKET}")
        if self.spark == "cluster":
            self.cluster = self._start(SparkStandaloneCluster(WORK / "services", die_with_parent=True))
            say(f"Spark    standalone master {self.cluster.master_url} with one worker (UI {self.cluster.web_url})")
        say(f"         ({time.monotonic() - started:.0f}s)")

    def _start(self, service):
        self.services.append(service)
        return service.start()

    def s3_client(self):
        import boto3

        return boto3.client("s3", **self.s3.client_kwargs())

    def configure_airflow(self) -> None:
        home = WORK / "airflow"

        def mysql(user: dict) -> str:
            return json.dumps({"conn_type": "mysql", "host": user["host"], "port": user["port"],
                               "login": user["user"], "password": user["password"]})

        self.env.update({
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
            "AIRFLOW_CONN_MYSQL_LEADER": mysql(self.leader_user),
            "AIRFLOW_CONN_MYSQL_FOLLOWER": mysql(self.follower_user),
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
            # The leader's early binlog is purged: the first run copies its tables.
            "CDC_START_POSITION": "snapshot",
            "CDC_STORAGE_URI": f"file://{WORK / 'batches'}",
            # spark-submit and the job's Python come from this virtualenv
            "PATH": f"{VENV_BIN}{os.pathsep}{self.env.get('PATH', '')}",
            "PYSPARK_PYTHON": sys.executable,
        })
        self.env.pop("CDC_PIPELINES_FILE", None)  # the repository's dags/pipelines.yaml
        if self.follower_kind != "mysql":
            self.env["CDC_PIPELINES_FILE"] = str(self.lake_pipelines_file())
        if self.spark == "cluster":
            self.env["AIRFLOW_CONN_SPARK_DEFAULT"] = json.dumps(
                {"conn_type": "spark", "host": f"spark://{self.cluster.host}", "port": self.cluster.port})
        if self.storage == "s3":
            self.env["CDC_STORAGE_URI"] = f"s3://{S3_BUCKET}/batches"
            kwargs = self.s3.client_kwargs()
            self.env["AIRFLOW_CONN_AWS_DEFAULT"] = json.dumps({
                "conn_type": "aws", "login": kwargs["aws_access_key_id"], "password": kwargs["aws_secret_access_key"],
                "extra": {"endpoint_url": kwargs["endpoint_url"], "region_name": kwargs["region_name"]}})
        started = time.monotonic()
        self._airflow(["db", "migrate"], WORK / "runs" / "db-migrate.log")
        say(f"airflow  metadata DB (SQLite) in {home} ({time.monotonic() - started:.0f}s)")

    @property
    def lake(self) -> StorageSpec:
        if self.storage == "s3":
            return StorageSpec(f"s3://{S3_BUCKET}/lake", self.s3.client_kwargs())
        return StorageSpec(f"file://{WORK / 'lake'}")

    @property
    def warehouse(self) -> StorageSpec:
        if self.storage == "s3":
            return StorageSpec(f"s3://{S3_BUCKET}/warehouse", self.s3.client_kwargs())
        return StorageSpec(f"file://{WORK / 'warehouse'}")

    @property
    def catalog(self) -> CatalogRef:
        return CatalogRef("lake", MySQLSettings(**self.follower_user), ICEBERG_CATALOG_DB, self.warehouse)

    def lake_pipelines_file(self) -> Path:
        """The repository's pipeline with a Delta Lake or Iceberg follower instead of the MySQL one."""
        import yaml

        config = yaml.safe_load((REPO / "dags" / "pipelines.yaml").read_text())
        (entry,) = [e for e in config["pipelines"] if e["name"] == DAG_ID]
        entry.pop("follower_conn_id")
        if self.follower_kind == "delta":
            entry["follower"] = {"kind": "delta", "location": self.lake.uri}
            where = f"Delta Lake at {self.lake.uri}"
        else:
            self.follower.run_sql([f"CREATE DATABASE IF NOT EXISTS {ICEBERG_CATALOG_DB}"])
            entry["follower"] = {"kind": "iceberg", "catalog": "lake", "conn_id": "mysql_follower",
                                 "database": ICEBERG_CATALOG_DB, "warehouse": self.warehouse.uri}
            where = f"Iceberg catalog 'lake' in {ICEBERG_CATALOG_DB} on the follower server, warehouse {self.warehouse.uri}"
        entry["storage_uri"] = "${CDC_STORAGE_URI}"
        config["pipelines"] = [entry]
        path = WORK / "pipelines.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        say(f"follower {where} (pipelines file {path.relative_to(REPO)})")
        return path

    def state_store(self):
        if self.follower_kind == "delta":
            return DeltaStateStore(LakeLocation(self.lake))
        if self.follower_kind == "iceberg":
            return IcebergStateStore(self.catalog)
        return MySQLStateStore(MySQLSettings(**self.follower_user))

    def follower_table(self, database: str = DB, table: str = TABLE) -> tuple[list[str], list[tuple]]:
        """The follower's rows of a table: the server's, or the lake's at its consistent cut."""
        if self.follower_kind == "mysql":
            return self.table(self.follower, database, table)
        if self.follower_kind == "iceberg":
            rows = read_iceberg_cut(self.catalog, DAG_ID).read(f"{database}.{table}")
        else:
            rows = read_cut(self.lake.uri, DAG_ID, s3_options=dict(self.lake.options)).read(f"{database}.{table}")
        columns = self.table(self.leader, database, table)[0]
        values = [tuple(r[c] for c in columns) for r in rows.to_pylist()]
        return columns, sorted(values, key=lambda r: tuple((v is None, v) for v in r))

    def _airflow(self, args: list[str], log: Path) -> int:
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "w") as out:
            rc = subprocess.run([str(VENV_BIN / "airflow"), *args], env=self.env, stdout=out,
                                stderr=subprocess.STDOUT, cwd=REPO).returncode
        return rc

    # -- the demo -------------------------------------------------------------------------------

    def run_on_leader(self, statements: list[str]) -> None:
        self.leader.run_sql(statements)

    def give_leader_a_history(self) -> None:
        """Rows written before the pipeline existed, whose binlog is gone: only a copy brings them."""
        rows = ", ".join(f"({i}, 'customer {i % 97}', {i * 7 % 1000}.{i % 100:02d})" for i in range(1, 1001))
        self.leader.run_sql([
            f"CREATE DATABASE {HISTORY_DB}",
            f"CREATE TABLE {HISTORY_DB}.{HISTORY_TABLE} (id INT PRIMARY KEY, customer VARCHAR(40), "
            "amount DECIMAL(10,2))",
            f"INSERT INTO {HISTORY_DB}.{HISTORY_TABLE} VALUES {rows}",
        ])
        self.leader.purge_binary_logs()

    def dag_run(self, why: str, dag_id: str = DAG_ID) -> dict[str, str]:
        self.runs += 1
        log = WORK / "runs" / f"run-{self.runs}.log"
        say(f"\nDAG run {self.runs} ({why}): airflow dags test {dag_id}")
        started = time.monotonic()
        rc = self._airflow(["dags", "test", dag_id], log)
        states = self.last_run_states(dag_id)
        say(f"  {'  '.join(f'{task}={state}' for task, state in states.items())}")
        # `airflow dags test` spends ~15s of this starting up (imports, DAG parsing, its in-process
        # API server); a deployed scheduler has paid that once.
        say(f"  {time.monotonic() - started:.0f}s, log: {log.relative_to(REPO)}")
        if rc != 0:
            raise SystemExit(f"DAG run {self.runs} failed; see {log}")
        return states

    def last_run_states(self, dag_id: str) -> dict[str, str]:
        """The last run's task states, straight from the metadata DB, in the DAG's order."""
        db = sqlite3.connect(WORK / "airflow" / "airflow.db")
        try:
            (run_id,) = db.execute("SELECT run_id FROM dag_run WHERE dag_id = ? ORDER BY id DESC LIMIT 1",
                                   (dag_id,)).fetchone()
            rows = db.execute("SELECT task_id, state FROM task_instance WHERE dag_id = ? AND run_id = ?",
                              (dag_id, run_id)).fetchall()
        finally:
            db.close()
        order = ["wait_for_changes", "extract_batch", "merge_batch", "check_lag", "retire_batches", "verify_follower"]
        return {task: state for task, state in sorted(rows, key=lambda r: order.index(r[0]))}

    def figures(self) -> str:
        """What the CDC page and GET /cdc/api/pipelines show for the pipeline, in a few lines."""
        f = pipeline_figures(DAG_ID, MySQLSettings(**self.leader_user), self.state_store())
        lines = [f"  checkpoint {f.checkpoint.position}, leader at {f.leader_position}: {f.bytes_behind} bytes and "
                 f"{f.seconds_behind} seconds behind"]
        for r in reversed(f.history):
            lines.append(f"  batch {r.kind:8} {r.start_position} -> {r.end_position}: {r.rows_in} rows in, "
                         f"{r.net_rows} net, extract {r.extract_seconds:.1f} s, merge {r.merge_seconds:.1f} s, {r.status}")
        if f.verification is not None:
            lines.append(f"  verification: {f.verification.describe()}")
        return "\n".join(lines)

    def table(self, server, database: str = DB, table: str = TABLE) -> tuple[list[str], list[tuple]]:
        conn = server.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(f"SELECT * FROM `{database}`.`{table}` ORDER BY 1")
                return [d[0] for d in cur.description], [tuple(r) for r in cur.fetchall()]
        finally:
            conn.close()


def same_rows(a: tuple[list[str], list[tuple]], b: tuple[list[str], list[tuple]]) -> bool:
    """The same columns and the same rows, in any order (a server orders text by its collation)."""
    def key(row: tuple) -> tuple:
        return tuple((v is None, str(type(v)), v) for v in row)

    return a[0] == b[0] and sorted(a[1], key=key) == sorted(b[1], key=key)


def render(columns: list[str], rows: list[tuple]) -> list[str]:
    cells = [columns] + [["NULL" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    lines = [" ".join(c.ljust(w) for c, w in zip(row, widths)) for row in cells]
    lines.insert(1, " ".join("-" * w for w in widths))
    return lines


def side_by_side(left_title: str, left: list[str], right_title: str, right: list[str]) -> str:
    width = max(len(line) for line in [left_title, *left])
    height = max(len(left), len(right))
    left, right = left + [""] * (height - len(left)), right + [""] * (height - len(right))
    out = [f"{left_title.ljust(width)}  |  {right_title}"]
    out += [f"{a.ljust(width)}  |  {b}".rstrip() for a, b in zip(left, right)]
    return "\n".join(out)


def main() -> int:
    storage = os.environ.get("CDC_DEMO_STORAGE", "file").lower()
    if storage not in ("file", "s3"):
        raise SystemExit(f"CDC_DEMO_STORAGE must be 'file' or 's3', got {storage!r}")
    spark = os.environ.get("CDC_DEMO_SPARK", "local").lower()
    if spark not in ("local", "cluster"):
        raise SystemExit(f"CDC_DEMO_SPARK must be 'local' or 'cluster', got {spark!r}")
    follower = os.environ.get("CDC_DEMO_FOLLOWER", "mysql").lower()
    if follower not in FOLLOWERS:
        raise SystemExit(f"CDC_DEMO_FOLLOWER must be one of {', '.join(FOLLOWERS)}, got {follower!r}")
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    demo = Demo(storage, spark, follower)
    try:
        demo.start_services()
        demo.configure_airflow()

        demo.give_leader_a_history()
        say(f"\nleader: {HISTORY_DB}.{HISTORY_TABLE} has 1000 rows written before the pipeline existed; "
            "their binlog is purged")
        every_task = {"wait_for_changes": "success", "extract_batch": "success", "merge_batch": "success",
                      "check_lag": "success", "retire_batches": "success"}
        states = demo.dag_run("the first run copies the existing tables: a snapshot")
        if states != every_task:
            raise SystemExit(f"expected every task to succeed, got {states}")
        say(f"  follower {HISTORY_DB}.{HISTORY_TABLE}: {len(demo.follower_table(HISTORY_DB, HISTORY_TABLE)[1])} rows")

        say(f"\nleader: the seed session ({len(seed_statements(DB))} statements: CREATE DATABASE {DB}, "
            "CREATE TABLE pet, inserts, update, ALTER TABLE ADD COLUMN last_vaccine, delete, insert, update)")
        demo.run_on_leader(seed_statements(DB))

        states = demo.dag_run("the seed workload")
        if states != every_task:
            raise SystemExit(f"expected every task to succeed, got {states}")
        states = demo.dag_run("nothing new on the leader")
        if states["wait_for_changes"] != "skipped":
            raise SystemExit(f"expected the run with nothing new to be skipped, got {states}")
        states = demo.dag_run("checksums of every table on both sides", f"{DAG_ID}_verify")
        if states != {"verify_follower": "success"}:
            raise SystemExit(f"expected the verification to pass, got {states}")
        say("\nthe pipeline's figures (the CDC pipelines page, GET /cdc/api/pipelines):\n" + demo.figures())

        leader_table, follower_table = demo.table(demo.leader), demo.follower_table()
        where_follower = {"delta": "the Delta table", "iceberg": "the Iceberg table"}.get(follower, "follower")
        say("\n" + side_by_side(f"leader {DB}.{TABLE}", render(*leader_table),
                                f"{where_follower} {DB}.{TABLE}", render(*follower_table)))
        where = (f"s3://{S3_BUCKET}/batches" if storage == "s3" else f"{(WORK / 'batches').relative_to(REPO)}")
        say(f"\nchange batches: {where}/{DAG_ID}/batches/")
        if spark == "cluster":
            apps = [f"{a['name']} ({a['state']}, {a['cores']} cores)" for a in demo.cluster.applications()]
            say(f"Spark applications on {demo.cluster.master_url}: {', '.join(apps) or 'none'}")
            if not apps:
                say("\nthe merge did not run on the cluster")
                return 1
        history_equal = (same_rows(demo.table(demo.leader, HISTORY_DB, HISTORY_TABLE),
                                   demo.follower_table(HISTORY_DB, HISTORY_TABLE)))
        if not same_rows(leader_table, follower_table) or not history_equal:
            say("\nDIFFERENT: the follower does not equal the leader")
            return 1
        say("\nEQUAL: the follower equals the leader")
        return 0
    finally:
        for service in reversed(demo.services):
            service.stop()


if __name__ == "__main__":
    sys.exit(main())
