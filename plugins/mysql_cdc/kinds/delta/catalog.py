"""The catalog a Delta follower's tables are named in: a Hive Metastore, over its Thrift API.

Why this catalog: it is the one every engine that reads Delta tables by name opens (Spark with
``spark.sql.catalogImplementation=hive``, Trino's and Starburst's ``delta_lake`` connector, Flink,
Hive itself), it is self-hosted (a Java server on a MySQL/MariaDB/PostgreSQL database), and AWS
Glue speaks the same table model, so a Glue catalog would plug in here as a second ``Catalog``
with the same entries. Unity Catalog OSS is the other Delta catalog; it is not published where
this project installs from (Maven Central, PyPI).

What an entry is: a Delta table's name pointing at its location, written as Spark writes a Delta
table it is told the location of (``CREATE TABLE db.t USING delta LOCATION '...'``): an external
table whose ``spark.sql.sources.provider`` is ``delta``, whose location is its serde's ``path``
(where Spark and Trino look) and whose columns are left to the Delta log. So a schema change on
the leader changes nothing here: every engine reads the columns from the table's log, at the
version it reads. The merge keeps the entries equal to the consistent cut's tables after every
run (``sync``): a created table is registered, a dropped one unregistered, a renamed one both.
An entry carries the pipeline that owns it (``mysql_cdc_pipeline``); the merge never touches an
entry it does not own, and refuses to replace one (another pipeline's, or a user's table).

The Thrift bindings are Hive's own IDL as pyiceberg ships them (``hive_metastore``, the module
pyiceberg's Hive catalog uses), on the ``thrift`` package."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Mapping
from urllib.parse import urlparse

log = logging.getLogger(__name__)

OWNER_PARAM = "mysql_cdc_pipeline"  # the pipeline whose merge registered an entry
DELTA_PROVIDER = "delta"
CONFIG_KEYS = {"metastore_uri": "the Hive Metastore's Thrift address, such as thrift://metastore:9083"}
_EXAMPLE = "such as catalog: {metastore_uri: thrift://metastore:9083}"


class CatalogError(RuntimeError):
    """The catalog cannot be brought to the cut: unreachable, or a name held by an entry the
    pipeline does not own. The lake's tables and checkpoint are committed; the retry registers."""


@dataclass(frozen=True)
class MetastoreRef:
    """A Hive Metastore: its Thrift ``host`` and ``port`` (no secrets: a metastore that needs
    Kerberos is not supported)."""

    host: str
    port: int

    @property
    def uri(self) -> str:
        return f"thrift://{self.host}:{self.port}"

    @classmethod
    def from_config(cls, value: Any) -> "MetastoreRef | None":
        """The ``catalog`` key of a Delta follower's section (absent or null: no catalog)."""
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise ValueError(f"catalog: must be a mapping, {_EXAMPLE}; got {value!r}")
        unknown = sorted(set(value) - set(CONFIG_KEYS))
        if unknown:
            known = "; ".join(f"{k} ({v})" for k, v in CONFIG_KEYS.items())
            raise ValueError(f"catalog.{unknown[0]}: unknown key; the keys are {known}")
        return cls.from_uri(value.get("metastore_uri"))

    @classmethod
    def from_uri(cls, uri: Any) -> "MetastoreRef":
        parsed = urlparse(uri.strip()) if isinstance(uri, str) else None
        try:
            port = parsed.port if parsed else None
        except ValueError:
            port = None
        if parsed is None or parsed.scheme != "thrift" or not parsed.hostname or port is None or parsed.path not in ("", "/"):
            raise ValueError(f"catalog.metastore_uri: must be thrift://host:port, {_EXAMPLE}; got {uri!r}")
        return cls(parsed.hostname, port)


@dataclass(frozen=True)
class CatalogChanges:
    """What one ``sync`` did, by ``db.table``."""

    registered: list[str] = field(default_factory=list)
    moved: list[str] = field(default_factory=list)
    unregistered: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.registered or self.moved or self.unregistered)


def delta_table_entry(database: str, table: str, path: str, pipeline: str):
    """The metastore's entry for the Delta table at ``path`` (``s3a://`` or ``file:``, as Spark
    spells it), as Spark's DeltaCatalog writes it for ``CREATE TABLE ... USING delta LOCATION``: an
    external table, no columns of its own (the placeholder column Spark writes for a data source
    table), the location in the serde's ``path``. The storage descriptor's own location is left to
    the metastore (it makes a directory there, in its warehouse), as Spark leaves a placeholder."""
    from hive_metastore.ttypes import FieldSchema, SerDeInfo, StorageDescriptor, Table

    storage = StorageDescriptor(
        cols=[FieldSchema("col", "array<string>", "from deserializer")], location=None,
        inputFormat="org.apache.hadoop.mapred.SequenceFileInputFormat",
        outputFormat="org.apache.hadoop.hive.ql.io.HiveSequenceFileOutputFormat", compressed=False, numBuckets=-1,
        serdeInfo=SerDeInfo(serializationLib="org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe",
                            parameters={"path": path, "serialization.format": "1"}),
        bucketCols=[], sortCols=[], parameters={})
    return Table(tableName=table, dbName=database, owner="mysql_cdc", sd=storage, partitionKeys=[],
                 tableType="EXTERNAL_TABLE",
                 parameters={"EXTERNAL": "TRUE", "spark.sql.sources.provider": DELTA_PROVIDER,
                             "spark.sql.sources.schema": '{"type":"struct","fields":[]}', OWNER_PARAM: pipeline})


def entry_path(entry) -> str | None:
    return (entry.sd.serdeInfo.parameters or {}).get("path") if entry.sd and entry.sd.serdeInfo else None


