"""Airflow as it is deployed: api-server, dag-processor, scheduler (LocalExecutor) and triggerer as
four separate processes on loopback, sharing one SQLite metadata database.

``dag.test()`` runs a DAG in one process: triggers inline, no task supervisor, no execution API,
none of the environment a task runner sets. This runs it the way ``docs/deploy.md`` tells a user
to: every component its own process, tasks started by the scheduler's executor and reporting
through the API server's execution API, a sensor's wait handed to the triggerer. The suite's
deployed tests (``tests/airflow/deployed``) and ``bench`` start it; so can a person:

    python scripts/airflow_deployment.py --home /tmp/af    # Ctrl-C stops it

Each component starts in a session of its own, so a test can kill one (``kill``) the way a crash
would, then start it again (``start_component``). What a killed scheduler leaves behind (its
LocalExecutor workers and log server stay in its process group and ignore SIGTERM; a task runs in
a process group of its own) is found by its session and killed by ``stop``.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from local_services import free_port, make_preexec, tail  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
COMPONENTS = ("api-server", "dag-processor", "scheduler", "triggerer")
ADMIN_USER = "cdc-admin"


class DeploymentError(RuntimeError):
    """A component did not start, or a wait ran out; the message carries the logs' tails."""


@dataclass
class Component:
    name: str
    proc: subprocess.Popen
    log: Path
    killed: bool = False


