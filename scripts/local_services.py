#!/usr/bin/env python3
"""Start REAL local services for tests and the demo: MariaDB servers and a moto S3 server.

Nothing here is mocked in-process: every service is a separate OS process listening on
127.0.0.1, so the code under test talks to it exactly as it would talk to production
(TCP MySQL protocol, binlog replication protocol, HTTP S3 API).

Importable API (stdlib + pymysql only)::

    free_port() -> int
    MariaDBServer(base_dir, name, server_id, binlog, port=None, extra_args=())
        .start() / .stop() / .connect(...) / .create_user(...) / .conn_params(...)
    MotoS3Server(base_dir, port=None)
        .start() / .stop() / .endpoint_url / .client_kwargs()

CLI (used by ``make demo``)::

    python scripts/local_services.py up     --dir DIR [--s3]   # writes DIR/services.json
    python scripts/local_services.py status --dir DIR
    python scripts/local_services.py down   --dir DIR [--clean]

Every child process is started in its own session (``start_new_session=True``) so that it
outlives the CLI invocation like a daemon and does not receive the terminal's Ctrl-C.
Each child also carries the environment marker ``MYSQL_CDC_LOCAL_SERVICE=<its dir>``;
``stop``/``down`` only signal a pid whose /proc environ carries that marker, so a recycled
pid that now belongs to somebody else's process is never killed.
"""
from __future__ import annotations

import argparse
import contextlib
import ctypes
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Iterable

import pymysql

__all__ = [
    "free_port",
    "MariaDBServer",
    "MySQLServer",
    "mysql_available",
    "MotoS3Server",
    "SparkStandaloneCluster",
    "ServiceError",
    "FAKE_AWS_ACCESS_KEY_ID",
    "FAKE_AWS_SECRET_ACCESS_KEY",
    "FAKE_AWS_REGION",
]

HOST = "127.0.0.1"
MARKER_ENV = "MYSQL_CDC_LOCAL_SERVICE"

# moto's server accepts any credentials (it does not validate signatures unless
# explicitly configured to), so these are just well-formed placeholders.
FAKE_AWS_ACCESS_KEY_ID = "testing"
FAKE_AWS_SECRET_ACCESS_KEY = "testing"
FAKE_AWS_REGION = "us-east-1"

# Linux unix-socket paths are limited to 108 bytes (sun_path) including the NUL.
_MAX_SOCKET_PATH = 100


class ServiceError(RuntimeError):
    """A local service failed to start/stop; the message carries the log tail."""


# --------------------------------------------------------------------------- helpers


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that is unused right now.

    There is an unavoidable race between closing this probe socket and the server
    binding the port; ``MariaDBServer``/``MotoS3Server`` retry with a new port when the
    port was auto-chosen and the bind fails.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"<no log at {path}>"
    return "\n".join(text.splitlines()[-lines:])


