"""Session fixtures that start REAL local services (see scripts/local_services.py).

Services are started lazily: a session only pays for the MariaDB/moto processes that
its selected tests actually request.  Each service is stopped three ways, whichever
comes first: the fixture finalizer (normal end or failure), an atexit hook (interpreter
shutdown after e.g. an internal pytest error), and PR_SET_PDEATHSIG (the kernel
SIGTERMs the service if the pytest process is killed outright).

Tests are isolated from each other by database / bucket names (``unique_name``,
``s3_bucket``), not by separate servers.
"""
from __future__ import annotations

import atexit
import os
import sys
import uuid
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
# scripts/  -> `import local_services`
# plugins/  -> `import mysql_cdc` (Airflow's plugins folder layout)
# repo root -> `import spark_jobs`
# tests/merge -> the pipelines of the merge tests (merge_helpers, lake_helpers) and the random
#                workload, shared with tests/kinds, tests/capture and tests/airflow
for _p in (REPO_ROOT / "scripts", REPO_ROOT / "plugins", REPO_ROOT, REPO_ROOT / "tests" / "merge"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

import local_services  # noqa: E402
from local_services import MariaDBServer, MotoS3Server, MySQLServer, SparkStandaloneCluster  # noqa: E402
from mysql_cdc.mysql_server import MySQLSettings  # noqa: E402
from mysql_cdc.storage import StorageSpec  # noqa: E402

LEADER_USER = "cdc_reader"
LEADER_PASSWORD = "cdc_reader_pw"
FOLLOWER_USER = "cdc_writer"
FOLLOWER_PASSWORD = "cdc_writer_pw"


def _start_managed(request: pytest.FixtureRequest, service):
    """Start ``service`` and guarantee it is stopped at session end or interpreter exit."""
    # Register the stops BEFORE start(): if start() fails half-way (e.g. the server came
    # up but _secure() failed) the process must still be cleaned up.
    request.addfinalizer(service.stop)
    atexit.register(service.stop)  # stop() is idempotent, so double calls are harmless
    return service.start()


# `make test` runs the suite on two pytest-xdist workers, a whole file per worker (`--dist
# loadfile`: a file's module fixtures, e.g. the deployed Airflow, live in one process), except the
# sink conformance suite, whose kinds are a unit each (``pytest_xdist_make_scheduler``). A worker
# takes the units in collection order, so the files that take minutes (worker seconds, measured in
# CI on 2 cores) are collected first, longest first: otherwise one could start last and run alone
# at the end.
LONG_FILES = (
    "tests/airflow/deployed/test_deployed_pipeline.py",       # ~520 s
    "tests/kinds/delta/test_merge_delta.py",                  # ~480 s
    "tests/kinds/test_sink_contract.py",                      # ~800 s: ~360 delta, ~150 each other kind
    "tests/test_demo.py",                                     # ~340 s
    "tests/merge/test_snapshot.py",                           # ~340 s
    "tests/airflow/dags/test_resnapshot_consistency.py",      # ~260 s
    "tests/airflow/dags/test_delta_runs.py",                  # ~250 s
    "tests/kinds/delta/test_lake_layout.py",                  # ~220 s
    "tests/kinds/delta/test_joined_rows.py",                  # ~200 s
    "tests/airflow/deployed/test_deployed_continuous.py",     # ~190 s
    "tests/airflow/dags/test_cluster_run.py",                 # ~170 s
    "tests/kinds/delta/test_lake_readers.py",                 # ~150 s
    "tests/kinds/test_catalogs.py",                           # ~170 s, a metastore and Trino started
    "tests/airflow/dags/test_lake_verify_runs.py",            # ~120 s
)
CONFORMANCE_SUITE = "tests/kinds/test_sink_contract.py"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The long files first, in LONG_FILES' order; every other file after them, in collection order.
    A file's tests keep their order (a stable sort on the file alone)."""
    rank = {name: i for i, name in enumerate(LONG_FILES)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(LONG_FILES)))


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """``--dist loadfile``, the conformance suite's kinds split: each kind's tests are a unit of
    their own (they share no module fixture), so its ~800 s do not all run on one worker."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class FilesAndKinds(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            file = super()._split_scope(nodeid)
            if file != CONFORMANCE_SUITE or "[" not in nodeid:
                return file
            # the kind is the test id's first parameter ("...::test_x[delta portable-spark]"; no
            # kind's name has a "-")
            return f"{file}::{nodeid[nodeid.index('[') + 1:].split('-')[0].rstrip(']')}"

    return FilesAndKinds(config, log)


@pytest.fixture(scope="session")
def services_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Session-wide directory holding the services' datadirs and logs."""
    return tmp_path_factory.mktemp("services")


