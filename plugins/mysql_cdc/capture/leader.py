"""The leader server: where its binlog stands, what it still holds, and whether we may read it.

Works against MariaDB (10.5+) and MySQL 8.x; the statement that shows the current binlog position
differs (MySQL 8.2+ removed SHOW MASTER STATUS for SHOW BINARY LOG STATUS), so it is chosen from
the server's version, not by trial and error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator, Sequence

import pymysql

from ..contracts import BinlogPosition, PositionRange
from ..contracts.gtid_set import parse_gtid_set
from ..mysql_server import MySQLSettings
from .gtid import event_gtid
from ..errors import PermanentError
from ..retry_policy import TRANSIENT_SERVER_ERRORS, server_error_code
from .events import LeaderUnreachableError


class PreflightError(RuntimeError, PermanentError):
    """The leader cannot be captured as configured; the message says what to change."""


class PurgedPositionError(PreflightError):
    """The range starts in binlog the leader no longer has."""


@dataclass(frozen=True)
class BinlogFile:
    name: str
    size: int


def purged(position: BinlogPosition, files: Sequence[BinlogFile]) -> bool:
    """Whether ``position`` is gone from a leader whose binlog is ``files`` (SHOW BINARY LOGS):
    before its first file, or in a file it no longer lists. The one test of it, for the range
    preflight and for ``on_purged``."""
    return not files or position < BinlogPosition(files[0].name, 4) or position.file not in {f.name for f in files}


class Leader:
    def __init__(self, settings: MySQLSettings):
        self.settings = settings
        self._conn = None

    def __enter__(self) -> "Leader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    @property
    def conn(self):
        if self._conn is None:
            try:
                self._conn = self.settings.connect()
            except pymysql.err.OperationalError as exc:
                message = f"cannot connect to {self.settings.describe('leader')}: {exc.args[-1]}"
                if server_error_code(exc) in TRANSIENT_SERVER_ERRORS:  # down, restarting: the retry may find it
                    raise LeaderUnreachableError(message) from exc
                raise PreflightError(message) from exc  # refused: a password, a grant, TLS
        return self._conn

    def _rows(self, sql: str) -> list[tuple]:
        with self.conn.cursor() as cur:
            cur.execute(sql)
            return list(cur.fetchall())

    def _variable(self, name: str) -> str | None:
        rows = self._rows(f"SHOW GLOBAL VARIABLES LIKE '{name}'")
        return rows[0][1] if rows else None

    # -- what the server is ------------------------------------------------------------------

    @property
    def version(self) -> str:
        return self._rows("SELECT VERSION()")[0][0]

    @property
    def flavor(self) -> str:
        return "mariadb" if "mariadb" in self.version.lower() else "mysql"

    def _version_tuple(self) -> tuple[int, ...]:
        return tuple(int(x) for x in re.findall(r"\d+", self.version)[:3])

    # -- positions ------------------------------------------------------------------------------

    def _status_statement(self) -> str:
        if self.flavor == "mysql" and self._version_tuple() >= (8, 2):
            return "SHOW BINARY LOG STATUS"
        return "SHOW MASTER STATUS"

    def current_position(self) -> BinlogPosition:
        """The end of the leader's binlog: always a transaction boundary."""
        try:
            rows = self._rows(self._status_statement())
        except pymysql.err.OperationalError as exc:
            if exc.args[0] in (1227, 1045):  # access denied
                raise PreflightError(
                    f"user {self.settings.user!r} may not read the leader's binlog position: "
                    "GRANT REPLICATION CLIENT ON *.* TO it (MariaDB calls it BINLOG MONITOR)"
                ) from exc
            raise
        if not rows or not rows[0][0]:
            raise PreflightError(
                "binary logging is disabled on the leader: start it with --log-bin "
                "--binlog-format=ROW --binlog-row-image=FULL --binlog-row-metadata=FULL --server-id=N"
            )
        return BinlogPosition(rows[0][0], int(rows[0][1]))

    def current_gtid(self) -> str | None:
        if self.flavor == "mariadb":
            rows = self._rows("SELECT @@GLOBAL.gtid_binlog_pos")
            return rows[0][0] or None
        rows = self._rows("SELECT @@GLOBAL.gtid_executed")
        return (rows[0][0] or "").replace("\n", "") or None

    @property
    def leader_id(self) -> str:
        """Which server this is, for the positions taken on it: MySQL's server_uuid, MariaDB's
        server_id (a replica has its own, or it could not replicate)."""
        if self.flavor == "mysql":
            return self._rows("SELECT @@GLOBAL.server_uuid")[0][0]
        return str(self._rows("SELECT @@GLOBAL.server_id")[0][0])

    def has_gtids(self) -> bool:
        """MariaDB always logs GTIDs; MySQL with gtid_mode ON."""
        return self.flavor == "mariadb" or (self._variable("gtid_mode") or "OFF").upper() == "ON"

    def binlog_events(self, file: str, start: int = 4, page: int = 5000) -> Iterator[tuple[int, str, int, str]]:
        """``(position, event type, end position, info)`` of each event of ``file`` from ``start``,
        as SHOW BINLOG EVENTS lists them, a page at a time."""
        position = start
        while True:
            rows = self._rows_args(f"SHOW BINLOG EVENTS IN %s FROM %s LIMIT {int(page)}", (file, position))
            for row in rows:
                yield int(row[1]), row[2], int(row[4]), row[5] or ""
            if len(rows) < page:
                return
            position = int(rows[-1][4])

    def gtid_set_at(self, position: BinlogPosition) -> str | None:
        """The GTID set executed up to ``position`` (None: the leader has no GTIDs). MariaDB
        computes it (BINLOG_GTID_POS); on MySQL it is the file's Previous_gtids plus the GTIDs of
        the file before ``position``."""
        if not self.has_gtids():
            return None
        if self.flavor == "mariadb":
            found = self._rows_args("SELECT BINLOG_GTID_POS(%s, %s)", (position.file, position.offset))[0][0]
            if found is None:
                raise PreflightError(f"the leader has no binlog position {position} (SELECT BINLOG_GTID_POS is NULL)")
            return found
        executed = parse_gtid_set("mysql", "")
        for at, event_type, _, info in self.binlog_events(position.file):
            if event_type == "Previous_gtids":  # the file's first events: what came before it
                executed = parse_gtid_set("mysql", info.replace("\n", ""))
                continue
            gtid = event_gtid(info)
            if gtid is None:
                continue
            if at >= position.offset:
                break
            executed.add(gtid)
        return str(executed)

    def _rows_args(self, sql: str, args: tuple) -> list[tuple]:
        with self.conn.cursor() as cur:
            cur.execute(sql, args)
            return list(cur.fetchall())

    def binlog_files(self) -> list[BinlogFile]:
        try:
            rows = self._rows("SHOW BINARY LOGS")
        except pymysql.err.OperationalError as exc:
            if exc.args[0] == 1381:  # ER_NO_BINARY_LOGGING
                self.current_position()  # raises the explanatory error
            raise
        return [BinlogFile(r[0], int(r[1])) for r in rows]

    def earliest_position(self) -> BinlogPosition:
        files = self.binlog_files()
        if not files:
            self.current_position()
        # offset 4 is just past the magic number: the first event, a transaction boundary
        return BinlogPosition(files[0].name, 4)

    # -- preflight ------------------------------------------------------------------------------

    def check_settings(self) -> None:
        """Binlog on, ROW format, FULL row image, FULL row metadata; replication privileges."""
        if (self._variable("log_bin") or "OFF").upper() != "ON":
            raise PreflightError(
                "binary logging is disabled on the leader (log_bin=OFF): restart it with --log-bin "
                "--binlog-format=ROW --binlog-row-image=FULL --binlog-row-metadata=FULL --server-id=N"
            )
        expected = {"binlog_format": "ROW", "binlog_row_image": "FULL", "binlog_row_metadata": "FULL"}
        for name, want in expected.items():
            have = self._variable(name)
            if have is None:
                raise PreflightError(
                    f"the leader has no {name} setting (server {self.version}); mysql-cdc needs "
                    "MariaDB 10.5+ or MySQL 8.0+ with binlog row metadata"
                )
            if have.upper() != want:
                raise PreflightError(
                    f"leader {name} is {have}, mysql-cdc needs {want}: SET GLOBAL {name}='{want}' "
                    f"and put {name.replace('_', '-')}={want} in the server's config (new sessions "
                    "pick it up; already-written binlog keeps the old format)"
                )
        if self.flavor == "mysql":
            options = self._variable("binlog_row_value_options") or ""
            if "PARTIAL_JSON" in options.upper():
                raise PreflightError(
                    "leader binlog_row_value_options is PARTIAL_JSON: updates of JSON columns then carry only "
                    "the changed parts of the documents, which cannot be applied exactly. SET GLOBAL "
                    "binlog_row_value_options='' and remove it from the server's config"
                )
        self.check_privileges()

    def check_privileges(self) -> None:
        grants = " ".join(r[0] for r in self._rows("SHOW GRANTS")).upper()
        if "ALL PRIVILEGES ON *.*" in grants:
            return
        needed = {
            "REPLICATION SLAVE": ("REPLICATION SLAVE", "REPLICATION REPLICA"),
            "REPLICATION CLIENT": ("REPLICATION CLIENT", "BINLOG MONITOR", "SUPER"),
        }
        missing = [name for name, aliases in needed.items() if not any(a in grants for a in aliases)]
        if missing:
            raise PreflightError(
                f"leader user {self.settings.user!r} lacks {', '.join(missing)}: run "
                f"GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.* TO '{self.settings.user}'@'%'"
            )

    def is_purged(self, position: BinlogPosition) -> bool:
        """Whether the leader no longer holds the binlog at ``position`` (``purged``)."""
        return purged(position, self.binlog_files())

    def check_range(self, range_: PositionRange) -> None:
        """The range must still be on the leader and must not run past its current position."""
        files = self.binlog_files()
        names = [f.name for f in files]
        earliest = BinlogPosition(files[0].name, 4) if files else None
        if purged(range_.start, files):
            raise PurgedPositionError(
                f"start position {range_.start} is no longer on the leader: its binlog was purged "
                f"(earliest available position is {earliest}). The changes in between are lost to "
                "binlog capture. To recover, copy every table again: trigger the pipeline's DAG with conf "
                '{"resnapshot": ["*"]} (or set on_purged: snapshot in the pipelines file to do it '
                "automatically); then raise binlog_expire_logs_seconds so it does not happen again"
            )
        size = files[names.index(range_.start.file)].size
        if range_.start.offset > size:
            raise PreflightError(
                f"start position {range_.start} lies past the end of {range_.start.file} "
                f"({size} bytes): it is not a position this leader wrote"
            )
        current = self.current_position()
        if current < range_.end:
            raise PreflightError(
                f"end position {range_.end} is past the leader's current position {current}"
            )