def _proc_state(pid: int) -> str | None:
    """Single-letter state from /proc/<pid>/stat, or None if the pid does not exist."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError, OSError):
        return None
    # Field 2 (comm) is parenthesised and may contain spaces; the state follows the last ')'.
    return raw.rsplit(")", 1)[1].split()[0]


def _pid_alive(pid: int) -> bool:
    # A zombie counts as dead: inside containers PID 1 frequently does not reap orphans,
    # so os.kill(pid, 0) would succeed forever on an exited daemon.
    state = _proc_state(pid)
    return state is not None and state not in ("Z", "X")


def _pid_has_marker(pid: int, marker: str) -> bool:
    """True if process ``pid`` was started by us for the service dir ``marker``."""
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return f"{MARKER_ENV}={marker}".encode() in env.split(b"\0")


def _signal_pid(pid: int, sig: int, group: bool) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if group:
            # Only used for processes we started with start_new_session=True, where the
            # process group id == pid and the group contains only that service's tree.
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)


def _terminate(
    pid: int,
    proc: subprocess.Popen | None,
    timeout: float = 30.0,
    group: bool = False,
) -> None:
    """SIGTERM, wait up to ``timeout`` seconds, then SIGKILL."""
    if proc is not None and proc.poll() is not None:
        return
    if proc is None and not _pid_alive(pid):
        return
    _signal_pid(pid, signal.SIGTERM, group)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None:
            if proc.poll() is not None:  # also reaps our own child (no zombie left)
                return
        elif not _pid_alive(pid):
            return
        time.sleep(0.1)
    _signal_pid(pid, signal.SIGKILL, group)
    if proc is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
    else:
        deadline = time.monotonic() + 10
        while _pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)


def _stop_stale(pid_file: Path, marker: str, group: bool = False) -> None:
    """Stop a process left over from a previous run, if it is really ours."""
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return
    if _pid_alive(pid) and _pid_has_marker(pid, marker):
        _terminate(pid, None, group=group)


def _make_preexec(die_with_parent: bool):
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


def _child_env(marker: str) -> dict[str, str]:
    env = dict(os.environ)
    env[MARKER_ENV] = marker
    return env


# --------------------------------------------------------------------------- MariaDB


class MariaDBServer:
    """A throw-away MariaDB server with its own fresh datadir under ``base_dir/name``.

    Layout::

        base_dir/name/data/          datadir (binlog files: data/binlog.000001 ...)
        base_dir/name/mariadbd.pid   pid file
        base_dir/name/error.log      --log-error
        base_dir/name/stdout.log     anything the daemon prints to stdout/stderr
        base_dir/name/mysqld.sock    unix socket (or a hashed /tmp path if too long)

    Root can log in over TCP from 127.0.0.1 as ``root_user``/``root_password``.
    """

    root_user = "root"

    def __init__(
        self,
        base_dir: Path,
        name: str,
        server_id: int,
        binlog: bool,
        port: int | None = None,
        extra_args: tuple[str, ...] = (),
        *,
        root_password: str = "rootpw",
        die_with_parent: bool = False,
        start_timeout: float = 60.0,
    ) -> None:
        self.base_dir = Path(base_dir).resolve()
        self.name = name
        self.server_id = server_id
        self.binlog = binlog
        self.host = HOST
        self._fixed_port = port
        self.port: int = port if port is not None else 0
        self.extra_args = tuple(extra_args)
        self.root_password = root_password
        self.die_with_parent = die_with_parent
        self.start_timeout = start_timeout

        self.service_dir = self.base_dir / name
        self.datadir = self.service_dir / "data"
        self.pid_file = self.service_dir / "mariadbd.pid"
        self.error_log = self.service_dir / "error.log"
        self.stdout_log = self.service_dir / "stdout.log"
        self.socket_path = self._socket_path()
        self.pid: int | None = None
        self._proc: subprocess.Popen | None = None

    # -- paths ---------------------------------------------------------------------

    def _socket_path(self) -> Path:
        candidate = self.service_dir / "mysqld.sock"
        if len(str(candidate)) < _MAX_SOCKET_PATH:
            return candidate
        # pytest tmp dirs can be long; fall back to a short, deterministic /tmp path.
        digest = hashlib.sha1(str(self.service_dir).encode()).hexdigest()[:12]
        return Path(tempfile.gettempdir()) / f"mcdc-{digest}.sock"

    # -- lifecycle -----------------------------------------------------------------

    def _server_args(self) -> list[str]:
        args = [
            shutil.which("mariadbd") or "/usr/sbin/mariadbd",
            # --no-defaults must come first: ignore /etc/mysql/my.cnf & friends so the
            # Debian system config (datadir, socket, bind-address...) cannot leak in.
            "--no-defaults",
            "--user=root",  # mariadbd refuses to run as root without this
            f"--datadir={self.datadir}",
            *self._common_args(),
        ]
        if self.binlog:
            args += [
                f"--log-bin={self.datadir}/binlog",
                "--binlog-format=ROW",
                "--binlog-row-image=FULL",
                # FULL row metadata puts column names / signedness / charsets into the
                # TABLE_MAP events, which the CDC reader needs to decode rows by name.
                "--binlog-row-metadata=FULL",
            ]
        args += list(self.extra_args)
        return args

    def _common_args(self) -> list[str]:
        """What every server of ours runs with, MariaDB and MySQL alike."""
        return [
            f"--socket={self.socket_path}",
            f"--port={self.port}",
            f"--bind-address={self.host}",
            f"--pid-file={self.pid_file}",
            f"--log-error={self.error_log}",
            "--skip-name-resolve",
            "--innodb-buffer-pool-size=128M",
            "--max-connections=500",
            "--local-infile=1",
            "--default-time-zone=+00:00",
            "--character-set-server=utf8mb4",
            "--collation-server=utf8mb4_unicode_ci",
            f"--server-id={self.server_id}",
        ]

    def _install_db(self) -> None:
        self.datadir.mkdir(parents=True)
        cmd = [
            shutil.which("mariadb-install-db") or "/usr/bin/mariadb-install-db",
            "--no-defaults",
            f"--datadir={self.datadir}",
            "--user=root",
            # "normal": root@localhost gets a (empty) password instead of unix_socket
            # auth, so TCP logins as root work and we can then set a real password.
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
        ]
        res = subprocess.run(cmd, capture_output=True, text=True)
        (self.service_dir / "install-db.log").write_text(res.stdout + res.stderr)
        if res.returncode != 0:
            raise ServiceError(
                f"mariadb-install-db failed for {self.name} (rc={res.returncode}):\n"
                + (res.stdout + res.stderr)[-4000:]
            )

    def start(self) -> "MariaDBServer":
        """Create a fresh datadir, start mariadbd, wait until root can log in over TCP."""
        if self._proc is not None and self._proc.poll() is None:
            return self
        # A previous run (crashed test session, earlier `up`) may have left a live server
        # and/or a datadir here: stop it (only if it is ours) and start from scratch.
        _stop_stale(self.pid_file, str(self.service_dir))
        if self.service_dir.exists():
            shutil.rmtree(self.service_dir)
        self.service_dir.mkdir(parents=True)
        if self.socket_path.exists() and not str(self.socket_path).startswith(str(self.service_dir)):
            self.socket_path.unlink()
        self._install_db()

        attempts = 1 if self._fixed_port is not None else 3
        for attempt in range(1, attempts + 1):
            if self._fixed_port is None:
                self.port = free_port()
            try:
                self._spawn_and_wait()
                break
            except _PortInUse:
                if attempt == attempts:
                    raise ServiceError(
                        f"{self.name}: port {self.port} in use\n{_tail(self.error_log)}"
                    ) from None
        self._secure()
        return self

    def _spawn_and_wait(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.pid_file.unlink()
        log_size = self.error_log.stat().st_size if self.error_log.exists() else 0
        with open(self.stdout_log, "ab") as out:
            self._proc = subprocess.Popen(
                self._server_args(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.service_dir,
                env=_child_env(str(self.service_dir)),
                start_new_session=True,
                preexec_fn=_make_preexec(self.die_with_parent),
                close_fds=True,
            )
        self.pid = self._proc.pid
        deadline = time.monotonic() + self.start_timeout
        last_err: Exception | None = None
        while time.monotonic() < deadline:
            rc = self._proc.poll()
            if rc is not None:
                new_log = ""
                with contextlib.suppress(OSError):
                    new_log = self.error_log.read_text(errors="replace")[log_size:]
                self._proc = None
                self.pid = None
                if "Address already in use" in new_log or "Bind on TCP/IP port" in new_log:
                    raise _PortInUse()
                raise ServiceError(
                    f"{self.__class__.__name__} {self.name} exited with rc={rc} during startup; "
                    f"error log tail:\n{_tail(self.error_log)}"
                )
            try:
                # Fresh datadir: root has an empty password until _secure() runs.
                conn = pymysql.connect(
                    host=self.host, port=self.port, user="root", password="",
                    connect_timeout=2,
                )
                conn.close()
                return
            except pymysql.err.OperationalError as exc:
                last_err = exc
                time.sleep(0.1)
        self.stop()
        raise ServiceError(
            f"{self.__class__.__name__} {self.name} did not accept connections on {self.host}:{self.port} "
            f"within {self.start_timeout}s (last error: {last_err}); error log tail:\n"
            f"{_tail(self.error_log)}"
        )

    def _secure(self) -> None:
        """Drop anonymous users, drop useless root@<hostname>, set the root password."""
        conn = pymysql.connect(host=self.host, port=self.port, user="root", password="",
                               autocommit=True)
        try:
            with conn.cursor() as cur:
                # Keep account administration out of the leader's binlog so a CDC reader
                # starting at the first binlog file only sees the test's own changes.
                cur.execute("SET SESSION sql_log_bin = 0")
                cur.execute("SELECT User, Host FROM mysql.global_priv")
                accounts = list(cur.fetchall())
                for user, host in accounts:
                    # Anonymous ''@'localhost' / ''@'<hostname>' accounts are more specific
                    # (by host) than 'user'@'%', so they could shadow real users; root@<hostname>
                    # is ignored under --skip-name-resolve anyway (and would be password-less).
                    if user == "" or (user == "root" and host not in ("localhost", "127.0.0.1", "::1")):
                        cur.execute("DROP USER %s@%s", (user, host))
                for user, host in accounts:
                    if user == "root" and host in ("localhost", "127.0.0.1", "::1"):
                        cur.execute("ALTER USER %s@%s IDENTIFIED BY %s",
                                    (user, host, self.root_password))
                cur.execute("FLUSH PRIVILEGES")
        finally:
            conn.close()

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM, wait up to ``timeout`` s, then SIGKILL. Safe to call repeatedly."""
        proc, pid = self._proc, self.pid
        self._proc = None
        self.pid = None
        if proc is not None:
            _terminate(proc.pid, proc, timeout)
        elif pid is not None:
            if _pid_has_marker(pid, str(self.service_dir)):
                _terminate(pid, None, timeout)
        else:
            _stop_stale(self.pid_file, str(self.service_dir))

    def is_running(self) -> bool:
        if self._proc is not None:
            return self._proc.poll() is None
        return self.pid is not None and _pid_alive(self.pid)

    # -- clients -------------------------------------------------------------------

    def conn_params(self, user: str | None = None, password: str | None = None) -> dict[str, Any]:
        """dict(host, port, user, password); defaults to the root account."""
        if user is None:
            user, password = self.root_user, self.root_password
        return {"host": self.host, "port": self.port, "user": user, "password": password or ""}

    def run_sql(self, statements: Iterable[str], database: str | None = None) -> None:
        """Execute ``statements`` in order on one root connection (autocommit)."""
        conn = self.connect(database=database)
        try:
            with conn.cursor() as cur:
                for statement in statements:
                    cur.execute(statement)
        finally:
            conn.close()

    def purge_binary_logs_to(self, binlog_file: str, timeout: float = 30.0) -> None:
        """``PURGE BINARY LOGS TO binlog_file``, until it took effect. MariaDB keeps a file until
        its binlog checkpoint (InnoDB made its transactions durable) is logged, in the background,
        and skips it in PURGE without a warning meanwhile; so PURGE is repeated until the files
        before ``binlog_file`` are gone."""
        deadline = time.monotonic() + timeout
        while True:
            self.run_sql([f"PURGE BINARY LOGS TO '{binlog_file}'"])
            conn = self.connect()
            try:
                with conn.cursor() as cur:
                    cur.execute("SHOW BINARY LOGS")
                    first = cur.fetchone()[0]
            finally:
                conn.close()
            if first == binlog_file:
                return
            if time.monotonic() > deadline:
                raise ServiceError(f"{self.name}: binlog files before {binlog_file} still there after {timeout}s")
            time.sleep(0.2)

    def purge_binary_logs(self) -> str:
        """Start a new binlog file and purge every one before it; returns the new file's name."""
        self.run_sql(["FLUSH BINARY LOGS"])
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                cur.execute("SHOW BINARY LOGS")
                current = cur.fetchall()[-1][0]
        finally:
            conn.close()
        self.purge_binary_logs_to(current)
        return current

    def one_row(self, sql: str) -> tuple:
        """The first row ``sql`` returns (root connection)."""
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(sql)
                return cur.fetchone()
        finally:
            conn.close()

    def scalar(self, sql: str) -> Any:
        """The one value ``sql`` returns (root connection)."""
        return self.one_row(sql)[0]

    # -- replication (MariaDB GTID replication; a replica needs binlog=True, log_slave_updates) --

    def replicate_from(self, source: "MariaDBServer") -> None:
        """Become a GTID replica of ``source`` from its current GTID position (not from its first
        binlog: tests before may have purged it)."""
        gtid = source.scalar("SELECT @@GLOBAL.gtid_binlog_pos")
        self.run_sql([
            self.STOP_REPLICATION, self.RESET_REPLICATION, f"SET GLOBAL gtid_slave_pos = '{gtid}'",
            f"CHANGE MASTER TO MASTER_HOST='{source.host}', MASTER_PORT={source.port}, "
            f"MASTER_USER='{source.root_user}', MASTER_PASSWORD='{source.root_password}', MASTER_USE_GTID=slave_pos",
            "START SLAVE",
        ])

    def wait_for(self, source: "MariaDBServer", timeout: float = 60.0) -> None:
        """Until this replica has applied everything ``source`` has logged."""
        gtid = source.scalar("SELECT @@GLOBAL.gtid_binlog_pos")
        if self.scalar(f"SELECT MASTER_GTID_WAIT('{gtid}', {timeout})") != 0:
            raise RuntimeError(f"{self.name} did not reach {gtid} within {timeout} s: "
                               f"{self.scalar('SELECT @@GLOBAL.gtid_slave_pos')}")

    # the dialect's words for what both servers do alike (MySQLServer has its own)
    STOP_REPLICATION, RESET_REPLICATION = "STOP SLAVE", "RESET SLAVE ALL"
    IDENTITY = "@@GLOBAL.server_id"  # how capture names this server in checkpoints

    def pause_replication(self) -> None:
        self.run_sql([self.STOP_REPLICATION])

    def promote(self) -> None:
        """Stop replicating: this server is a leader now (a failover)."""
        self.run_sql([self.STOP_REPLICATION, self.RESET_REPLICATION])

    @property
    def server_identity(self) -> str:
        return str(self.scalar(f"SELECT {self.IDENTITY}"))

    def connect(
        self,
        user: str | None = None,
        password: str | None = None,
        database: str | None = None,
        **kw: Any,
    ) -> pymysql.connections.Connection:
        """pymysql connection over TCP (root by default), autocommit on, utf8mb4."""
        params = self.conn_params(user, password)
        kw.setdefault("autocommit", True)
        kw.setdefault("charset", "utf8mb4")
        kw.setdefault("connect_timeout", 10)
        return pymysql.connect(database=database, **params, **kw)

    def create_user(self, user: str, password: str, grants: list[str]) -> dict[str, Any]:
        """Create (or reset) ``user`` and grant ``grants``; returns conn_params for it.

        ``grants`` are GRANT bodies such as
        ``"REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.*"``.  The account is created
        for '%' (matches TCP from 127.0.0.1 under --skip-name-resolve) and 'localhost'
        (unix-socket logins).
        """
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                cur.execute("SET SESSION sql_log_bin = 0")  # see _secure()
                for host in ("%", "localhost"):
                    cur.execute("CREATE USER IF NOT EXISTS %s@%s IDENTIFIED BY %s",
                                (user, host, password))
                    # Re-running with a new password must take effect too.
                    cur.execute("ALTER USER %s@%s IDENTIFIED BY %s", (user, host, password))
                    for grant in grants:
                        # Grant bodies are trusted literals from our own code/config.
                        cur.execute(f"GRANT {grant} TO %s@%s", (user, host))
                cur.execute("FLUSH PRIVILEGES")
        finally:
            conn.close()
        return self.conn_params(user, password)

    # -- misc ----------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "mariadb",
            "name": self.name,
            "host": self.host,
            "port": self.port,
            "pid": self.pid,
            "server_id": self.server_id,
            "binlog": self.binlog,
            "service_dir": str(self.service_dir),
            "datadir": str(self.datadir),
            "socket": str(self.socket_path),
            "error_log": str(self.error_log),
            "root_user": self.root_user,
            "root_password": self.root_password,
        }

    def __enter__(self) -> "MariaDBServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"MariaDBServer(name={self.name!r}, port={self.port}, pid={self.pid})"


