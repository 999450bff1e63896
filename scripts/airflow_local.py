#!/usr/bin/env python3
"""`make airflow`: `airflow standalone` with the demo pipeline, at http://localhost:8080.

Starts a local MariaDB leader and follower (scripts/local_services.py), seeds the leader with the
seed document's flvDb.pet session, and runs `airflow standalone` (api-server, scheduler,
dag-processor, triggerer) with this repository's dags/ and plugins/ and AIRFLOW_CONN_* for the
default pipelines file's connections. The `mysql_cdc` DAG is unpaused: its first scheduled run
replicates the seed; trigger it by hand, or with {"start": ..., "end": ...} for a backfill.

AIRFLOW_HOME is .local/airflow (kept between runs: the login stays the same); batches go to
.local/cdc-batches (CDC_STORAGE_URI overrides). Ctrl-C stops Airflow and the servers.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "scripts"), str(REPO / "plugins")]

from demo_workload import a_change, seed_statements  # noqa: E402
from local_services import MariaDBServer  # noqa: E402

VENV_BIN = Path(sys.executable).parent
LOCAL = REPO / ".local"
HOME = LOCAL / "airflow"
PORT = int(os.environ.get("AIRFLOW_PORT", "8080"))


def mysql_conn(user: dict) -> str:
    return json.dumps({"conn_type": "mysql", "host": user["host"], "port": user["port"],
                       "login": user["user"], "password": user["password"]})


def wait_for_login(proc: subprocess.Popen, timeout: float = 240) -> str:
    """The UI answers and standalone has written the admin password: return the login line."""
    passwords = HOME / "simple_auth_manager_passwords.json.generated"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"airflow standalone exited with {proc.returncode}; see {HOME / 'standalone.log'}")
        try:
            with urllib.request.urlopen(f"http://localhost:{PORT}/api/v2/monitor/health", timeout=2):
                if passwords.exists():
                    users = json.loads(passwords.read_text())
                    return ", ".join(f"user {name!r} password {pw!r}" for name, pw in users.items())
        except OSError:
            pass
        time.sleep(2)
    raise SystemExit(f"Airflow did not come up on port {PORT} within {timeout:.0f}s; see {HOME / 'standalone.log'}")


def main() -> int:
    services = [
        MariaDBServer(LOCAL / "airflow-services", "leader", server_id=1, binlog=True, die_with_parent=True),
        MariaDBServer(LOCAL / "airflow-services", "follower", server_id=2, binlog=False, die_with_parent=True),
    ]
    proc: subprocess.Popen | None = None
    try:
        leader, follower = (s.start() for s in services)
        leader_user = leader.create_user("cdc_leader", "cdc-leader-pw",
                                         ["REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.*"])
        follower_user = follower.create_user("cdc_follower", "cdc-follower-pw", ["ALL PRIVILEGES ON *.*"])
        conn = leader.connect()
        with conn.cursor() as cur:
            for statement in seed_statements():
                cur.execute(statement)
        conn.close()

        env = dict(os.environ)
        env.update({
            "AIRFLOW_HOME": str(HOME),
            "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "AIRFLOW__API__PORT": str(PORT),
            "AIRFLOW_CONN_MYSQL_LEADER": mysql_conn(leader_user),
            "AIRFLOW_CONN_MYSQL_FOLLOWER": mysql_conn(follower_user),
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
            "CDC_START_POSITION": "earliest",  # the leader is new: replicate all of it
            "PATH": f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}",
            "PYSPARK_PYTHON": sys.executable,
        })
        env.pop("CDC_PIPELINES_FILE", None)
        HOME.mkdir(parents=True, exist_ok=True)
        log = open(HOME / "standalone.log", "ab")
        proc = subprocess.Popen([str(VENV_BIN / "airflow"), "standalone"], env=env, cwd=REPO,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        print(f"leader   127.0.0.1:{leader.port}  (mariadb -h 127.0.0.1 -P {leader.port} -u root -p{leader.root_password})")
        print(f"follower 127.0.0.1:{follower.port}  (mariadb -h 127.0.0.1 -P {follower.port} -u root -p{follower.root_password})")
        print(f"starting airflow standalone (log: {HOME / 'standalone.log'}) ...", flush=True)
        login = wait_for_login(proc)
        print(f"\nAirflow UI: http://localhost:{PORT}   login: {login}")
        print("DAG mysql_cdc (unpaused, every 5 minutes; trigger it to run now). Ctrl-C stops everything.")
        print(f"CDC pipelines page (lag, batches, verification, re-snapshot): http://localhost:{PORT}/cdc/")
        print("\nThe seed is applied by the first run. To watch a run carry a change of yours, make one on the "
              "leader, then trigger mysql_cdc (or wait for its schedule):")
        print(f"  mariadb -h 127.0.0.1 -P {leader.port} -u root -p{leader.root_password} -e \"{a_change()}\"",
              flush=True)
        return proc.wait()
    except KeyboardInterrupt:
        return 0
    finally:
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)  # standalone and the components it started
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        for service in reversed(services):
            service.stop()


if __name__ == "__main__":
    sys.exit(main())
