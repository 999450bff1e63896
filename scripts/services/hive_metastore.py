"""A real Hive Metastore on loopback: Hive's own Thrift metastore server, on a database of one of
the project's MariaDB servers.

The server is Hive 2.3's (``org.apache.hadoop.hive.metastore.HiveMetaStore``), from the jars
pyspark ships (the Hive client Spark itself speaks), with the MariaDB JDBC driver that
``make readers`` fetches into ``.local/readers/hive-metastore``. Its schema is created before it
serves, by DataNucleus's SchemaTool from Hive's own ``package.jdo``: the metastore's lazy schema
creation on MariaDB can hang on its own table locks while a first client waits.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import zipfile
from pathlib import Path
from typing import Any

from .process import HOST, ServiceError, free_port, start_java_service, terminate

REPO = Path(__file__).resolve().parents[2]
DRIVER_DIR = REPO / ".local" / "readers" / "hive-metastore"

_SITE = """<configuration>
{properties}
</configuration>
"""


class HiveMetastoreServer:
    """Hive's metastore on ``thrift://127.0.0.1:<port>``, its tables in ``database`` of ``server``
    (a started ``MariaDBServer``; created here)."""

    def __init__(self, base_dir: Path, server, database: str = "hive_metastore", name: str = "hive_metastore", *,
                 die_with_parent: bool = False, start_timeout: float = 120.0) -> None:
        import pyspark

        self.jars = Path(pyspark.__file__).resolve().parent / "jars"
        self.server, self.database = server, database
        self.service_dir = Path(base_dir).resolve() / name
        self.die_with_parent = die_with_parent
        self.start_timeout = start_timeout
        self.host = HOST
        self.port = 0
        self._proc: subprocess.Popen | None = None

    @property
    def uri(self) -> str:
        return f"thrift://{self.host}:{self.port}"

    def _classpath(self) -> str:
        drivers = sorted(DRIVER_DIR.glob("mariadb-java-client-*.jar"))
        if not drivers:
            raise ServiceError(f"no MariaDB JDBC driver in {DRIVER_DIR}: run `make readers`")
        return ":".join([str(self.service_dir / "conf"), f"{self.jars}/*", str(drivers[-1])])

    def _jdo_properties(self) -> dict[str, str]:
        s = self.server
        return {
            # nullDatabaseMeansCurrent: DataNucleus asks the JDBC metadata for its tables with no
            # database named, and would otherwise find information_schema's (PARTITIONS, ...)
            "javax.jdo.option.ConnectionURL": f"jdbc:mariadb://{s.host}:{s.port}/{self.database}"
                                              "?nullDatabaseMeansCurrent=true",
            "javax.jdo.option.ConnectionDriverName": "org.mariadb.jdbc.Driver",
            "javax.jdo.option.ConnectionUserName": s.root_user,
            "javax.jdo.option.ConnectionPassword": s.root_password,
            "datanucleus.rdbms.datastoreAdapterClassName": "org.datanucleus.store.rdbms.adapter.MySQLAdapter",
            # the column names and id generation Hive's metastore uses (its own defaults, which
            # SchemaTool does not know of)
            "datanucleus.identifierFactory": "datanucleus1",
            "datanucleus.rdbms.useLegacyNativeValueStrategy": "true",
        }

    def _write_conf(self) -> None:
        conf = self.service_dir / "conf"
        conf.mkdir(parents=True)
        properties = {**self._jdo_properties(), "datanucleus.schema.autoCreateAll": "false",
                      "hive.metastore.schema.verification": "false", "hive.async.log.enabled": "false",
                      "hive.metastore.warehouse.dir": f"file://{self.service_dir}/warehouse"}
        (conf / "hive-site.xml").write_text(_SITE.format(properties="\n".join(
            f"<property><name>{k}</name><value>{v.replace('&', '&amp;')}</value></property>"
            for k, v in properties.items())))
        (self.service_dir / "schema.properties").write_text(
            "".join(f"{k}={v}\n" for k, v in self._jdo_properties().items()))
        with zipfile.ZipFile(self.jars / "hive-metastore-2.3.10.jar") as jar:
            (self.service_dir / "package.jdo").write_bytes(jar.read("package.jdo"))

    def _create_schema(self) -> None:
        with self.server.connect(user=self.server.root_user, password=self.server.root_password) as conn:
            with conn.cursor() as cur:
                cur.execute(f"DROP DATABASE IF EXISTS `{self.database}`")
                # latin1: the metastore's indexes on long names exceed utf8mb4's key length
                cur.execute(f"CREATE DATABASE `{self.database}` CHARACTER SET latin1")
        run = subprocess.run(
            ["java", "-cp", self._classpath(), "org.datanucleus.store.schema.SchemaTool", "-create", "-api", "JDO",
             "-props", str(self.service_dir / "schema.properties"), str(self.service_dir / "package.jdo")],
            cwd=self.service_dir, capture_output=True, text=True, timeout=300)
        if run.returncode != 0 or "completed successfully" not in run.stdout + run.stderr:
            raise ServiceError(f"the metastore's schema was not created:\n{(run.stdout + run.stderr)[-3000:]}")

    def _serving(self) -> bool:
        try:
            with socket.create_connection((self.host, self.port), timeout=1):
                return True
        except OSError:
            return False

    def start(self) -> "HiveMetastoreServer":
        if self.service_dir.exists():
            shutil.rmtree(self.service_dir)
        self.service_dir.mkdir(parents=True)
        self._write_conf()
        self._create_schema()
        self.port = free_port()
        self._proc = start_java_service(
            ["java", "-Xmx512m", "-Dlog4j2.contextSelector=org.apache.logging.log4j.core.selector.BasicContextSelector",
             "-cp", self._classpath(), "org.apache.hadoop.hive.metastore.HiveMetaStore", "-p", str(self.port)],
            self.service_dir, self.service_dir / "metastore.log", self.die_with_parent, self._serving,
            self.start_timeout, f"the Hive Metastore on {self.uri}")
        return self

    def stop(self, timeout: float = 30.0) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            terminate(proc.pid, proc, timeout, group=True)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "hive_metastore", "uri": self.uri, "database": self.database,
                "pid": self._proc.pid if self._proc else None, "service_dir": str(self.service_dir)}

    def __enter__(self) -> "HiveMetastoreServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