# --------------------------------------------------------------------------- MySQL


REPO_ROOT = Path(__file__).resolve().parent.parent
MYSQL_DIR_ENV = "MYSQL_CDC_MYSQL_DIR"


def mysql_dir() -> Path:
    """Where ``scripts/install_mysql.sh`` unpacked MySQL (``make mysql``)."""
    return Path(os.environ.get(MYSQL_DIR_ENV) or REPO_ROOT / ".local" / "mysql")


def mysql_available() -> bool:
    return (mysql_dir() / "bin" / "mysqld").is_file()


class MySQLServer(MariaDBServer):
    """A throw-away MySQL server (sid's mysql-9.x, unpacked by ``scripts/install_mysql.sh``).

    Same layout and API as MariaDBServer. It runs with MySQL's own defaults where they matter
    to users: GTIDs on, ``caching_sha2_password`` only (no mysql_native_password), no TLS
    required. Row metadata is set to FULL for a leader (MySQL's default is MINIMAL, which
    capture's preflight refuses).
    """

    def __init__(self, *args: Any, extra_args: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init__(*args, extra_args=extra_args, **kwargs)
        self.install = mysql_dir()
        self.root = self.install / "root"

    def _mysqld(self) -> list[str]:
        binary = self.install / "bin" / "mysqld"
        if not binary.is_file():
            raise ServiceError(f"no MySQL at {self.install}: run `make mysql` (scripts/install_mysql.sh) first")
        return [
            str(binary),
            "--no-defaults",
            f"--basedir={self.root / 'usr'}",
            f"--lc-messages-dir={self.root / 'usr' / 'share' / 'mysql'}",
            f"--plugin-dir={self.root / 'usr' / 'lib' / 'mysql' / 'plugin'}",
            "--user=root",
            f"--datadir={self.datadir}",
            f"--secure-file-priv={self.service_dir}",  # the default, /var/lib/mysql-files, is not ours
        ]

    def _server_args(self) -> list[str]:
        args = self._mysqld() + self._common_args() + [
            "--mysqlx=OFF",
            "--gtid-mode=ON",
            "--enforce-gtid-consistency=ON",
        ]
        if self.binlog:
            args += [
                f"--log-bin={self.datadir}/binlog",
                # binlog_format is deprecated on MySQL 8.0.34+ and ROW is its only sane value
                "--binlog-row-image=FULL",
                "--binlog-row-metadata=FULL",
            ]
        else:
            args += ["--skip-log-bin"]
        return args + list(self.extra_args)

    # -- replication (MySQL GTID auto-positioning; a replica logs what it applies by default) --

    def replicate_from(self, source: "MariaDBServer") -> None:
        """Become a GTID replica of ``source`` from its current GTIDs (tests before may have
        purged its first binlogs): what it executed so far counts as purged here."""
        gtids = str(source.scalar("SELECT @@GLOBAL.gtid_executed")).replace("\n", "")
        self.run_sql([
            self.STOP_REPLICATION, self.RESET_REPLICATION, "RESET BINARY LOGS AND GTIDS", f"SET GLOBAL gtid_purged = '{gtids}'",
            f"CHANGE REPLICATION SOURCE TO SOURCE_HOST='{source.host}', SOURCE_PORT={source.port}, "
            f"SOURCE_USER='{source.root_user}', SOURCE_PASSWORD='{source.root_password}', SOURCE_AUTO_POSITION=1, "
            "GET_SOURCE_PUBLIC_KEY=1",
            "START REPLICA",
        ])

    def wait_for(self, source: "MariaDBServer", timeout: float = 60.0) -> None:
        gtids = str(source.scalar("SELECT @@GLOBAL.gtid_executed")).replace("\n", "")
        if self.scalar(f"SELECT WAIT_FOR_EXECUTED_GTID_SET('{gtids}', {int(timeout)})") != 0:
            raise RuntimeError(f"{self.name} did not execute {gtids} within {timeout} s")

    STOP_REPLICATION, RESET_REPLICATION = "STOP REPLICA", "RESET REPLICA ALL"
    IDENTITY = "@@GLOBAL.server_uuid"

    def _install_db(self) -> None:
        self.datadir.mkdir(parents=True)
        self.datadir.rmdir()  # mysqld --initialize wants to create the datadir itself
        # root@localhost is all --initialize creates, and under --skip-name-resolve a TCP login
        # from 127.0.0.1 is not "localhost": add root@'%' (empty password until _secure()).
        init = self.service_dir / "init.sql"
        init.write_text(
            "CREATE USER 'root'@'%' IDENTIFIED BY '';\n"
            "GRANT ALL PRIVILEGES ON *.* TO 'root'@'%' WITH GRANT OPTION;\n"
        )
        cmd = self._mysqld() + [
            "--initialize-insecure", f"--init-file={init}", f"--log-error={self.service_dir / 'install-db.log'}",
        ]
        res = subprocess.run(cmd, capture_output=True, text=True, cwd=self.service_dir)
        if res.returncode != 0:
            raise ServiceError(
                f"mysqld --initialize failed for {self.name} (rc={res.returncode}):\n"
                + (res.stdout + res.stderr)[-2000:] + _tail(self.service_dir / "install-db.log")
            )

    def _secure(self) -> None:
        """Give root a password on every address it can log in from."""
        conn = pymysql.connect(host=self.host, port=self.port, user="root", password="", autocommit=True)
        try:
            with conn.cursor() as cur:
                cur.execute("SET SESSION sql_log_bin = 0")  # see MariaDBServer._secure()
                for host in ("%", "localhost"):
                    cur.execute("ALTER USER 'root'@%s IDENTIFIED BY %s", (host, self.root_password))
        finally:
            conn.close()

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "kind": "mysql"}

    def __repr__(self) -> str:
        return f"MySQLServer(name={self.name!r}, port={self.port}, pid={self.pid})"