@pytest.fixture(scope="session")
def leader(request: pytest.FixtureRequest, services_dir: Path) -> MariaDBServer:
    """MariaDB with ROW binlog (FULL image + FULL metadata), server_id 1."""
    server = MariaDBServer(services_dir, "leader", server_id=1, binlog=True, die_with_parent=True)
    return _start_managed(request, server)


@pytest.fixture(scope="session")
def follower(request: pytest.FixtureRequest, services_dir: Path) -> MariaDBServer:
    """MariaDB without binlog, server_id 2 (the merge target)."""
    server = MariaDBServer(services_dir, "follower", server_id=2, binlog=False, die_with_parent=True)
    return _start_managed(request, server)


@pytest.fixture(scope="session")
def mysql_leader(request: pytest.FixtureRequest, services_dir: Path) -> MySQLServer:
    """MySQL (sid's 9.x, unpacked by `make mysql`) with GTIDs on and ROW/FULL/FULL binlog."""
    return _start_managed(request, MySQLServer(services_dir, "mysql-leader", server_id=11, binlog=True,
                                               die_with_parent=True))


@pytest.fixture(scope="session")
def mysql_follower(request: pytest.FixtureRequest, services_dir: Path) -> MySQLServer:
    """MySQL without binlog: a fresh follower, with no `_mysql_cdc` schema until a pipeline runs."""
    return _start_managed(request, MySQLServer(services_dir, "mysql-follower", server_id=12, binlog=False,
                                               die_with_parent=True))


@pytest.fixture(scope="session")
def s3_server(request: pytest.FixtureRequest, services_dir: Path) -> MotoS3Server:
    """moto's HTTP server; use ``s3_server.client_kwargs()`` for boto3."""
    return _start_managed(request, MotoS3Server(services_dir, die_with_parent=True))


@pytest.fixture(scope="session")
def hive_metastore(request: pytest.FixtureRequest, services_dir: Path, follower: MariaDBServer):
    """Hive's Thrift metastore on a database of the session's MariaDB follower (a Delta follower's
    catalog: ``kinds.delta.catalog``)."""
    from services.hive_metastore import HiveMetastoreServer

    return _start_managed(request, HiveMetastoreServer(services_dir, follower, die_with_parent=True))


@pytest.fixture(scope="session")
def trino(request: pytest.FixtureRequest, services_dir: Path, hive_metastore, s3_server: MotoS3Server):
    """Trino with a ``delta_lake`` catalog ``lake`` on ``hive_metastore`` and the session's moto (more
    catalogs with ``trino.create_catalog``)."""
    from services.trino import TrinoServer, delta_catalog

    return _start_managed(request, TrinoServer(services_dir, {"lake": delta_catalog(hive_metastore.uri, s3_server)},
                                               die_with_parent=True))


@pytest.fixture(scope="session")
def spark_cluster(request: pytest.FixtureRequest, services_dir: Path) -> SparkStandaloneCluster:
    """A real Spark standalone cluster (master + worker from pyspark's distribution) on loopback."""
    return _start_managed(request, SparkStandaloneCluster(services_dir, die_with_parent=True))