class HiveMetastore:
    """One Thrift connection to a Hive Metastore (``with``)."""

    def __init__(self, ref: MetastoreRef, timeout_s: float = 30.0):
        self.ref = ref
        self.timeout_s = timeout_s
        self._transport = None
        self.client = None

    def __enter__(self) -> "HiveMetastore":
        from hive_metastore.ThriftHiveMetastore import Client
        from thrift.protocol import TBinaryProtocol
        from thrift.transport import TSocket, TTransport

        socket = TSocket.TSocket(self.ref.host, self.ref.port)
        socket.setTimeout(int(self.timeout_s * 1000))
        self._transport = TTransport.TBufferedTransport(socket)
        try:
            self._transport.open()
        except TTransport.TTransportException as exc:
            raise CatalogError(f"cannot reach the Hive Metastore at {self.ref.uri}: {exc}; check the follower's "
                               "catalog.metastore_uri and that the metastore is running") from None
        self.client = Client(TBinaryProtocol.TBinaryProtocol(self._transport))
        return self

    def __exit__(self, *exc) -> None:
        if self._transport is not None:
            self._transport.close()

    def _call(self, what: str, method: str, *args, absent: tuple[str, ...] = ()):
        """The metastore's ``method``; its refusal as a ``CatalogError`` naming ``what`` (Thrift's
        exceptions are frozen objects that cannot pass through a ``with`` block), or None when it
        is one of ``absent`` (exception class names: "no such table" is an answer)."""
        from thrift.Thrift import TException

        try:
            return getattr(self.client, method)(*args)
        except TException as exc:
            if type(exc).__name__ in absent:
                return None
            detail = getattr(exc, "message", None) or str(exc) or type(exc).__name__
            raise CatalogError(f"the Hive Metastore at {self.ref.uri} refused to {what}: "
                               f"{type(exc).__name__}: {detail}") from None

    def databases(self) -> set[str]:
        return set(self._call("list its databases", "get_all_databases"))

    def owned_tables(self, database: str, pipeline: str) -> list[str]:
        """The tables of ``database`` registered by ``pipeline``'s merges (the metastore filters by
        the entry's ``mysql_cdc_pipeline`` parameter)."""
        return list(self._call(f"list the tables of {database}", "get_table_names_by_filter", database,
                               f'hive_filter_field_params__{OWNER_PARAM} = "{pipeline}"', -1))

    def entry(self, database: str, table: str):
        return self._call(f"read {database}.{table}", "get_table", database, table, absent=("NoSuchObjectException",))

    def ensure_database(self, database: str) -> None:
        from hive_metastore.ttypes import Database

        self._call(f"create the database {database}", "create_database",
                   Database(name=database, description="", parameters={}), absent=("AlreadyExistsException",))

    def register(self, database: str, table: str, path: str, pipeline: str) -> None:
        self._call(f"register {database}.{table}", "create_table", delta_table_entry(database, table, path, pipeline))

    def move(self, database: str, table: str, path: str, pipeline: str) -> None:
        self._call(f"repoint {database}.{table}", "alter_table", database, table,
                   delta_table_entry(database, table, path, pipeline))

    def unregister(self, database: str, table: str) -> None:
        # an external table: the metastore drops the entry, never the table's files
        self._call(f"unregister {database}.{table}", "drop_table", database, table, False)


def sync(metastore: HiveMetastore, pipeline: str, tables: Mapping[str, str]) -> CatalogChanges:
    """Bring ``pipeline``'s entries to ``tables`` (``db.table`` -> the Delta table's path): register
    the missing, repoint the moved, unregister the ones no longer in the cut. Idempotent: a retry
    after a crash half-way does the rest. A name held by an entry the pipeline does not own is
    refused, naming it, and the other tables are still synced first."""
    changes, refused = CatalogChanges(), []
    wanted: dict[str, dict[str, str]] = {}
    for name, path in tables.items():
        database, table = name.split(".", 1)
        wanted.setdefault(database, {})[table] = path
    existing_databases = metastore.databases()
    for database in sorted(existing_databases | set(wanted)):
        owned = set(metastore.owned_tables(database, pipeline)) if database in existing_databases else set()
        for table in sorted(owned - set(wanted.get(database, {}))):
            metastore.unregister(database, table)
            changes.unregistered.append(f"{database}.{table}")
        for table, path in sorted(wanted.get(database, {}).items()):
            if table in owned:
                entry = metastore.entry(database, table)
                if entry_path(entry) != path:
                    metastore.move(database, table, path, pipeline)
                    changes.moved.append(f"{database}.{table}")
                continue
            metastore.ensure_database(database)
            existing = metastore.entry(database, table)
            if existing is not None:
                refused.append(f"{database}.{table} (owner {existing.owner!r}, "
                               f"{(existing.parameters or {}).get(OWNER_PARAM) or 'not a mysql-cdc pipeline'})")
                continue
            metastore.register(database, table, path, pipeline)
            changes.registered.append(f"{database}.{table}")
    if changes:
        log.info("catalog %s: registered %s, repointed %s, unregistered %s", metastore.ref.uri,
                 changes.registered or "none", changes.moved or "none", changes.unregistered or "none")
    if refused:
        raise CatalogError(
            f"the Hive Metastore at {metastore.ref.uri} already has {', '.join(refused)}, not registered by pipeline "
            f"{pipeline!r}; drop that entry (DROP TABLE in the metastore; an external table's files stay) or move this "
            "pipeline's tables to a catalog where the names are free; the lake's tables are committed and the next "
            "merge registers them")
    return changes