class _PortInUse(Exception):
    pass


# --------------------------------------------------------------------------- Spark standalone


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
        env = _child_env(str(self.service_dir))
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
                env=self._env(), start_new_session=True, preexec_fn=_make_preexec(self.die_with_parent),
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
        logs = "\n".join(f"--- {n}\n{_tail(self.service_dir / n)}" for n in ("master.log", "worker.log"))
        self.stop()
        raise ServiceError(f"the Spark cluster did not get a live worker within {self.start_timeout}s\n{logs}")

    def stop(self, timeout: float = 30.0) -> None:
        procs, self._procs = self._procs, []
        for proc in reversed(procs):  # the worker first; its group holds the executors it started
            _terminate(proc.pid, proc, timeout, group=True)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "spark", "master_url": self.master_url, "web_url": self.web_url,
                "pids": [p.pid for p in self._procs], "service_dir": str(self.service_dir)}

    def __enter__(self) -> "SparkStandaloneCluster":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# --------------------------------------------------------------------------- moto S3


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
        _stop_stale(self.pid_file, str(self.service_dir), group=True)
        if self.service_dir.exists():
            shutil.rmtree(self.service_dir)
        self.service_dir.mkdir(parents=True)
        attempts = 1 if self._fixed_port is not None else 3
        for attempt in range(1, attempts + 1):
            if self._fixed_port is None:
                self.port = free_port()
            try:
                self._spawn_and_wait()
                break
            except _PortInUse:
                if attempt == attempts:
                    raise ServiceError(
                        f"moto: port {self.port} in use\n{_tail(self.log_file)}"
                    ) from None
        return self

    def _spawn_and_wait(self) -> None:
        log_size = self.log_file.stat().st_size if self.log_file.exists() else 0
        env = _child_env(str(self.service_dir))
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
                preexec_fn=_make_preexec(self.die_with_parent),
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
                    raise _PortInUse()
                raise ServiceError(
                    f"moto server exited with rc={rc} during startup; log tail:\n"
                    f"{_tail(self.log_file)}"
                )
            if self._http_up():
                return
            time.sleep(0.1)
        self.stop()
        raise ServiceError(
            f"moto server did not answer on {self.endpoint_url} within "
            f"{self.start_timeout}s; log tail:\n{_tail(self.log_file)}"
        )

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM the server's process group, then SIGKILL. Safe to call repeatedly."""
        proc, pid = self._proc, self.pid
        self._proc = None
        self.pid = None
        if proc is not None:
            _terminate(proc.pid, proc, timeout, group=True)
        elif pid is not None:
            if _pid_has_marker(pid, str(self.service_dir)):
                _terminate(pid, None, timeout, group=True)
        else:
            _stop_stale(self.pid_file, str(self.service_dir), group=True)

    def is_running(self) -> bool:
        if self._proc is not None:
            return self._proc.poll() is None
        return self.pid is not None and _pid_alive(self.pid)

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


