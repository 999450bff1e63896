#!/usr/bin/env python3
"""`make airflow`: Airflow deployed on this machine, at http://localhost:8080, running your pipelines.

Starts a local MariaDB leader and follower (scripts/local_services.py), seeds the leader with the
seed document's flvDb.pet session, and starts Airflow as it is deployed (scripts/
airflow_deployment.py): api-server, dag-processor, scheduler with the LocalExecutor and triggerer,
each its own process, with this repository's dags/ and plugins/. The pipelines come from
``$CDC_PIPELINES_FILE`` when set (your file; its connections come from your ``AIRFLOW_CONN_*``
variables), else from dags/pipelines.yaml (the demo pipeline on the local servers, every 5
minutes). Every pipeline's DAG is unpaused: it runs on its schedule; trigger it by hand, or with
{"start": ..., "end": ...} to replay a binlog range.

``mysql_leader`` and ``mysql_follower`` point at the local servers unless you set them yourself.
AIRFLOW_HOME is .local/airflow; batches of the demo pipeline go to .local/cdc-batches
(CDC_STORAGE_URI overrides). Ctrl-C stops Airflow (every process it started) and the servers.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "scripts"), str(REPO / "plugins")]

from airflow_deployment import ADMIN_USER, AirflowDeployment  # noqa: E402
from demo_workload import a_change, seed_statements  # noqa: E402
from local_services import MariaDBServer  # noqa: E402
from mysql_cdc.pipeline_config import PIPELINES_FILE_ENV, PipelineConfigError, load_pipelines  # noqa: E402

VENV_BIN = Path(sys.executable).parent
LOCAL = REPO / ".local"
HOME = LOCAL / "airflow"
PORT = int(os.environ.get("AIRFLOW_PORT", "8080"))
DEFAULT_PIPELINES = REPO / "dags" / "pipelines.yaml"


def mysql_conn(user: dict) -> str:
    return json.dumps({"conn_type": "mysql", "host": user["host"], "port": user["port"],
                       "login": user["user"], "password": user["password"]})


def pipelines_file() -> tuple[Path, dict[str, str]]:
    """The file to run and the variables it needs from this script: the user's file as it is;
    the default one with the local servers' history replayed from the start."""
    configured = os.environ.get(PIPELINES_FILE_ENV)
    if configured:
        path = Path(configured).expanduser().resolve()
        if not path.is_file():
            raise SystemExit(f"{PIPELINES_FILE_ENV}={configured}: no such file; point it at your pipelines file "
                             f"(the format: {DEFAULT_PIPELINES})")
        return path, {}
    return DEFAULT_PIPELINES, {"CDC_START_POSITION": os.environ.get("CDC_START_POSITION", "earliest")}


def describe_pipelines(path: Path, env: dict[str, str]) -> list[str]:
    """One line per pipeline of the file, as its DAG will run; the file's mistakes stop here,
    named, instead of as an import error in the UI."""
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        configs = load_pipelines(path)
    except PipelineConfigError as exc:
        raise SystemExit(f"the pipelines file is wrong: {exc}") from None
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return [f"  DAG {c.name}: {c.schedule or 'manual runs only'}, leader {c.leader_conn_id}, follower "
            f"{c.describe_follower()}, batches in {c.storage_uri}, first run: {c.start_position}" for c in configs]


def main() -> int:
    path, file_env = pipelines_file()
    services = [
        MariaDBServer(LOCAL / "airflow-services", "leader", server_id=1, binlog=True, die_with_parent=True),
        MariaDBServer(LOCAL / "airflow-services", "follower", server_id=2, binlog=False, die_with_parent=True),
    ]
    deployment: AirflowDeployment | None = None
    try:
        leader, follower = (s.start() for s in services)
        leader_user = leader.create_user("cdc_leader", "cdc-leader-pw",
                                         ["REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.*"])
        follower_user = follower.create_user("cdc_follower", "cdc-follower-pw", ["ALL PRIVILEGES ON *.*"])
        if not leader.scalar("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = 'flvDb'"):
            conn = leader.connect()
            with conn.cursor() as cur:
                for statement in seed_statements():
                    cur.execute(statement)
            conn.close()

        env = {
            # the local servers, unless the user's environment names its own
            "AIRFLOW_CONN_MYSQL_LEADER": os.environ.get("AIRFLOW_CONN_MYSQL_LEADER", mysql_conn(leader_user)),
            "AIRFLOW_CONN_MYSQL_FOLLOWER": os.environ.get("AIRFLOW_CONN_MYSQL_FOLLOWER", mysql_conn(follower_user)),
            "AIRFLOW_CONN_SPARK_DEFAULT": os.environ.get(
                "AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[2]"})),
            PIPELINES_FILE_ENV: str(path),
            **file_env,
        }
        lines = describe_pipelines(path, env)
        print(f"leader   127.0.0.1:{leader.port}  (mariadb -h 127.0.0.1 -P {leader.port} -u root -p{leader.root_password})")
        print(f"follower 127.0.0.1:{follower.port}  (mariadb -h 127.0.0.1 -P {follower.port} -u root -p{follower.root_password})")
        print(f"pipelines file: {path}" + ("" if os.environ.get(PIPELINES_FILE_ENV) else
                                           f"  (set {PIPELINES_FILE_ENV} to run yours)"))
        print("\n".join(lines))
        print(f"starting Airflow (api-server, dag-processor, scheduler, triggerer; logs in {HOME / 'logs'}) ...",
              flush=True)
        deployment = AirflowDeployment(HOME, env=env, port=PORT, die_with_parent=True)
        deployment.start()
        print(f"\nAirflow UI: {deployment.url}   login: user {ADMIN_USER!r} password {deployment.password!r}")
        print(f"CDC pipelines page (lag, batches, verification, re-snapshot): {deployment.url}/cdc/")
        print("Ctrl-C stops everything.")
        if not os.environ.get(PIPELINES_FILE_ENV):
            print("\nThe seed is applied by the first run. To watch a run carry a change of yours, make one on the "
                  "leader, then trigger mysql_cdc (or wait for its schedule):")
            print(f"  mariadb -h 127.0.0.1 -P {leader.port} -u root -p{leader.root_password} -e \"{a_change()}\"",
                  flush=True)
        while True:
            deployment.check_alive()
            time.sleep(5)
    except KeyboardInterrupt:
        return 0
    finally:
        if deployment is not None:
            deployment.stop()
        for service in reversed(services):
            service.stop()


if __name__ == "__main__":
    sys.exit(main())
