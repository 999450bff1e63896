"""How a MySQL or MariaDB server (a leader, or a MySQL follower) is reached: ``MySQLSettings``,
built from an Airflow connection on the Airflow side (``hooks.connections``) and carried to the
merge job in its secrets file."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class MySQLSettings:
    host: str
    port: int = 3306
    user: str = "root"
    password: str = field(default="", repr=False)  # kept out of repr: settings objects get logged
    conn_id: str | None = None  # the Airflow connection these came from, for error messages

    def describe(self, role: str) -> str:
        """``the follower at db2:3306 as 'cdc' (Airflow connection 'mysql_follower')``."""
        origin = f" (Airflow connection {self.conn_id!r})" if self.conn_id else ""
        return f"the {role} at {self.host}:{self.port} as {self.user!r}{origin}"

    def connect(self, **kwargs):
        import pymysql

        options = {"charset": "utf8mb4", "autocommit": True, "connect_timeout": 10, **kwargs}
        return pymysql.connect(host=self.host, port=self.port, user=self.user, password=self.password, **options)

    def replication_settings(self) -> dict:
        """The form mysql-replication's BinLogStreamReader takes."""
        return {"host": self.host, "port": self.port, "user": self.user, "password": self.password}


# "No checkpoint yet" as the server says it: the row, the table or the whole schema is absent.
# MariaDB answers a query on a missing schema with 1146 (no such table), MySQL with 1049 (unknown
# database); PyMySQL raises 1146 as ProgrammingError and 1049 as OperationalError, so the test is
# on the code, never on the exception class.
_ER_BAD_DB, _ER_NO_SUCH_TABLE = 1049, 1146


def is_absent(exc: Exception) -> bool:
    """Whether a server error says the database or the table does not exist."""
    return bool(exc.args) and exc.args[0] in (_ER_BAD_DB, _ER_NO_SUCH_TABLE)