@pytest.fixture(scope="session")
def leader_user(leader: MariaDBServer) -> dict:
    """dict(host, port, user, password) for a binlog-reading account on the leader."""
    return leader.create_user(
        LEADER_USER, LEADER_PASSWORD,
        ["REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.*"],
    )


@pytest.fixture(scope="session")
def follower_user(follower: MariaDBServer) -> dict:
    """dict(host, port, user, password) for an all-privileges account on the follower."""
    return follower.create_user(FOLLOWER_USER, FOLLOWER_PASSWORD, ["ALL PRIVILEGES ON *.*"])


@pytest.fixture(scope="session")
def mysql_leader_user(mysql_leader: MySQLServer) -> dict:
    """A binlog-reading account on the MySQL leader (caching_sha2_password, MySQL's only default);
    RELOAD for the snapshot's brief read lock (MySQL has no lock-free consistent position)."""
    return mysql_leader.create_user(LEADER_USER, LEADER_PASSWORD,
                                    ["REPLICATION SLAVE, REPLICATION CLIENT, SELECT, RELOAD ON *.*"])


@pytest.fixture(scope="session")
def mysql_follower_user(mysql_follower: MySQLServer) -> dict:
    return mysql_follower.create_user(FOLLOWER_USER, FOLLOWER_PASSWORD, ["ALL PRIVILEGES ON *.*"])


@pytest.fixture
def make_replica(request: pytest.FixtureRequest, services_dir: Path):
    """make_replica(source) -> a fresh GTID replica of ``source`` (a MariaDBServer or a
    MySQLServer, the replica of the same kind) with its own binlog, 'replica-bin.NNNNNN', so its
    positions are plainly not the source's; stopped at the end of the test."""

    def make(source: MariaDBServer) -> MariaDBServer:
        name = f"replica-{uuid.uuid4().hex[:6]}"
        kind = MySQLServer if isinstance(source, MySQLServer) else MariaDBServer
        extra = (f"--log-bin={services_dir / name / 'data'}/replica-bin",)
        if kind is MariaDBServer:
            extra += ("--log-slave-updates=ON",)  # MySQL logs what it applies by default
        server = kind(services_dir, name, server_id=3, binlog=True, die_with_parent=True, extra_args=extra)
        request.addfinalizer(server.stop)
        server.start()
        server.replicate_from(source)
        return server

    return make


@pytest.fixture
def faulty_bucket(s3_server: MotoS3Server, s3_bucket: dict):
    """``(bucket, proxy)``: a fresh bucket reached through a fault-injecting proxy in front of the
    session's moto (``services.s3_fault_proxy``): ``bucket`` is ``s3_bucket``'s dict with the
    proxy's endpoint, ``proxy.add(FaultRule(...))`` makes its requests fail as a failing S3 would."""
    from services.s3_fault_proxy import S3FaultProxy

    proxy = S3FaultProxy(s3_server.endpoint_url).start()
    try:
        yield {**s3_bucket, "endpoint_url": proxy.endpoint_url}, proxy
    finally:
        proxy.stop()


@pytest.fixture
def unique_name() -> str:
    """Short unique lowercase identifier, valid as a MySQL database name and S3 bucket
    name component (starts with a letter, [a-z0-9_] only)."""
    return "t" + uuid.uuid4().hex[:12]


@pytest.fixture
def s3_bucket(s3_server: MotoS3Server) -> dict:
    """A fresh, uniquely named bucket on the moto server.

    Returns dict(endpoint_url, bucket, aws_access_key_id, aws_secret_access_key,
    region_name); everything except ``bucket`` can be splatted into ``boto3.client("s3", ...)``.
    """
    import boto3  # imported lazily: only S3 tests need it

    kwargs = s3_server.client_kwargs()
    bucket = "mcdc-" + uuid.uuid4().hex[:16]  # S3 names: lowercase, no underscores
    boto3.client("s3", **kwargs).create_bucket(Bucket=bucket)  # us-east-1: no LocationConstraint
    return {**kwargs, "bucket": bucket}