@dataclass
class AirflowDeployment:
    """``home``: AIRFLOW_HOME (metadata DB, logs, the admin's password). ``env``: what the
    components need beyond Airflow's own settings: connections (``AIRFLOW_CONN_*``), the
    pipelines file (``CDC_PIPELINES_FILE``). ``settings``: more ``AIRFLOW__*`` values, winning
    over the defaults below."""

    home: Path
    env: dict[str, str] = field(default_factory=dict)
    settings: dict[str, str] = field(default_factory=dict)
    die_with_parent: bool = True
    port: int = field(default_factory=free_port)
    components: dict[str, Component] = field(default_factory=dict)
    password: str = field(default_factory=lambda: secrets.token_urlsafe(12))
    _started: list[Component] = field(default_factory=list)  # killed components' too: their orphans
    _token: str | None = None
    _starts: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def airflow_settings(self) -> dict[str, str]:
        """What every component must agree on (``docs/deploy.md`` explains each)."""
        passwords = self.home / "passwords.json"
        return {
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__PARALLELISM": "4",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{self.home}/airflow.db",
            "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "AIRFLOW__CORE__LAZY_LOAD_PLUGINS": "False",
            # tasks reach the API server here; the default assumes port 8080
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.url}/execution/",
            "AIRFLOW__API__PORT": str(self.port),
            "AIRFLOW__API__HOST": "127.0.0.1",
            # one secret for the scheduler that signs task tokens and the API server that checks
            # them; left unset, each process draws its own and every task is refused
            "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(64),  # HS512: 64 bytes or more,
            "AIRFLOW__API__SECRET_KEY": secrets.token_urlsafe(32),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{ADMIN_USER}:admin",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
            # the ports a scheduler's and a triggerer's log servers bind: free ones, so a second
            # deployment (or a killed scheduler's orphaned log server) cannot block them
            "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
            "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
            # a task whose process died is failed (and retried) after 60 s, not 300
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "60",
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "5",
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "10",
        }

    def process_env(self) -> dict[str, str]:
        env = {**os.environ, **self.airflow_settings(), **self.settings, **self.env}
        env.update({
            "AIRFLOW_HOME": str(self.home),
            # spark-submit is found on PATH only (the merge task runs it)
            "PATH": f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}",
            "PYSPARK_PYTHON": env.get("PYSPARK_PYTHON", sys.executable),
        })
        return env

    # -- starting and stopping ------------------------------------------------------------------

    def start(self) -> "AirflowDeployment":
        self.home.mkdir(parents=True, exist_ok=True)
        (self.home / "passwords.json").write_text(json.dumps({ADMIN_USER: self.password}))
        self._env = self.process_env()
        migrate_log = self.home / "db-migrate.log"
        with open(migrate_log, "w") as out:
            done = subprocess.run([str(VENV_BIN / "airflow"), "db", "migrate"], env=self._env, stdout=out,
                                  stderr=subprocess.STDOUT)
        if done.returncode != 0:
            raise DeploymentError(f"airflow db migrate failed:\n{tail(migrate_log)}")
        self.start_component("api-server")
        self.wait(lambda: self._healthy(), 180, "the API server answering /api/v2/monitor/health")
        for name in ("dag-processor", "scheduler", "triggerer"):
            self.start_component(name)
        return self

    def start_component(self, name: str) -> Component:
        """Start (or start again) ``name``: ``airflow <name>`` in a session of its own."""
        if name not in COMPONENTS:
            raise ValueError(f"no Airflow component {name!r}; one of {COMPONENTS}")
        previous = self.components.get(name)
        if previous is not None and previous.proc.poll() is None and not previous.killed:
            raise DeploymentError(f"{name} is already running (pid {previous.proc.pid})")
        self._starts += 1
        log = self.home / "logs" / f"{name}-{self._starts:02d}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        args = [str(VENV_BIN / "airflow"), name]
        with open(log, "w") as out:
            proc = subprocess.Popen(args, env=self._env, cwd=self.home, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True, preexec_fn=make_preexec(self.die_with_parent))
        self.components[name] = Component(name, proc, log)
        self._started.append(self.components[name])
        return self.components[name]

    def kill(self, name: str) -> int:
        """SIGKILL ``name``'s own process, as a crash or the OOM killer would; its children
        (a scheduler's executor workers) live on, as they do in a deployment. Returns the pid."""
        component = self.components[name]
        with contextlib.suppress(ProcessLookupError):
            os.kill(component.proc.pid, signal.SIGKILL)
        component.proc.wait(timeout=30)
        component.killed = True
        return component.proc.pid

    def stop(self) -> None:
        """SIGTERM each component's process group, then SIGKILL whatever of ours is left: the
        orphans of a killed component (a scheduler's executor workers and log server ignore
        SIGTERM) and task processes, which run in process groups of their own."""
        for component in self.components.values():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(component.proc.pid, signal.SIGTERM)  # a graceful stop where one is heard
        deadline = time.monotonic() + 20
        for component in self.components.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                component.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        for _ in range(3):
            left = self.processes()
            if not left:
                break
            for pid in left:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.5)
        for component in self._started:
            with contextlib.suppress(subprocess.TimeoutExpired):
                component.proc.wait(timeout=5)

    def processes(self) -> list[int]:
        """Every live process started for this deployment: each component runs in a session of
        its own, and everything it starts stays in that session (a task's process moves to a
        process group of its own, not to another session). An environment marker would not do:
        Airflow's process titles overwrite /proc/<pid>/environ."""
        sessions = {c.proc.pid for c in self._started}
        pids = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and _session_of(int(entry.name)) in sessions:
                pids.append(int(entry.name))
        return pids

    def __enter__(self) -> "AirflowDeployment":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the REST API, as a user's tools read it --------------------------------------------------

    def _healthy(self) -> bool:
        self.check_alive()
        try:
            with urllib.request.urlopen(f"{self.url}/api/v2/monitor/health", timeout=5) as response:
                return response.status == 200
        except OSError:
            return False

    def check_alive(self) -> None:
        for component in self.components.values():
            if not component.killed and component.proc.poll() is not None:
                raise DeploymentError(f"airflow {component.name} exited with {component.proc.returncode}:\n"
                                      f"{tail(component.log)}")

    def token(self) -> str:
        if self._token is None:
            request = urllib.request.Request(
                f"{self.url}/auth/token", json.dumps({"username": ADMIN_USER, "password": self.password}).encode(),
                {"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=30) as response:
                self._token = json.loads(response.read())["access_token"]
        return self._token

    def api(self, path: str, method: str = "GET", body: dict | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"{self.url}/api/v2{path}", data=data, method=method, headers={
            "Authorization": f"Bearer {self.token()}", "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.loads(response.read())

    def dag_runs(self, dag_id: str) -> list[dict]:
        """The DAG's runs, oldest first ([] before the DAG is parsed)."""
        try:
            body = self.api(f"/dags/{dag_id}/dagRuns?order_by=run_after&limit=100")
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return []
            raise
        return body["dag_runs"]

    def task_instances(self, dag_id: str, run_id: str) -> dict[str, dict]:
        body = self.api(f"/dags/{dag_id}/dagRuns/{urllib.request.quote(run_id, safe='')}/taskInstances")
        return {ti["task_id"]: ti for ti in body["task_instances"]}

    def tries(self, dag_id: str, run_id: str, task_id: str) -> list[dict]:
        """Every try of a task instance, the finished ones and the current one."""
        body = self.api(f"/dags/{dag_id}/dagRuns/{urllib.request.quote(run_id, safe='')}/taskInstances/"
                        f"{task_id}/tries")
        return body["task_instances"]

    def wait(self, predicate: Callable[[], Any], timeout: float, what: str, every: float = 2.0) -> Any:
        """Poll ``predicate`` until it returns something true; fail naming ``what`` and the logs."""
        deadline = time.monotonic() + timeout
        while True:
            self.check_alive()
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                tails = "\n".join(f"--- {c.log.name}\n{tail(c.log, 15)}" for c in self.components.values())
                raise DeploymentError(f"waited {timeout:.0f} s for {what}\n{tails}")
            time.sleep(every)


def pipeline_connections(prefix: str, leader: dict, follower: dict | None, s3: dict, spark_master: str = "local[2]"
                         ) -> dict[str, str]:
    """The environment that gives a deployment a pipeline's connections, as ``AIRFLOW_CONN_<ID>``
    JSON: ``<prefix>_leader`` and ``<prefix>_follower`` (MySQL: ``MariaDBServer.create_user``'s
    host, port, user and password; no follower for a lake), ``<prefix>_s3`` (``s3``: boto3's
    client kwargs, ``MotoS3Server.client_kwargs()``) and ``<prefix>_spark``."""
    def mysql(user: dict) -> str:
        return _connection("mysql", host=user["host"], port=user["port"], login=user["user"], password=user["password"])

    env = {
        f"AIRFLOW_CONN_{prefix.upper()}_LEADER": mysql(leader),
        f"AIRFLOW_CONN_{prefix.upper()}_S3": _connection(
            "aws", login=s3["aws_access_key_id"], password=s3["aws_secret_access_key"],
            extra={"endpoint_url": s3["endpoint_url"], "region_name": s3.get("region_name", "us-east-1")}),
        f"AIRFLOW_CONN_{prefix.upper()}_SPARK": _connection("spark", host=spark_master),
    }
    if follower is not None:
        env[f"AIRFLOW_CONN_{prefix.upper()}_FOLLOWER"] = mysql(follower)
    return env


def _connection(conn_type: str, **fields) -> str:
    return json.dumps({"conn_type": conn_type, **fields})


def _session_of(pid: int) -> int | None:
    """The session id of a live process (a zombie counts as gone), from /proc/<pid>/stat."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw.rsplit(")", 1)[1].split()  # the command may hold spaces; fields follow its ')'
    return None if fields[0] in ("Z", "X") else int(fields[3])


def main() -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, required=True, help="AIRFLOW_HOME for this deployment")
    args = parser.parse_args()
    deployment = AirflowDeployment(args.home.resolve(), die_with_parent=True)
    with deployment:
        print(f"Airflow on {deployment.url} (user {ADMIN_USER}, password {deployment.password}); Ctrl-C stops it",
              flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                deployment.check_alive()
                time.sleep(5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
