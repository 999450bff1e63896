"""Processes of the local services: free ports, starting children that die with their parent,
stopping only what is ours (a pid whose environment carries our marker), log tails."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path


HOST = "127.0.0.1"
MARKER_ENV = "MYSQL_CDC_LOCAL_SERVICE"

# moto's server accepts any credentials (it does not validate signatures unless
# explicitly configured to), so these are just well-formed placeholders.
FAKE_AWS_ACCESS_KEY_ID = "testing"
FAKE_AWS_SECRET_ACCESS_KEY = "testing"
FAKE_AWS_REGION = "us-east-1"

# Linux unix-socket paths are limited to 108 bytes (sun_path) including the NUL.
MAX_SOCKET_PATH = 100


class ServiceError(RuntimeError):
    """A local service failed to start/stop; the message carries the log tail."""




def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that is unused right now.

    There is an unavoidable race between closing this probe socket and the server
    binding the port; ``MariaDBServer``/``MotoS3Server`` retry with a new port when the
    port was auto-chosen and the bind fails.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"<no log at {path}>"
    return "\n".join(text.splitlines()[-lines:])


def proc_state(pid: int) -> str | None:
    """Single-letter state from /proc/<pid>/stat, or None if the pid does not exist."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError, OSError):
        return None
    # Field 2 (comm) is parenthesised and may contain spaces; the state follows the last ')'.
    return raw.rsplit(")", 1)[1].split()[0]


def pid_alive(pid: int) -> bool:
    # A zombie counts as dead: inside containers PID 1 frequently does not reap orphans,
    # so os.kill(pid, 0) would succeed forever on an exited daemon.
    state = proc_state(pid)
    return state is not None and state not in ("Z", "X")


def pid_has_marker(pid: int, marker: str) -> bool:
    """True if process ``pid`` was started by us for the service dir ``marker``."""
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return f"{MARKER_ENV}={marker}".encode() in env.split(b"\0")


def signal_pid(pid: int, sig: int, group: bool) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if group:
            # Only used for processes we started with start_new_session=True, where the
            # process group id == pid and the group contains only that service's tree.
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)


def terminate(
    pid: int,
    proc: subprocess.Popen | None,
    timeout: float = 30.0,
    group: bool = False,
) -> None:
    """SIGTERM, wait up to ``timeout`` seconds, then SIGKILL."""
    if proc is not None and proc.poll() is not None:
        return
    if proc is None and not pid_alive(pid):
        return
    signal_pid(pid, signal.SIGTERM, group)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None:
            if proc.poll() is not None:  # also reaps our own child (no zombie left)
                return
        elif not pid_alive(pid):
            return
        time.sleep(0.1)
    signal_pid(pid, signal.SIGKILL, group)
    if proc is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
    else:
        deadline = time.monotonic() + 10
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)


def stop_stale(pid_file: Path, marker: str, group: bool = False) -> None:
    """Stop a process left over from a previous run, if it is really ours."""
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return
    if pid_alive(pid) and pid_has_marker(pid, marker):
        terminate(pid, None, group=group)


def make_preexec(die_with_parent: bool):
    """Return a preexec_fn setting PR_SET_PDEATHSIG, or None.

    With die_with_parent the kernel sends SIGTERM to the service when the process that
    started it dies -- even by SIGKILL, when no finalizer/atexit hook can run.  Used by
    the pytest fixtures so an aborted test run does not leak servers; the CLI leaves it
    off because its services must outlive the CLI process.
    """
    if not die_with_parent or not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)  # resolve before fork, not in the child
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig = 1
    parent_pid = os.getpid()

    def _preexec() -> None:
        prctl(pr_set_pdeathsig, signal.SIGTERM, 0, 0, 0)
        # If the parent already died between fork and prctl, nobody will signal us.
        if os.getppid() != parent_pid:
            os._exit(1)

    return _preexec


def child_env(marker: str) -> dict[str, str]:
    env = dict(os.environ)
    env[MARKER_ENV] = marker
    return env



class PortInUse(Exception):
    """The port a service was given was taken before it bound it (another process won the race)."""


def spawn_on_free_port(service, spawn, log: Path, label: str) -> None:
    """``spawn()`` the service on ``service.port``, or (no fixed port) on a free one, trying
    another when the chosen port was taken before the service bound it (``PortInUse``)."""
    attempts = 1 if service._fixed_port is not None else 3
    for attempt in range(1, attempts + 1):
        if service._fixed_port is None:
            service.port = free_port()
        try:
            spawn()
            return
        except PortInUse:
            if attempt == attempts:
                raise ServiceError(f"{label}: port {service.port} in use\n{tail(log)}") from None


def start_java_service(command: list[str], service_dir: Path, log: Path, die_with_parent: bool, ready,
                       timeout: float, label: str) -> subprocess.Popen:
    """Start a Java server (``command``) as a daemon of ``service_dir`` (its log ``log``) and wait
    until ``ready()``; a server that exits or is not ready within ``timeout`` is stopped and
    reported with its log's tail."""
    with open(log, "ab") as out:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                cwd=service_dir, env=child_env(str(service_dir)), start_new_session=True,
                                preexec_fn=make_preexec(die_with_parent), close_fds=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if ready():
            return proc
        time.sleep(0.3)
    terminate(proc.pid, proc, 30.0, group=True)
    raise ServiceError(f"{label} did not start within {timeout}s:\n{tail(log)}")

