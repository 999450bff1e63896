"""How a MySQL or MariaDB server (a leader, or a MySQL follower) is reached: ``MySQLSettings``,
built from an Airflow connection on the Airflow side (``hooks.connections``) and carried to the
merge job in its secrets file."""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass, field

from .errors import PermanentError


# How a connection treats TLS (the Airflow MySQL connection's extra ``ssl_mode``, as MySQL's own
# clients name the modes): PREFERRED is PyMySQL's default (encrypt when the server can, verify
# nothing); REQUIRED encrypts or fails, verifying nothing; VERIFY_CA checks the server's
# certificate against the CA; VERIFY_IDENTITY also checks that it names the host (the default
# whenever a CA is given).
TLS_MODES = ("PREFERRED", "REQUIRED", "VERIFY_CA", "VERIFY_IDENTITY")


class TlsError(ConnectionError, PermanentError):
    """The server's certificate does not verify, or the TLS settings cannot be used."""


@dataclass(frozen=True)
class TlsSettings:
    """TLS of one server's connections. The certificates travel as their PEM text, not as paths:
    the Spark job's driver and executors and the snapshot's worker processes read them from the
    settings they are given, wherever they run, and no file name reaches a command line."""

    mode: str = "VERIFY_IDENTITY"
    ca: str | None = None  # PEM: the CA bundle the server's certificate must chain to
    cert: str | None = None  # PEM: a client certificate (servers that require X509)
    key: str | None = field(default=None, repr=False)  # PEM: the client certificate's key, a secret

    def __post_init__(self) -> None:
        if self.mode not in TLS_MODES:
            raise ValueError(f"ssl_mode: must be one of {list(TLS_MODES)}, got {self.mode!r}")
        if self.mode.startswith("VERIFY") and not self.ca:
            raise ValueError(f"ssl_mode {self.mode} needs the CA that signed the server's certificate (ssl.ca)")
        if bool(self.cert) != bool(self.key):
            raise ValueError("ssl.cert and ssl.key go together: give both or neither")

    @functools.cache
    def context(self):
        """The ``ssl.SSLContext`` PyMySQL is given (``ssl=``), built in memory from the PEM text, once
        per process and settings (a context is shared by every connection it wraps, from any thread)."""
        import os
        import ssl
        import tempfile

        context = ssl.create_default_context(cadata=self.ca) if self.ca else ssl.create_default_context()
        context.check_hostname = self.mode == "VERIFY_IDENTITY"
        context.verify_mode = ssl.CERT_REQUIRED if self.mode.startswith("VERIFY") else ssl.CERT_NONE
        if self.cert:
            # load_cert_chain reads files only: a private file for the moment it reads them
            with tempfile.TemporaryDirectory(prefix="mysql-cdc-tls-") as directory:
                cert, key = os.path.join(directory, "cert.pem"), os.path.join(directory, "key.pem")
                for path, text in ((cert, self.cert), (key, self.key)):
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                    with os.fdopen(fd, "w") as fh:
                        fh.write(text)
                context.load_cert_chain(cert, key)
        return context


