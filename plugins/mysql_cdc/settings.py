"""Connection settings shared by the Airflow side and the Spark job.

``MySQLSettings`` reaches a leader or a follower. ``JobSecrets`` is how the merge job receives its
secrets (the follower's spec and the batch store's ``StorageSpec``): a JSON file readable only
by the job's user, named by the ``MYSQL_CDC_SECRETS_FILE`` environment variable. Never argv: argv
shows in ``ps`` and in Airflow's task logs.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from .followers import FollowerSpec, FollowerSpecError
from .storage import StorageError, StorageSpec

SECRETS_ENV = "MYSQL_CDC_SECRETS_FILE"


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


def _check_options(options, least: dict[str, int]) -> None:
    """An options section's counts are whole numbers of at least ``least[name]``, and its
    ``decoder`` (every section that has one) is one of the two decoders."""
    for name, minimum in least.items():
        value = getattr(options, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ValueError(f"{name}: must be a whole number >= {minimum}, got {value!r}")
    decoder = getattr(options, "decoder", "native")
    if decoder not in ("native", "python"):
        raise ValueError(f"decoder: must be 'native' or 'python', got {decoder!r}")


@dataclass(frozen=True)
class SnapshotOptions:
    """How a snapshot copy is cut and run (the pipelines file's ``snapshot`` section)."""

    split_rows: int = 500_000  # rows per chunk of a table with an integer primary key
    workers: int = 2  # chunks copied at once, each in its own process and read view
    # who parses the copied rows: "native" (the compiled decoder, native/) or "python" (PyMySQL,
    # the reference the compiled one is tested against)
    decoder: str = "native"

    def __post_init__(self) -> None:
        _check_options(self, {"split_rows": 1, "workers": 1})


@dataclass(frozen=True)
class ExtractOptions:
    """How a long range is read (the pipelines file's ``extract`` section)."""

    workers: int = 2  # binlog files of a range read at once, each part by its own reader process
    # which decoder reads rows events: "native" (compiled, native/) or "python" (mysql-replication,
    # the reference the compiled one is tested against)
    decoder: str = "native"
    # binlog megabytes a part must have to be read by a process of its own: below it, starting
    # the process costs more than the compiled decoder takes to read the part (0: no minimum)
    min_part_mb: int = 64

    def __post_init__(self) -> None:
        _check_options(self, {"workers": 1, "min_part_mb": 0})


@dataclass(frozen=True)
class VerifyOptions:
    """The pipelines file's ``verify`` section."""

    schedule: str | None = "@daily"  # the verification DAG's schedule (null: manual runs only)
    chunk_rows: int = 100_000  # key values per checksum chunk
    rechecks: int = 2  # merges to wait for before a still-differing chunk counts as drift
    settle_timeout: float = 900.0  # seconds to wait for a merge before each recheck

    def __post_init__(self) -> None:
        _check_options(self, {"chunk_rows": 1, "rechecks": 0})
        timeout = self.settle_timeout
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise ValueError(f"settle_timeout: must be a positive number of seconds, got {timeout!r}")


@dataclass(frozen=True)
class MaintenanceOptions:
    """The pipelines file's ``maintenance`` section (a Delta Lake follower): the ``<name>_maintain``
    DAG compacts every table (``OPTIMIZE``) and deletes files older versions no longer need
    (``VACUUM``) past ``retain_hours`` (at least 1; Delta's own default is 168, a week)."""

    schedule: str | None = "@daily"
    retain_hours: float = 168.0

    def __post_init__(self) -> None:
        hours = self.retain_hours
        if isinstance(hours, bool) or not isinstance(hours, (int, float)) or hours < 1:
            raise ValueError(f"retain_hours: must be a number of hours >= 1, got {hours!r}")


class SecretsError(ValueError):
    pass


@dataclass(frozen=True)
class JobSecrets:
    """What the merge job is given in its secrets file: the follower's spec (its kind and
    settings, for its sink: ``mysql_cdc.followers``) and the batch store's ``StorageSpec``."""

    sink: FollowerSpec
    storage: StorageSpec

    def write(self, path: str) -> None:
        """Create ``path`` readable by its owner only, then fill it (never world-readable)."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump({"sink": self.sink.to_json(), "storage": self.storage.to_json()}, fh)

    @classmethod
    def read(cls, path: str) -> "JobSecrets":
        try:
            with open(path) as fh:
                data = json.load(fh)
        except (OSError, json.JSONDecodeError) as exc:
            raise SecretsError(f"cannot read the job secrets file {path}: {exc}") from exc
        if not isinstance(data, dict) or set(data) != {"sink", "storage"}:
            found = sorted(data) if isinstance(data, dict) else type(data).__name__
            raise SecretsError(f"secrets file {path}: expected the keys ['sink', 'storage'], got {found}")
        try:
            return cls(FollowerSpec.from_json(data["sink"], f"{path}: sink"),
                       StorageSpec.from_json(data["storage"], f"{path}: storage"))
        except (FollowerSpecError, StorageError) as exc:
            raise SecretsError(f"secrets file {path}: {exc}") from None

    @classmethod
    def from_env(cls) -> "JobSecrets":
        path = os.environ.get(SECRETS_ENV)
        if not path:
            raise SecretsError(
                f"{SECRETS_ENV} is not set: point it at a JSON file (mode 0600) holding "
                '{"sink": {"kind", "settings"}, "storage": {"uri", "options"}}'
            )
        return cls.read(path)