# --------------------------------------------------------------------------- CLI

SERVICES_FILE = "services.json"


def _services_path(d: Path) -> Path:
    return d / SERVICES_FILE


def _write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


def _stop_recorded(entry: dict[str, Any]) -> str:
    """Stop one services.json entry by pid (only if the pid still belongs to it)."""
    pid = entry.get("pid")
    marker = entry.get("service_dir")
    if not pid or not marker:
        return "no pid"
    if not _pid_alive(pid):
        return "not running"
    if not _pid_has_marker(pid, marker):
        return f"pid {pid} is not ours any more; left alone"
    _terminate(pid, None, group=(entry.get("kind") == "moto_s3"))
    return "stopped" if not _pid_alive(pid) else "STILL RUNNING"


def cmd_down(d: Path, clean: bool = False, quiet: bool = False) -> int:
    path = _services_path(d)
    if path.exists():
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            data = {}
        for key, entry in data.get("services", {}).items():
            result = _stop_recorded(entry)
            if not quiet:
                print(f"{key}: {result}")
        path.unlink()
    elif not quiet:
        print(f"no {path}; nothing recorded")
    # Also catch servers whose start was interrupted before services.json was written.
    for name in ("leader", "follower"):
        _stop_stale(d / name / "mariadbd.pid", str((d / name).resolve()))
    _stop_stale(d / "moto_s3" / "moto.pid", str((d / "moto_s3").resolve()), group=True)
    if clean:
        for name in ("leader", "follower", "moto_s3"):
            shutil.rmtree(d / name, ignore_errors=True)
    return 0


