"""The catalog an Iceberg follower's tables are in: Iceberg's JDBC catalog in a MySQL/MariaDB
database (its tables ``iceberg_tables`` and ``iceberg_namespace_properties``).

Why this catalog: it needs no server of its own, only a database on the kind of server a team that
runs this product already runs, and every Iceberg engine opens it by name: Spark, Trino and Flink
with Iceberg's ``JdbcCatalog``, Python with pyiceberg's ``SqlCatalog``, which writes the same two
tables. The merge job writes through pyiceberg; the connection is the product's own
(``MySQLSettings.connect``: TLS verified as the Airflow connection says), not a URL with a
password in it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ...mysql_server import MySQLSettings
from ...storage import StorageSpec


@dataclass(frozen=True)
class CatalogRef:
    """One Iceberg JDBC catalog: its ``name`` (the ``catalog_name`` its rows carry, the name engines
    give it: Spark's ``spark.sql.catalog.<name>``), the server and ``database`` holding its tables,
    and the ``warehouse`` new tables' files go under (its S3 options are secrets, as the server's
    password)."""

    name: str
    server: MySQLSettings
    database: str
    warehouse: StorageSpec

    def file_io_properties(self) -> dict[str, str]:
        """pyiceberg's FileIO properties for the warehouse: ``file_io.WarehouseFileIO`` and, on S3,
        the endpoint and credentials."""
        properties = {"py-io-impl": "mysql_cdc.kinds.iceberg.file_io.WarehouseFileIO"}
        if self.warehouse.scheme != "s3":
            return properties
        names = {"endpoint_url": "s3.endpoint", "region_name": "s3.region", "aws_access_key_id": "s3.access-key-id",
                 "aws_secret_access_key": "s3.secret-access-key", "aws_session_token": "s3.session-token"}
        return {**properties, **{names[k]: str(v) for k, v in self.warehouse.options.items() if k in names and v}}

    def open(self):
        """The catalog (pyiceberg), its tables created in ``database`` if the database has none."""
        from pyiceberg.catalog import MetastoreCatalog
        from pyiceberg.catalog.sql import SqlCatalog
        from sqlalchemy import create_engine

        server, database = self.server, self.database

        class _Catalog(SqlCatalog):
            # SqlCatalog makes its engine from a URL; ours connects with the product's settings
            # (TLS as configured; no password in a URL that an error message could print). Its
            # connections are pooled: every catalog call (a table's load, its commit) takes one, a
            # new connection costs a TCP and a TLS handshake and a login, and a pooled one is checked
            # with a ping when taken again
            def __init__(self, name: str, **properties: str):
                MetastoreCatalog.__init__(self, name, **properties)
                self.engine = create_engine("mysql+pymysql://", creator=lambda: server.connect(database=database,
                                                                                             autocommit=False),
                                            pool_pre_ping=True, pool_size=2, max_overflow=8)
                self._init_catalog()

        return _Catalog(self.name, uri="mysql+pymysql://", warehouse=self.warehouse.uri, **self.file_io_properties())

    def to_json(self) -> dict[str, Any]:
        from dataclasses import asdict

        return {"name": self.name, "server": asdict(self.server), "database": self.database,
                "warehouse": self.warehouse.to_json()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "CatalogRef":
        return cls(data["name"], MySQLSettings(**data["server"]), data["database"],
                   StorageSpec.from_json(data["warehouse"]))
