"""A throw-away MariaDB server in a temp datadir on a free loopback port (leader, follower, replica)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable

import pymysql

from .process import HOST, MAX_SOCKET_PATH, PortInUse, ServiceError, child_env, make_preexec, pid_alive, pid_has_marker, spawn_on_free_port, stop_stale, tail, terminate

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
        if len(str(candidate)) < MAX_SOCKET_PATH:
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
            # a temporary directory of its own: a server starting (or restarting) clears the
            # `#sql*` files in its tmpdir, and in a shared /tmp those are other servers' live
            # temporary tables ("Error on delete of '/tmp/#sql-temptable-...'")
            f"--tmpdir={self.tmp_dir}",
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
        # its own temporary directory: two installs at once in a shared /tmp (parallel test workers)
        # failed now and then deleting an Aria temp table ("Error on delete of '/tmp/#sql-temptable-...")
        tmpdir = self.service_dir / "install-tmp"
        tmpdir.mkdir(exist_ok=True)
        res = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "TMPDIR": str(tmpdir)})
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
        stop_stale(self.pid_file, str(self.service_dir))
        if self.service_dir.exists():
            shutil.rmtree(self.service_dir)
        self.service_dir.mkdir(parents=True)
        if self.socket_path.exists() and not str(self.socket_path).startswith(str(self.service_dir)):
            self.socket_path.unlink()
        self._install_db()

        spawn_on_free_port(self, self._spawn_and_wait, self.error_log, self.name)
        self._secure()
        return self

    @property
    def tmp_dir(self) -> Path:
        path = self.service_dir / "tmp"
        path.mkdir(parents=True, exist_ok=True)
        return path

    def _spawn_and_wait(self, restarted: bool = False) -> None:
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
                env=child_env(str(self.service_dir)),
                start_new_session=True,
                preexec_fn=make_preexec(self.die_with_parent),
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
                    raise PortInUse()
                raise ServiceError(
                    f"{self.__class__.__name__} {self.name} exited with rc={rc} during startup; "
                    f"error log tail:\n{tail(self.error_log)}"
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
                if exc.args[0] == 1045 and restarted:
                    return  # root has its password already: the server answered, it is up
                last_err = exc
                time.sleep(0.1)
        self.stop()
        raise ServiceError(
            f"{self.__class__.__name__} {self.name} did not accept connections on {self.host}:{self.port} "
            f"within {self.start_timeout}s (last error: {last_err}); error log tail:\n"
            f"{tail(self.error_log)}"
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
            terminate(proc.pid, proc, timeout)
        elif pid is not None:
            if pid_has_marker(pid, str(self.service_dir)):
                terminate(pid, None, timeout)
        else:
            stop_stale(self.pid_file, str(self.service_dir))

    def restart(self, crash: bool = False) -> None:
        """Stop the server (a clean shutdown, or with ``crash`` a SIGKILL: no shutdown at all, as
        when the machine loses power) and start it again on the same datadir and port."""
        if crash:
            self.kill()
        else:
            self.stop()
        self.start_again()

    def kill(self) -> None:
        """SIGKILL the server and leave it down (``start_again`` brings it back)."""
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait(timeout=30)
        self.stop()

    def start_again(self) -> None:
        """Start a stopped server on its datadir and port, keeping everything it had."""
        if not self.is_running():
            self._spawn_and_wait(restarted=True)

    def is_running(self) -> bool:
        if self._proc is not None:
            return self._proc.poll() is None
        return self.pid is not None and pid_alive(self.pid)

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