def cmd_up(args: argparse.Namespace) -> int:
    d: Path = args.dir
    d.mkdir(parents=True, exist_ok=True)
    cmd_down(d, quiet=True)  # stale services from a previous run

    started: list[MariaDBServer | MotoS3Server] = []
    try:
        t0 = time.monotonic()
        leader = MariaDBServer(d, "leader", server_id=1, binlog=True, port=args.leader_port)
        started.append(leader.start())
        follower = MariaDBServer(d, "follower", server_id=2, binlog=False, port=args.follower_port)
        started.append(follower.start())
        leader_user = leader.create_user(
            "cdc_leader", args.leader_password,
            ["REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.*"],
        )
        follower_user = follower.create_user(
            "cdc_follower", args.follower_password, ["ALL PRIVILEGES ON *.*"],
        )
        services: dict[str, Any] = {
            "leader": {**leader.to_dict(), "user": leader_user["user"],
                       "password": leader_user["password"]},
            "follower": {**follower.to_dict(), "user": follower_user["user"],
                         "password": follower_user["password"]},
        }
        if args.s3:
            s3 = MotoS3Server(d, port=args.s3_port)
            started.append(s3.start())
            services["s3"] = s3.to_dict()
        data = {"dir": str(d), "started_at": time.time(),
                "startup_seconds": round(time.monotonic() - t0, 2), "services": services}
        _write_json_atomic(_services_path(d), data)
    except BaseException:
        for svc in reversed(started):
            with contextlib.suppress(Exception):
                svc.stop()
        raise
    print(json.dumps(data, indent=2, sort_keys=True))
    return 0


