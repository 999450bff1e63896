"""A real Spark standalone cluster (master + worker from pip's pyspark) on loopback."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from .process import HOST, ServiceError, child_env, free_port, make_preexec, tail, terminate

class SparkStandaloneCluster:
    """A real Spark standalone cluster on loopback: one master and one worker, started from
    pyspark's own distribution (pip's pyspark is a whole Spark: ``SPARK_HOME`` is the package
    directory and ``bin/spark-class`` starts the daemons).

    ``master_url`` is what a ``spark_default`` connection points at; ``applications()`` reads the
    master's JSON status page, which lists every application that ran on the cluster.
    """

    def __init__(self, base_dir: Path, name: str = "spark", *, cores: int = 2, memory: str = "2g",
                 die_with_parent: bool = False, start_timeout: float = 90.0) -> None:
        import pyspark  # the venv's: the cluster runs the same Spark as spark-submit

        self.spark_home = Path(pyspark.__file__).resolve().parent
        self.service_dir = Path(base_dir).resolve() / name
        self.cores, self.memory = cores, memory
        self.die_with_parent = die_with_parent
        self.start_timeout = start_timeout
        self.host = HOST
        self.port = self.web_port = self.worker_web_port = 0
        self._procs: list[subprocess.Popen] = []

    @property
    def master_url(self) -> str:
        return f"spark://{self.host}:{self.port}"

    @property
    def web_url(self) -> str:
        return f"http://{self.host}:{self.web_port}"

    def _env(self) -> dict[str, str]:
        env = child_env(str(self.service_dir))
        env.update({
            "SPARK_HOME": str(self.spark_home),
            "SPARK_LOG_DIR": str(self.service_dir / "logs"),
            "SPARK_WORKER_DIR": str(self.service_dir / "work"),
            "SPARK_LOCAL_IP": self.host,
            # executors run this interpreter: the one with pyarrow, pymysql and boto3
            "PYSPARK_PYTHON": sys.executable,
        })
        return env

    def _spawn(self, log_name: str, *args: str) -> None:
        with open(self.service_dir / log_name, "ab") as out:
            self._procs.append(subprocess.Popen(
                [str(self.spark_home / "bin" / "spark-class"), *args],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, cwd=self.service_dir,
                env=self._env(), start_new_session=True, preexec_fn=make_preexec(self.die_with_parent),
                close_fds=True,
            ))

    def status(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"{self.web_url}/json/", timeout=5) as response:
            return json.loads(response.read())

    def applications(self) -> list[dict[str, Any]]:
        """Every application the master knows, running or completed."""
        status = self.status()
        return list(status.get("activeapps", [])) + list(status.get("completedapps", []))

    def start(self) -> "SparkStandaloneCluster":
        if self.service_dir.exists():
            shutil.rmtree(self.service_dir)
        (self.service_dir / "work").mkdir(parents=True)
        self.port, self.web_port, self.worker_web_port = free_port(), free_port(), free_port()
        self._spawn("master.log", "org.apache.spark.deploy.master.Master", "--host", self.host,
                    "--port", str(self.port), "--webui-port", str(self.web_port))
        self._spawn("worker.log", "org.apache.spark.deploy.worker.Worker", self.master_url, "--host", self.host,
                    "--cores", str(self.cores), "--memory", self.memory,
                    "--webui-port", str(self.worker_web_port), "--work-dir", str(self.service_dir / "work"))
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if any(p.poll() is not None for p in self._procs):
                break
            with contextlib.suppress(OSError, ValueError):
                if self.status().get("aliveworkers", 0) >= 1:
                    return self
            time.sleep(0.5)
        logs = "\n".join(f"--- {n}\n{tail(self.service_dir / n)}" for n in ("master.log", "worker.log"))
        self.stop()
        raise ServiceError(f"the Spark cluster did not get a live worker within {self.start_timeout}s\n{logs}")

    def stop(self, timeout: float = 30.0) -> None:
        procs, self._procs = self._procs, []
        for proc in reversed(procs):  # the worker first; its group holds the executors it started
            terminate(proc.pid, proc, timeout, group=True)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "spark", "master_url": self.master_url, "web_url": self.web_url,
                "pids": [p.pid for p in self._procs], "service_dir": str(self.service_dir)}

    def __enter__(self) -> "SparkStandaloneCluster":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
