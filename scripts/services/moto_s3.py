"""A real S3 endpoint on loopback: moto in server mode, in its own process."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from .process import FAKE_AWS_ACCESS_KEY_ID, FAKE_AWS_REGION, FAKE_AWS_SECRET_ACCESS_KEY, HOST, PortInUse, ServiceError, child_env, make_preexec, pid_alive, pid_has_marker, spawn_on_free_port, stop_stale, tail, terminate

class MotoS3Server:
    """moto's real HTTP server (``python -m moto.server``) as a separate process.

    Point any S3 client at ``endpoint_url``.  moto accepts ANY credentials and does not
    check signatures, so use the static fake keys in ``client_kwargs()``
    (``FAKE_AWS_ACCESS_KEY_ID``/``FAKE_AWS_SECRET_ACCESS_KEY``, region us-east-1).  All
    state is in memory and disappears when the server stops.
    """

    aws_access_key_id = FAKE_AWS_ACCESS_KEY_ID
    aws_secret_access_key = FAKE_AWS_SECRET_ACCESS_KEY
    region_name = FAKE_AWS_REGION

    def __init__(
        self,
        base_dir: Path,
        port: int | None = None,
        *,
        name: str = "moto_s3",
        python: str | None = None,
        die_with_parent: bool = False,
        start_timeout: float = 60.0,
    ) -> None:
        self.base_dir = Path(base_dir).resolve()
        self.name = name
        self.host = HOST
        self._fixed_port = port
        self.port: int = port if port is not None else 0
        # The interpreter that has moto installed; sys.executable is the venv's python
        # when run from pytest or `.venv/bin/python scripts/local_services.py`.
        self.python = python or sys.executable
        self.die_with_parent = die_with_parent
        self.start_timeout = start_timeout
        self.service_dir = self.base_dir / name
        self.pid_file = self.service_dir / "moto.pid"
        self.log_file = self.service_dir / "moto.log"
        self.pid: int | None = None
        self._proc: subprocess.Popen | None = None

    @property
    def endpoint_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def client_kwargs(self) -> dict[str, str]:
        """kwargs for ``boto3.client("s3", **kw)`` / ``boto3.resource``."""
        return {
            "endpoint_url": self.endpoint_url,
            "aws_access_key_id": self.aws_access_key_id,
            "aws_secret_access_key": self.aws_secret_access_key,
            "region_name": self.region_name,
        }

    def _http_up(self) -> bool:
        try:
            with urllib.request.urlopen(self.endpoint_url + "/", timeout=2):
                return True
        except urllib.error.HTTPError:
            return True  # any HTTP answer (even 4xx/5xx) means the server is serving
        except (urllib.error.URLError, OSError):
            return False

    def start(self) -> "MotoS3Server":
        if self._proc is not None and self._proc.poll() is None:
            return self
        stop_stale(self.pid_file, str(self.service_dir), group=True)
        if self.service_dir.exists():
            shutil.rmtree(self.service_dir)
        self.service_dir.mkdir(parents=True)
        spawn_on_free_port(self, self._spawn_and_wait, self.log_file, "moto")
        return self

    def _spawn_and_wait(self) -> None:
        log_size = self.log_file.stat().st_size if self.log_file.exists() else 0
        env = child_env(str(self.service_dir))
        env.setdefault("PYTHONUNBUFFERED", "1")
        with open(self.log_file, "ab") as out:
            self._proc = subprocess.Popen(
                [self.python, "-m", "moto.server", "-H", self.host, "-p", str(self.port)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.service_dir,
                env=env,
                start_new_session=True,
                preexec_fn=make_preexec(self.die_with_parent),
                close_fds=True,
            )
        self.pid = self._proc.pid
        self.pid_file.write_text(f"{self.pid}\n")
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            rc = self._proc.poll()
            if rc is not None:
                new_log = ""
                with contextlib.suppress(OSError):
                    new_log = self.log_file.read_text(errors="replace")[log_size:]
                self._proc = None
                self.pid = None
                if "Address already in use" in new_log:
                    raise PortInUse()
                raise ServiceError(
                    f"moto server exited with rc={rc} during startup; log tail:\n"
                    f"{tail(self.log_file)}"
                )
            if self._http_up():
                return
            time.sleep(0.1)
        self.stop()
        raise ServiceError(
            f"moto server did not answer on {self.endpoint_url} within "
            f"{self.start_timeout}s; log tail:\n{tail(self.log_file)}"
        )

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM the server's process group, then SIGKILL. Safe to call repeatedly."""
        proc, pid = self._proc, self.pid
        self._proc = None
        self.pid = None
        if proc is not None:
            terminate(proc.pid, proc, timeout, group=True)
        elif pid is not None:
            if pid_has_marker(pid, str(self.service_dir)):
                terminate(pid, None, timeout, group=True)
        else:
            stop_stale(self.pid_file, str(self.service_dir), group=True)

    def is_running(self) -> bool:
        if self._proc is not None:
            return self._proc.poll() is None
        return self.pid is not None and pid_alive(self.pid)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "moto_s3",
            "name": self.name,
            "host": self.host,
            "port": self.port,
            "pid": self.pid,
            "service_dir": str(self.service_dir),
            "log": str(self.log_file),
            **self.client_kwargs(),
        }

    def __enter__(self) -> "MotoS3Server":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"MotoS3Server(endpoint_url={self.endpoint_url!r}, pid={self.pid})"