def cmd_status(d: Path) -> int:
    path = _services_path(d)
    if not path.exists():
        print(f"no {path}: services are down")
        return 1
    data = json.loads(path.read_text())
    ok = True
    for key, e in data.get("services", {}).items():
        alive = bool(e.get("pid")) and _pid_alive(e["pid"]) and _pid_has_marker(e["pid"], e["service_dir"])
        detail = ""
        if alive and e.get("kind") == "mariadb":
            try:
                c = pymysql.connect(host=e["host"], port=e["port"], user=e["root_user"],
                                    password=e["root_password"], connect_timeout=3)
                with c.cursor() as cur:
                    cur.execute("SELECT @@version, @@log_bin")
                    ver, log_bin = cur.fetchone()
                c.close()
                detail = f"version={ver} log_bin={log_bin}"
            except pymysql.MySQLError as exc:
                alive, detail = False, f"connect failed: {exc}"
        elif alive and e.get("kind") == "moto_s3":
            up = MotoS3Server(d, port=e["port"])._http_up()
            alive, detail = up, e["endpoint_url"] if up else "no HTTP answer"
        ok &= alive
        print(f"{key:9s} {'UP' if alive else 'DOWN':5s} pid={e.get('pid')} "
              f"port={e.get('port')} {detail}")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start leader+follower MariaDB (and moto S3 with --s3)")
    up.add_argument("--dir", type=Path, required=True)
    up.add_argument("--s3", action="store_true", help="also start a moto S3 server")
    up.add_argument("--leader-port", type=int)
    up.add_argument("--follower-port", type=int)
    up.add_argument("--s3-port", type=int)
    up.add_argument("--leader-password", default="cdc_leader_pw")
    up.add_argument("--follower-password", default="cdc_follower_pw")
    down = sub.add_parser("down", help="stop services recorded in DIR/services.json")
    down.add_argument("--dir", type=Path, required=True)
    down.add_argument("--clean", action="store_true", help="also delete datadirs/logs")
    st = sub.add_parser("status", help="show whether recorded services are up")
    st.add_argument("--dir", type=Path, required=True)
    args = p.parse_args(argv)
    args.dir = args.dir.resolve()
    if args.command == "up":
        try:
            return cmd_up(args)
        except ServiceError as exc:
            print(f"ERROR: {exc}", file=sys.stderr)
            return 1
    if args.command == "down":
        return cmd_down(args.dir, clean=args.clean)
    return cmd_status(args.dir)


if __name__ == "__main__":
    sys.exit(main())
