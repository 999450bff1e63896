"""A real Trino on loopback: one coordinator that is its own worker, with catalogs as a data team's
Trino reads the lake followers by name: ``delta_lake`` on a Hive Metastore, ``iceberg`` on Iceberg's
JDBC catalog, both on an S3 endpoint.

Trino's server is installed by ``make readers`` into ``.local/readers/trino`` (``scripts/install_trino.sh``:
its tarball from Maven Central, only the Delta Lake and Iceberg plugins kept). Trino 476 needs Java 24 or newer:
``TRINO_JAVA_HOME``, else ``/usr/lib/jvm/temurin-25-jdk-amd64``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from .process import HOST, ServiceError, free_port, start_java_service, terminate

REPO = Path(__file__).resolve().parents[2]
TRINO_HOME = REPO / ".local" / "readers" / "trino"
JAVA_HOME = os.environ.get("TRINO_JAVA_HOME", "/usr/lib/jvm/temurin-25-jdk-amd64")


def delta_catalog(metastore_uri: str, s3) -> dict[str, str]:
    """A ``delta_lake`` catalog on a Hive Metastore and the S3 endpoint of ``s3`` (a started
    ``MotoS3Server``: its keys are moto's fake ones)."""
    return {"connector.name": "delta_lake", "hive.metastore.uri": metastore_uri, **_s3(s3)}


def iceberg_jdbc_catalog(name: str, server, database: str, warehouse: str, s3) -> dict[str, str]:
    """An ``iceberg`` catalog on Iceberg's JDBC catalog ``name`` in ``database`` of ``server`` (a
    ``MySQLSettings``), its tables' files on the S3 endpoint of ``s3``."""
    return {"connector.name": "iceberg", "iceberg.catalog.type": "jdbc",
            "iceberg.jdbc-catalog.catalog-name": name, "iceberg.jdbc-catalog.driver-class": "org.mariadb.jdbc.Driver",
            "iceberg.jdbc-catalog.connection-url": f"jdbc:mariadb://{server.host}:{server.port}/{database}",
            "iceberg.jdbc-catalog.connection-user": server.user,
            "iceberg.jdbc-catalog.connection-password": server.password,
            "iceberg.jdbc-catalog.default-warehouse-dir": warehouse, **_s3(s3)}


def _s3(s3) -> dict[str, str]:
    return {"fs.native-s3.enabled": "true", "s3.endpoint": s3.endpoint_url, "s3.region": s3.region_name,
            "s3.path-style-access": "true", "s3.aws-access-key": s3.aws_access_key_id,
            "s3.aws-secret-key": s3.aws_secret_access_key}


class TrinoServer:
    """Trino with the catalogs ``catalogs`` (name -> its properties, ``connector.name`` among them);
    more are added while it runs with ``create_catalog`` (Trino's dynamic catalog management)."""

    def __init__(self, base_dir: Path, catalogs: dict[str, dict[str, str]], name: str = "trino", *,
                 die_with_parent: bool = False, start_timeout: float = 180.0) -> None:
        self.catalogs = catalogs
        self.service_dir = Path(base_dir).resolve() / name
        self.die_with_parent = die_with_parent
        self.start_timeout = start_timeout
        self.host = HOST
        self.port = 0
        self._proc: subprocess.Popen | None = None

    def _write_etc(self) -> Path:
        etc = self.service_dir / "etc"
        (etc / "catalog").mkdir(parents=True)
        (etc / "config.properties").write_text(
            f"coordinator=true\nnode-scheduler.include-coordinator=true\nhttp-server.http.port={self.port}\n"
            f"discovery.uri=http://{self.host}:{self.port}\nquery.max-memory=512MB\ncatalog.management=dynamic\n")
        for catalog, properties in self.catalogs.items():
            (etc / "catalog" / f"{catalog}.properties").write_text("".join(f"{k}={v}\n" for k, v in properties.items()))
        return etc

    def create_catalog(self, name: str, properties: dict[str, str]) -> None:
        """``CREATE CATALOG`` while the server runs (what ``catalogs`` does at start)."""
        connector = properties["connector.name"]
        options = ", ".join(f"\"{k}\" = '{v}'" for k, v in properties.items() if k != "connector.name")
        self.query(f"CREATE CATALOG {name} USING {connector} WITH ({options})")

    def _info(self) -> dict[str, Any] | None:
        try:
            with urllib.request.urlopen(f"http://{self.host}:{self.port}/v1/info", timeout=2) as response:
                return json.loads(response.read())
        except (urllib.error.URLError, OSError, ValueError):
            return None

    def start(self) -> "TrinoServer":
        if not (TRINO_HOME / "lib").is_dir():
            raise ServiceError(f"Trino is not installed in {TRINO_HOME}: run `make readers`")
        java = Path(JAVA_HOME) / "bin" / "java"
        if not java.exists():
            raise ServiceError(f"Trino needs Java 24 or newer; {java} is missing: set TRINO_JAVA_HOME")
        if self.service_dir.exists():
            shutil.rmtree(self.service_dir)
        self.service_dir.mkdir(parents=True)
        self.port = free_port()
        etc = self._write_etc()
        self._proc = start_java_service(
            [str(java), "-Xmx1G", "-XX:+UseG1GC", "-XX:+ExitOnOutOfMemoryError", "-Djdk.attach.allowAttachSelf=true",
             "-Dnode.environment=test", "-Dnode.id=mysql-cdc-test", f"-Dnode.data-dir={self.service_dir / 'data'}",
             f"-Dconfig={etc / 'config.properties'}", f"-Dcatalog.config-dir={etc / 'catalog'}",
             f"-Dplugin.dir={TRINO_HOME / 'plugin'}", "-cp", f"{TRINO_HOME / 'lib'}/*", "io.trino.server.TrinoServer"],
            self.service_dir, self.service_dir / "server.log", self.die_with_parent, self._started, self.start_timeout,
            f"Trino on port {self.port}")
        return self

    def _started(self) -> bool:
        info = self._info()
        return info is not None and not info.get("starting", True)

    def query(self, sql: str) -> list[dict[str, Any]]:
        """The rows of ``sql``, column name -> value (Trino's Python client, as a user's notebook
        runs it)."""
        import trino

        with trino.dbapi.connect(host=self.host, port=self.port, user="mysql-cdc-test") as conn:
            cursor = conn.cursor()
            cursor.execute(sql)
            rows = cursor.fetchall()
            names = [d[0] for d in cursor.description or ()]  # none: a statement without a result
        return [dict(zip(names, row)) for row in rows]

    def stop(self, timeout: float = 30.0) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            terminate(proc.pid, proc, timeout, group=True)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "trino", "port": self.port, "catalogs": sorted(self.catalogs),
                "pid": self._proc.pid if self._proc else None, "service_dir": str(self.service_dir)}

    def __enter__(self) -> "TrinoServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
