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

from ..mysql_server import TLS_MODES, MySQLSettings, TlsSettings

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


_TLS_ABSENT_SAID: set[str] = set()  # connections whose lack of TLS settings was logged


def tls_settings(conn: Connection, role: str) -> TlsSettings | None:
    """The connection's TLS, from its extras as Airflow's MySQL connections carry them:
    ``ssl: {ca, cert, key}`` (paths of PEM files on this worker; a JSON string is read too) and
    ``ssl_mode`` (PREFERRED, REQUIRED, VERIFY_CA, VERIFY_IDENTITY; VERIFY_IDENTITY whenever a CA is
    given). The files are read here: their text travels in the settings, so the Spark job and the
    snapshot's workers verify the same way wherever they run. None: no TLS setting (PyMySQL's
    default: encrypted when the server offers it, the server never verified), said once in the log."""
    import json
    import logging

    extra = conn.extra_dejson
    ssl, mode = extra.get("ssl"), extra.get("ssl_mode")
    if isinstance(ssl, str):
        try:
            ssl = json.loads(ssl) if ssl.strip() else None
        except json.JSONDecodeError:
            raise ConnectionConfigError(f"{role} connection {conn.conn_id!r}: extra 'ssl' must be a mapping such as "
                                        "{\"ca\": \"/path/ca.pem\"}, got text that is not JSON") from None
    if ssl is None and mode is None:
        if conn.conn_id not in _TLS_ABSENT_SAID:
            _TLS_ABSENT_SAID.add(conn.conn_id)
            logging.getLogger("mysql_cdc.connections").warning(
                "%s connection %r has no TLS settings: PyMySQL encrypts when the server offers TLS and verifies "
                "nothing (a man in the middle is not detected), and a server without TLS gets the password and "
                "every row in clear text. Set its extras ssl.ca (and ssl_mode) to verify the server.",
                role, conn.conn_id)
        return None
    ssl = {} if ssl is None else ssl  # ssl_mode alone (REQUIRED: encrypted, not verified)
    if not isinstance(ssl, dict) or set(ssl) - {"ca", "cert", "key"}:
        raise ConnectionConfigError(f"{role} connection {conn.conn_id!r}: extra 'ssl' takes the keys ca, cert and "
                                    f"key (paths of PEM files), got {ssl!r:.120}")
    pem = {}
    for name, path in ssl.items():
        try:
            with open(path) as fh:
                pem[name] = fh.read()
        except (OSError, TypeError) as exc:
            raise ConnectionConfigError(
                f"{role} connection {conn.conn_id!r}: cannot read extra ssl.{name} {path!r} ({exc}): the file must "
                "exist on every Airflow worker that runs the pipeline's tasks") from None
    if "key" in pem:
        mask_secret(pem["key"])
    mode = (mode or ("VERIFY_IDENTITY" if "ca" in pem else "REQUIRED")).upper()
    try:
        return TlsSettings(mode=mode, **pem)
    except ValueError as exc:
        raise ConnectionConfigError(f"{role} connection {conn.conn_id!r}: {exc} (ssl_mode is one of "
                                    f"{list(TLS_MODES)})") from None


def mysql_settings(conn: Connection, role: str) -> MySQLSettings:
    """MySQLSettings from a mysql connection: host, port (default 3306), login, password, and its
    TLS (``tls_settings``)."""
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
                         conn_id=conn.conn_id, tls=tls_settings(conn, role))


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