@dataclass(frozen=True)
class MySQLSettings:
    host: str
    port: int = 3306
    user: str = "root"
    password: str = field(default="", repr=False)  # kept out of repr: settings objects get logged
    conn_id: str | None = None  # the Airflow connection these came from, for error messages
    tls: TlsSettings | None = field(default=None, repr=False)  # None: PyMySQL's default (PREFERRED)

    def __post_init__(self) -> None:
        if isinstance(self.tls, dict):  # from a spec's settings (``dataclasses.asdict``), as JSON carries it
            object.__setattr__(self, "tls", TlsSettings(**self.tls))

    def describe(self, role: str) -> str:
        """``the follower at db2:3306 as 'cdc' (Airflow connection 'mysql_follower')``."""
        origin = f" (Airflow connection {self.conn_id!r})" if self.conn_id else ""
        return f"the {role} at {self.host}:{self.port} as {self.user!r}{origin}"

    def _ssl(self) -> dict:
        return {"ssl": self.tls.context()} if self.tls is not None else {}

    def connect(self, **kwargs):
        import pymysql

        options = {"charset": "utf8mb4", "autocommit": True, "connect_timeout": 10, **self._ssl(), **kwargs}
        try:
            return connection_class()(host=self.host, port=self.port, user=self.user, password=self.password,
                                      **options)
        except pymysql.err.OperationalError as exc:
            raise self.tls_error(exc) or exc

    def tls_error(self, exc: BaseException) -> TlsError | None:
        """A ``TlsError`` naming the server, its connection and the fix, when ``exc`` (or what it was
        raised from) is a TLS failure (a certificate that does not verify, settings the server does
        not take); None otherwise, a connection closed during the handshake included."""
        import ssl

        cause, seen = exc, set()
        while cause is not None and id(cause) not in seen and not isinstance(cause, ssl.SSLError):
            seen.add(id(cause))
            cause = cause.__cause__ or cause.__context__ or next(
                (a for a in getattr(cause, "args", ()) if isinstance(a, BaseException)), None)
        if cause is None or isinstance(cause, (ssl.SSLEOFError, ssl.SSLZeroReturnError)):
            # (an EOF: the server closed the connection during the handshake, as a server being
            # killed or restarted does; a lost connection a retry may mend, not TLS settings to fix)
            return None
        where = f"{self.host}:{self.port}" + (f" (Airflow connection {self.conn_id!r})" if self.conn_id else "")
        if isinstance(cause, ssl.SSLCertVerificationError):
            fix = ("its certificate is not signed by the CA the connection names, or does not name this host: "
                   "set the connection's extra ssl.ca to the CA that signed the server's certificate "
                   "(ssl_mode VERIFY_CA checks the CA alone)")
        else:
            fix = "check the connection's extras ssl (ca, cert, key) and ssl_mode against the server's TLS setup"
        return TlsError(f"TLS to the server at {where} failed: {cause.reason or cause}; {fix}")

    def replication_settings(self) -> dict:
        """The form mysql-replication's BinLogStreamReader takes (PyMySQL's connect arguments; its
        ``pymysql_wrapper`` is ``connection_class()``)."""
        return {"host": self.host, "port": self.port, "user": self.user, "password": self.password, **self._ssl()}


@functools.cache
def connection_class():
    """PyMySQL's ``Connection`` with the PREFERRED mode's TLS context built once per process.

    Given no TLS settings, PyMySQL encrypts when the server offers TLS and verifies nothing (its
    PREFERRED mode), and builds that context afresh for every connection: loading the system's CA
    store it then never consults costs ~40 ms a connection (a merge opens ten or more). Passing
    a context of our own instead would make PyMySQL refuse a server without TLS (it treats any
    given context as REQUIRED), so the one built by PyMySQL's own recipe is kept and reused."""
    import pymysql

    class Connection(pymysql.connections.Connection):
        _preferred = None
        _lock = threading.Lock()

        def _create_ssl_ctx(self, sslp):
            if sslp:  # settings of the connection's own (``TlsSettings.context``): used as given
                return super()._create_ssl_ctx(sslp)
            with Connection._lock:
                if Connection._preferred is None:
                    Connection._preferred = super()._create_ssl_ctx(sslp)
                return Connection._preferred

    return Connection


# "No checkpoint yet" as the server says it: the row, the table or the whole schema is absent.
# MariaDB answers a query on a missing schema with 1146 (no such table), MySQL with 1049 (unknown
# database); PyMySQL raises 1146 as ProgrammingError and 1049 as OperationalError, so the test is
# on the code, never on the exception class.
_ER_BAD_DB, _ER_NO_SUCH_TABLE = 1049, 1146


def is_absent(exc: Exception) -> bool:
    """Whether a server error says the database or the table does not exist."""
    return bool(exc.args) and exc.args[0] in (_ER_BAD_DB, _ER_NO_SUCH_TABLE)
