"""Looking up the Airflow connections a pipeline names, with errors that name them.

Airflow's own lookups fall back silently in places (``S3Hook`` switches to an empty connection,
``SparkSubmitHook`` to ``yarn``); for a CDC pipeline a missing connection is a configuration error,
so every hook here resolves its connection through these two functions first.
"""

from __future__ import annotations

from functools import cached_property
from typing import ClassVar, Collection

import pymysql
from airflow.sdk import BaseHook, Connection
from airflow.sdk.exceptions import AirflowException, AirflowNotFoundException
from airflow.sdk.log import mask_secret

from ..mysql_server import MySQLSettings

MYSQL_CONN_TYPES = ("mysql", "generic")  # "generic": creatable in the UI without the mysql provider


class ConnectionConfigError(AirflowException):
    """A connection exists but cannot be used as configured; the message names it."""


def _not_found(role: str, conn_id: str | None, cause: Exception | None = None) -> AirflowNotFoundException:
    if not conn_id:
        return AirflowNotFoundException(f"no {role} connection id was given")
    env = "AIRFLOW_CONN_" + conn_id.upper().replace("-", "_")
    return AirflowNotFoundException(
        f"{role} connection {conn_id!r} is not defined: create it (Admin > Connections, or "
        f"`airflow connections add {conn_id} ...`) or set the environment variable {env}"
        + (f" ({cause})" if cause else "")
    )


def _check_type(conn: Connection, role: str, conn_types: Collection[str] | None) -> Connection:
    if conn_types and conn.conn_type not in conn_types:
        raise ConnectionConfigError(
            f"{role} connection {conn.conn_id!r} has type {conn.conn_type!r}; expected one of {sorted(conn_types)}"
        )
    return conn


def required_connection(conn_id: str | None, role: str, conn_types: Collection[str] | None = None) -> Connection:
    if not conn_id:
        raise _not_found(role, conn_id)
    try:
        conn = BaseHook.get_connection(conn_id)
    except AirflowNotFoundException as exc:
        raise _not_found(role, conn_id) from exc
    return _check_type(conn, role, conn_types)


async def arequired_connection(conn_id: str | None, role: str, conn_types: Collection[str] | None = None) -> Connection:
    """The same for triggers: the triggerer's event loop must not block on a connection lookup."""
    if not conn_id:
        raise _not_found(role, conn_id)
    try:
        conn = await BaseHook.aget_connection(conn_id)
    except AirflowNotFoundException as exc:
        raise _not_found(role, conn_id) from exc
    return _check_type(conn, role, conn_types)


def mysql_settings(conn: Connection, role: str) -> MySQLSettings:
    """MySQLSettings from a mysql connection: host, port (default 3306), login, password."""
    if not conn.host:
        raise ConnectionConfigError(f"{role} connection {conn.conn_id!r} has no host")
    if not conn.login:
        raise ConnectionConfigError(f"{role} connection {conn.conn_id!r} has no login (user name)")
    password = conn.password or ""
    if password:
        # The task SDK masks connection passwords it hands out; masking again is free and keeps the
        # guarantee when a hook is built from a Connection that came another way (tests, CLI).
        mask_secret(password)
    return MySQLSettings(host=conn.host, port=int(conn.port or 3306), user=conn.login, password=password,
                         conn_id=conn.conn_id)


class MySQLConnectionHook(BaseHook):
    """Base of the leader and follower hooks: MySQLSettings from a ``mysql`` connection.

    PyMySQL underneath (through ``MySQLSettings``), not the mysql provider: the provider pulls in
    ``mysqlclient``, which needs C headers to build, and capture and the merge job speak PyMySQL.
    """

    conn_name_attr = "mysql_conn_id"
    conn_type = "mysql"
    role: ClassVar[str]

    def __init__(self, mysql_conn_id: str | None = None):
        super().__init__()
        self.mysql_conn_id = mysql_conn_id or self.default_conn_name

    @cached_property
    def settings(self) -> MySQLSettings:
        return mysql_settings(required_connection(self.mysql_conn_id, self.role, MYSQL_CONN_TYPES), self.role)

    async def asettings(self) -> MySQLSettings:
        conn = await arequired_connection(self.mysql_conn_id, self.role, MYSQL_CONN_TYPES)
        return mysql_settings(conn, self.role)

    def get_conn(self) -> pymysql.connections.Connection:
        return self.settings.connect()
