"""A throw-away MySQL server (sid's mysql-9.x unpacked by scripts/install_mysql.sh), same API as MariaDB's."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pymysql

from .mariadb import MariaDBServer
from .process import ServiceError, tail

REPO_ROOT = Path(__file__).resolve().parents[2]
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
                + (res.stdout + res.stderr)[-2000:] + tail(self.service_dir / "install-db.log")
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