# ONE SparkSession for every in-process test (tests/merge, tests/kinds): a JVM is costly to start
@pytest.fixture(scope="session")
def spark():
    # Executors are separate Python processes: they must run this interpreter (pyarrow, pymysql)
    # and find mysql_cdc, whose functions they run; both come from the environment the JVM inherits.
    saved = {k: os.environ.get(k) for k in ("PYSPARK_PYTHON", "PYTHONPATH")}
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT / "plugins"), saved["PYTHONPATH"]]))
    from spark_under_test import SPARK_LINE, check_in_process_pyspark

    check_in_process_pyspark()
    from pyspark.sql import SparkSession

    from mysql_cdc.packaging import cds_option
    from mysql_cdc.kinds.delta.submit import submit_needs

    # the Delta Lake follower's jars and properties, as its merge job is submitted with them
    delta = submit_needs(SPARK_LINE)
    builder = SparkSession.builder.config("spark.jars", ",".join(delta.jars))
    for key, value in delta.conf:
        builder = builder.config(key, value)
    session = (
        builder.master("local[2]")
        .appName("mysql-cdc apply tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        # C1-only JIT: test batches are tiny, so JVM warm-up, not throughput, is what costs. Without
        # tiered compilation the JVM reserves only 48 MB of code cache, and this one session JVM
        # compiles hundreds of Spark plans over the whole suite: it filled up ("Out of space in
        # CodeCache") and failed every later test
        # The class-data archive of `make setup` (packaging.cds_option), as every merge driver maps it.
        .config("spark.driver.extraJavaOptions", " ".join(
            ["-XX:TieredStopAtLevel=1", "-XX:ReservedCodeCacheSize=256m",
             *filter(None, [cds_option(SPARK_LINE)])]))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    # the JVM took its copy of the environment; later subprocesses get the original one back
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    yield session
    session.stop()


__all__ = ["local_services"]


@pytest.fixture
def make_pipeline(request, tmp_path, unique_name):
    """make_pipeline(s3_bucket=None, flavor="mariadb") -> a started Pipeline named after this test's
    unique name, between the session's MariaDB (or, with flavor "mysql", MySQL) leader and follower;
    ``follower_flavor`` gives the follower another flavor than the leader's."""

    from merge_helpers import Pipeline  # Spark's helpers: imported by the tests that make pipelines

    def make(s3_bucket: dict | None = None, flavor: str = "mariadb", start: bool = True,
             follower_flavor: str | None = None) -> Pipeline:
        def server(role: str, kind: str):
            prefix = "" if kind == "mariadb" else "mysql_"
            return request.getfixturevalue(prefix + role), request.getfixturevalue(f"{prefix}{role}_user")

        (leader, leader_user), (follower, follower_user) = server("leader", flavor), server(
            "follower", follower_flavor or flavor)
        storage = StorageSpec(f"file://{tmp_path}/store")
        if s3_bucket:
            storage = StorageSpec(f"s3://{s3_bucket['bucket']}/cdc", {
                k: s3_bucket[k] for k in ("endpoint_url", "region_name", "aws_access_key_id", "aws_secret_access_key")
            })
        pipeline = Pipeline(
            name=f"pipe_{unique_name}", database=unique_name, leader=leader, follower=follower,
            leader_settings=MySQLSettings(**leader_user), follower_settings=MySQLSettings(**follower_user),
            storage=storage,
        )
        return pipeline.start() if start else pipeline

    return make


def pytest_configure(config):
    # pyspark warns on every import that it does not fully support the pandas 3 that Airflow pins;
    # the merge job does not use pandas
    config.addinivalue_line("filterwarnings", "ignore:PySpark does not yet fully support pandas:FutureWarning")
