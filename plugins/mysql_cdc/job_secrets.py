"""How the Spark jobs receive their secrets: ``JobSecrets`` (the follower's spec and the batch
store's ``StorageSpec``), a JSON file readable only by the job's user, named by the
``MYSQL_CDC_SECRETS_FILE`` environment variable. Never argv: argv shows in ``ps`` and in Airflow's
task logs."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from .kinds import FollowerSpec, FollowerSpecError
from .storage import StorageError, StorageSpec
from .errors import PermanentError

SECRETS_ENV = "MYSQL_CDC_SECRETS_FILE"


class SecretsError(ValueError, PermanentError):
    pass


@dataclass(frozen=True)
class JobSecrets:
    """What the merge job is given in its secrets file: the follower's spec (its kind and
    settings, for its sink: ``mysql_cdc.kinds``) and the batch store's ``StorageSpec``."""

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
