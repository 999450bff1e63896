"""Connection settings shared by the Airflow side and the Spark job.

``MySQLSettings`` reaches a leader or a follower. ``JobSecrets`` is how the merge job receives its
secrets: a JSON file readable only by the job's user, named by the ``MYSQL_CDC_SECRETS_FILE``
environment variable. Never argv: argv shows in ``ps`` and in Airflow's task logs.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field

from .storage import S3Settings

SECRETS_ENV = "MYSQL_CDC_SECRETS_FILE"


@dataclass(frozen=True)
class MySQLSettings:
    host: str
    port: int = 3306
    user: str = "root"
    password: str = field(default="", repr=False)  # kept out of repr: settings objects get logged

    def connect(self, **kwargs):
        import pymysql

        options = {"charset": "utf8mb4", "autocommit": True, "connect_timeout": 10, **kwargs}
        return pymysql.connect(host=self.host, port=self.port, user=self.user, password=self.password, **options)

    def replication_settings(self) -> dict:
        """The form mysql-replication's BinLogStreamReader takes."""
        return {"host": self.host, "port": self.port, "user": self.user, "password": self.password}


class SecretsError(ValueError):
    pass


@dataclass(frozen=True)
class JobSecrets:
    follower: MySQLSettings
    s3: S3Settings | None = None

    def write(self, path: str) -> None:
        """Create ``path`` readable by its owner only, then fill it (never world-readable)."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump({"follower": asdict(self.follower), "s3": asdict(self.s3) if self.s3 else None}, fh)

    @classmethod
    def read(cls, path: str) -> "JobSecrets":
        try:
            with open(path) as fh:
                data = json.load(fh)
        except (OSError, json.JSONDecodeError) as exc:
            raise SecretsError(f"cannot read the job secrets file {path}: {exc}") from exc
        unknown = set(data) - {"follower", "s3"}
        if unknown or "follower" not in data:
            raise SecretsError(f"secrets file {path}: expected keys 'follower' and optional 's3', got {sorted(data)}")
        return cls(MySQLSettings(**data["follower"]), S3Settings(**data["s3"]) if data.get("s3") else None)

    @classmethod
    def from_env(cls) -> "JobSecrets":
        path = os.environ.get(SECRETS_ENV)
        if not path:
            raise SecretsError(
                f"{SECRETS_ENV} is not set: point it at a JSON file (mode 0600) holding "
                '{"follower": {"host", "port", "user", "password"}, "s3": {"endpoint_url", ...} | null}'
            )
        return cls.read(path)
