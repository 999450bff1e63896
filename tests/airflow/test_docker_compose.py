"""docker-compose.yaml cannot be started here (no Docker engine), so its structure is checked, and
that everything it wires together agrees with the default pipelines file: every connection id the
DAG uses is set in every Airflow service, and each points at a service, port and credentials that
the compose file really defines."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml

from mysql_cdc.pipeline_config import load_pipelines

REPO_ROOT = Path(__file__).resolve().parents[2]
AIRFLOW_SERVICES = ("airflow-apiserver", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer")
LEADER_FLAGS = ("--log-bin", "--binlog-format=ROW", "--binlog-row-image=FULL", "--binlog-row-metadata=FULL",
                "--server-id")


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((REPO_ROOT / "docker-compose.yaml").read_text())


@pytest.fixture(scope="module")
def pipeline(compose, monkeypatch_module):
    """The default pipeline as the Airflow containers load it (with the compose environment)."""
    env = compose["services"]["airflow-scheduler"]["environment"]
    for key in ("CDC_STORAGE_URI", "CDC_START_POSITION"):
        monkeypatch_module.setenv(key, env[key])
    (config,) = load_pipelines(REPO_ROOT / "dags" / "pipelines.yaml")
    return config


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


def conn_var(conn_id: str) -> str:
    return "AIRFLOW_CONN_" + conn_id.upper()


def connection(env: dict, conn_id: str):
    """The connection as Airflow itself reads the AIRFLOW_CONN_* URI."""
    from airflow.sdk import Connection

    return Connection.from_uri(env[conn_var(conn_id)], conn_id=conn_id)


def flag_value(command: list[str], flag: str) -> str | None:
    for arg in command:
        if arg == flag or arg.startswith(flag + "="):
            return arg.partition("=")[2]
    return None


def init_sql(compose: dict, service: str) -> str:
    (config,) = compose["services"][service]["configs"]
    assert config["target"].startswith("/docker-entrypoint-initdb.d/")
    return compose["configs"][config["source"]]["content"]


def test_services(compose):
    services = compose["services"]
    for name in ("mysql-leader", "mysql-follower", "minio", "minio-init", "spark-master", "spark-worker",
                 *AIRFLOW_SERVICES):
        assert name in services, name
    assert services["mysql-leader"]["image"] == services["mysql-follower"]["image"] == "mysql:8.4"
    commands = {name: " ".join(services[name]["command"]) for name in AIRFLOW_SERVICES}
    assert commands == {"airflow-apiserver": "airflow api-server", "airflow-scheduler": "airflow scheduler",
                        "airflow-dag-processor": "airflow dag-processor", "airflow-triggerer": "airflow triggerer"}
    assert "8080:8080" in services["airflow-apiserver"]["ports"]


def test_the_image_carries_the_compiled_row_decoder(compose):
    """The capture's default decoder is native/: the image builds its wheel with the maturin pinned
    in native/pyproject.toml and installs it beside requirements.txt (not runnable here: no Docker
    engine; `make setup` builds the same crate on this machine)."""
    dockerfile = compose["services"]["airflow-scheduler"]["build"]["dockerfile_inline"]
    pinned = re.search(r'"(maturin==[\d.]+)"', (REPO_ROOT / "native" / "pyproject.toml").read_text()).group(1)
    assert f"pip3 install --break-system-packages {pinned}" in dockerfile
    assert "COPY native /src/native" in dockerfile and "--out /wheels" in dockerfile
    assert re.search(r"pip install .*-r /tmp/requirements.txt /tmp/wheels/\*\.whl", dockerfile)
    assert "native/target" in (REPO_ROOT / ".dockerignore").read_text().split()


def test_leader_binlog_and_follower_local_infile(compose):
    leader = compose["services"]["mysql-leader"]["command"]
    for flag in LEADER_FLAGS:
        assert any(arg == flag or arg.startswith(flag + "=") for arg in leader), flag
    assert flag_value(leader, "--server-id") != flag_value(compose["services"]["mysql-follower"]["command"],
                                                           "--server-id")
    assert "--local-infile=1" in compose["services"]["mysql-follower"]["command"]


def test_every_airflow_service_mounts_the_repository_and_gets_every_connection(compose, pipeline):
    conn_ids = {pipeline.leader_conn_id, pipeline.follower_conn_id, pipeline.aws_conn_id, pipeline.spark_conn_id}
    assert conn_ids == {"mysql_leader", "mysql_follower", "aws_default", "spark_default"}
    for name in AIRFLOW_SERVICES:
        service = compose["services"][name]
        env = service["environment"]
        for conn_id in conn_ids:
            assert conn_var(conn_id) in env, f"{name} lacks {conn_var(conn_id)}"
        mounts = {v.split(":")[0]: v.split(":")[1] for v in service["volumes"] if v.startswith("./")}
        assert mounts["./dags"] == env["AIRFLOW__CORE__DAGS_FOLDER"]
        assert mounts["./plugins"] == env["AIRFLOW__CORE__PLUGINS_FOLDER"]
        assert mounts["./spark_jobs"] == env["MYSQL_CDC_SPARK_JOBS_DIR"]
        assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"].startswith("http://airflow-apiserver:8080/")
    for name in ("spark-master", "spark-worker"):
        assert {"./dags:/opt/airflow/dags", "./plugins:/opt/airflow/plugins",
                "./spark_jobs:/opt/airflow/spark_jobs"} <= set(compose["services"][name]["volumes"])


def test_mysql_connections_match_their_servers(compose, pipeline):
    env = compose["services"]["airflow-scheduler"]["environment"]
    for conn_id, service, grants in (
        (pipeline.leader_conn_id, "mysql-leader", "GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.*"),
        (pipeline.follower_conn_id, "mysql-follower", "GRANT ALL PRIVILEGES ON *.*"),
    ):
        conn = connection(env, conn_id)
        assert conn.conn_type == "mysql"
        assert (conn.host, conn.port) == (service, 3306)
        sql = init_sql(compose, service)
        assert f"CREATE USER '{conn.login}'@'%' IDENTIFIED BY '{conn.password}'" in sql
        assert f"{grants} TO '{conn.login}'@'%'" in sql
        assert any(p.endswith(":3306") for p in compose["services"][service]["ports"])


def test_aws_connection_and_storage_match_minio(compose, pipeline):
    env = compose["services"]["airflow-scheduler"]["environment"]
    minio = compose["services"]["minio"]
    conn = connection(env, pipeline.aws_conn_id)
    assert conn.conn_type == "aws"
    assert (conn.login, conn.password) == (minio["environment"]["MINIO_ROOT_USER"],
                                           minio["environment"]["MINIO_ROOT_PASSWORD"])
    endpoint = urlparse(conn.extra_dejson["endpoint_url"])
    assert endpoint.hostname == "minio" and any(p.startswith(f"{endpoint.port}:") for p in minio["ports"])
    bucket = urlparse(pipeline.storage_uri).netloc
    assert pipeline.storage_uri.startswith("s3://")
    setup = " ".join(compose["services"]["minio-init"]["command"])
    assert re.search(rf"mc mb --ignore-existing local/{bucket}\b", setup)
    assert f"mc alias set local http://minio:{endpoint.port} {conn.login} {conn.password}" in setup


def test_spark_connection_matches_the_master(compose, pipeline, monkeypatch):
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    env = compose["services"]["airflow-scheduler"]["environment"]
    monkeypatch.setenv(conn_var(pipeline.spark_conn_id), env[conn_var(pipeline.spark_conn_id)])
    resolved = SparkSubmitHook(conn_id=pipeline.spark_conn_id)._resolve_connection()
    assert resolved["master"] == "spark://spark-master:7077"
    assert resolved["deploy_mode"] is None  # client mode: the secrets file stays on the worker
    conn = connection(env, pipeline.spark_conn_id)
    master = shlex.split(" ".join(compose["services"]["spark-master"]["command"]))
    worker = shlex.split(" ".join(compose["services"]["spark-worker"]["command"]))
    assert (conn.conn_type, conn.host) == ("spark", "spark-master")
    assert master[master.index("--port") + 1] == str(conn.port)
    assert f"spark://spark-master:{conn.port}" in worker
    assert "org.apache.spark.deploy.master.Master" in master
    assert "org.apache.spark.deploy.worker.Worker" in worker


def test_scheduler_waits_for_what_the_tasks_use(compose):
    depends = compose["services"]["airflow-scheduler"]["depends_on"]
    assert {"mysql-leader", "mysql-follower", "minio-init", "spark-master", "postgres", "airflow-init"} <= set(depends)
