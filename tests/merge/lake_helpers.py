"""Test helpers for a Delta Lake follower: a pipeline whose follower is a lake location (its state
in the lake, through ``DeltaStateStore``), the merge job as Airflow submits it for a lake, and the
comparison of the leader's tables with the lake's, read with delta-rs (never with the product's
own reader) at the consistent cut the state records."""

from __future__ import annotations

import datetime as dt
import math
import struct
import subprocess
from collections import Counter
from dataclasses import dataclass, fields
from decimal import Decimal
from pathlib import Path

import pyarrow as pa

from merge_helpers import Pipeline, _fetch, submit_job, table_names
from spark_under_test import SPARK_LINE
from mysql_cdc.contracts import ChangeBatch
from mysql_cdc.kinds.delta import follower_spec as delta_follower_spec
from mysql_cdc.kinds.delta.catalog import MetastoreRef
from mysql_cdc.kinds.delta.options import LakeOptions, PartitionBy
from mysql_cdc.packaging import MAINTAIN_JOB, MERGE_JOB
from mysql_cdc.job_secrets import JobSecrets
from mysql_cdc.kinds.delta.state import DeltaStateStore
from mysql_cdc.kinds.delta.state.location import LakeLocation
from mysql_cdc.kinds.delta.submit import submit_needs
from mysql_cdc.storage import StorageSpec


@dataclass
class LakePipeline(Pipeline):
    lake: StorageSpec | None = None
    changelog: tuple[str, ...] = ()  # db.table globs of the tables with a changelog table
    features: str = "standard"  # what the lake's tables are created with (kinds.delta.options.FEATURES)
    partition_by: PartitionBy = ()  # (db.table glob, its partition columns)
    soft_deletes: tuple[str, ...] = ()  # db.table globs of the tables that keep their deleted rows
    history: tuple[str, ...] = ()  # db.table globs of the tables that keep every version of each row
    catalog: MetastoreRef | None = None  # the Hive Metastore the merge registers the tables in

    @classmethod
    def of(cls, pipeline: Pipeline, lake: StorageSpec, changelog: tuple[str, ...] = (),
           features: str = "standard", partition_by: PartitionBy = (), soft_deletes: tuple[str, ...] = (),
           history: tuple[str, ...] = (), catalog: MetastoreRef | None = None) -> "LakePipeline":
        return cls(**{f.name: getattr(pipeline, f.name) for f in fields(Pipeline)}, lake=lake, changelog=changelog,
                   features=features, partition_by=partition_by, soft_deletes=soft_deletes, history=history,
                   catalog=catalog)

    @property
    def options(self) -> LakeOptions:
        return LakeOptions(self.changelog, self.features, self.partition_by, self.soft_deletes, self.history,
                           self.catalog)

    @property
    def state(self) -> DeltaStateStore:
        return DeltaStateStore(LakeLocation(self.lake))

    @property
    def secrets(self) -> JobSecrets:
        return JobSecrets(delta_follower_spec(self.lake, self.options), self.storage)

    def cut(self):
        from mysql_cdc.kinds.delta.state.cut import read_cut

        return read_cut(self.lake.uri, self.name, s3_options=dict(self.lake.options))


def lake_submit(pipeline: LakePipeline, batch: ChangeBatch, work_dir: Path, extra_env: dict | None = None,
                timeout: float = 400, conf: dict | None = None) -> subprocess.CompletedProcess:
    """The merge job for a lake follower as the merge task submits it: the zip, the Delta jars and
    properties (``SubmitNeeds``) and ``conf`` (a pipeline's spark_conf), the secrets in a 0600 file."""
    return _lake_job(pipeline, [str(MERGE_JOB), "--manifest-uri", pipeline.manifest_uri(batch)], work_dir,
                     extra_env=extra_env, timeout=timeout, conf=conf)


def lake_maintain(pipeline: LakePipeline, work_dir: Path, retain_hours: float) -> subprocess.CompletedProcess:
    """The lake maintenance job as its DAG's task submits it."""
    return _lake_job(pipeline, [str(MAINTAIN_JOB), "--pipeline", pipeline.name, "--retain-hours", str(retain_hours)],
                     work_dir)


def _lake_job(pipeline: LakePipeline, application: list[str], work_dir: Path, extra_env: dict | None = None,
              timeout: float = 400, conf: dict | None = None) -> subprocess.CompletedProcess:
    needs = submit_needs(SPARK_LINE)
    return submit_job(pipeline.secrets, application, work_dir, extra_env=extra_env, timeout=timeout, jars=needs.jars,
                      conf=[*needs.conf, *(conf or {}).items()], secret=pipeline.lake.options.get("aws_secret_access_key"))


# -- comparing the leader with the lake ---------------------------------------------------------


def leader_columns(leader, database: str, table: str) -> list[tuple[str, str]]:
    return [(r[0], r[1]) for r in _fetch(
        leader, "SELECT COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = "
        f"'{database}' AND TABLE_NAME = '{table}' ORDER BY ORDINAL_POSITION")]


def _float32(value):
    return struct.unpack("f", struct.pack("f", value))[0] if isinstance(value, float) else value


def _plain(value, mysql_type: str):
    """A value as both sides can hold it exactly: TIME as microseconds (the lake's BIGINT), an
    instant as UTC wall clock, DECIMAL beyond 38 digits from its exact text, FLOAT at its
    single precision."""
    if isinstance(value, dt.timedelta):
        return (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    if mysql_type == "decimal" and isinstance(value, str):
        return Decimal(value)
    if mysql_type == "float":
        return _float32(value)
    if isinstance(value, bytearray):
        return bytes(value)
    return value


def leader_rows(leader, database: str, table: str) -> Counter:
    columns = leader_columns(leader, database, table)
    rows = _fetch(leader, f"SELECT {', '.join(f'`{c}`' for c, _ in columns)} FROM `{database}`.`{table}`")
    return Counter(tuple(_plain(v, t) for v, (_, t) in zip(row, columns)) for row in rows)


def lake_rows(pipeline: LakePipeline, leader, database: str, table: str) -> Counter:
    """The lake table's rows at the consistent cut, read with delta-rs's own query engine."""
    from deltalake import QueryBuilder

    columns = leader_columns(leader, database, table)
    delta = pipeline.cut().tables[f"{database}.{table}"]
    # the lake's spelling of each column: MySQL's names ignore case, and a rename that changed only
    # a column's case leaves the lake's as it was
    spelled = {f.name.lower(): f.name for f in delta.schema().fields}
    selected = ", ".join('"' + spelled.get(c.lower(), c) + '"' for c, _ in columns)
    arrow = pa.table(QueryBuilder().register("t", delta).execute(f"SELECT {selected} FROM t").read_all())
    return Counter(tuple(_plain(v, t) for v, (_, t) in zip(row.values(), columns)) for row in arrow.to_pylist())


def assert_lake_equals_leader(pipeline: LakePipeline, database: str | None = None) -> None:
    """Every leader table of the database is in the cut with the same rows (as multisets), and the
    cut has no other table of it."""
    database = database or pipeline.database
    leader = pipeline.leader
    cut = pipeline.cut()
    in_cut = sorted(n.split(".", 1)[1] for n in cut.versions if n.split(".", 1)[0] == database)
    assert in_cut == table_names(leader, database), f"tables differ: lake {in_cut}"
    for table in in_cut:
        expected, actual = leader_rows(leader, database, table), lake_rows(pipeline, leader, database, table)
        missing, extra = expected - actual, actual - expected
        assert not missing and not extra, f"{table}: missing in the lake {dict(missing)}, extra {dict(extra)}"


def changelog(pipeline: LakePipeline, table: str) -> list[dict]:
    """The changelog table of ``pipeline.database.table``, read with delta-rs, in change order."""
    from deltalake import DeltaTable, QueryBuilder

    location = LakeLocation(pipeline.lake)
    delta = DeltaTable(location.changelog_uri(pipeline.name, pipeline.database, table),
                       storage_options=location.storage_options())
    return pa.table(QueryBuilder().register("t", delta).execute(
        "SELECT * FROM t ORDER BY _change_seq").read_all()).to_pylist()


# -- a workload and a reader's rows, for the tests that read a lake with the readers users have ------


def first_statements(db: str) -> list[str]:
    return [
        f"CREATE DATABASE {db}", f"USE {db}",
        "CREATE TABLE owner (id INT PRIMARY KEY, name VARCHAR(40) NOT NULL, since DATETIME(6) NULL,"
        " balance DECIMAL(12,2) NOT NULL, gone INT)",
        "CREATE TABLE pet (name VARCHAR(20), species VARCHAR(20), birth DATE)",
        "INSERT INTO owner VALUES (1, 'Harold', '2020-01-01 10:00:00.5', 10.25, 1), (2, 'Gwen', NULL, 0, 2),"
        " (3, 'Benny', '1999-12-31 23:59:59.999999', -3.5, 3)",
        "INSERT INTO pet VALUES ('Buffy', 'dog', '1989-05-13'), ('Buffy', 'dog', '1989-05-13'), ('Claws', 'cat', NULL)",
    ]


def later_statements(db: str) -> list[str]:
    return [
        f"USE {db}",
        "UPDATE owner SET name = 'Harold H', balance = balance + 1 WHERE id = 1",
        "UPDATE owner SET id = 30 WHERE id = 3",  # a key change
        "DELETE FROM owner WHERE id = 2",
        "DELETE FROM pet WHERE name = 'Buffy' LIMIT 1",  # one of two equal rows
        "ALTER TABLE owner RENAME COLUMN name TO full_name",
        "ALTER TABLE owner DROP COLUMN gone",
        "ALTER TABLE owner ADD COLUMN tier SMALLINT",
        "INSERT INTO owner VALUES (4, 'Ada', '2024-02-29 12:00:00', 99.99, 2)",
        "UPDATE owner SET tier = 1 WHERE id = 1",
        "INSERT INTO pet VALUES ('Whistler', 'bird', '1997-12-09')",
    ]


def python_value(value):
    """A pandas value as the others give it (a Timestamp as a datetime, a missing value as None)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if hasattr(value, "to_pydatetime"):  # pandas' Timestamp (NaT is caught by isna below)
        return None if str(value) == "NaT" else value.to_pydatetime()
    if hasattr(value, "item"):  # a numpy scalar
        return value.item()
    return value


def reader_rows(rows: list[dict], columns: list[tuple[str, str]]) -> Counter:
    """A reader's rows as ``leader_rows`` gives the leader's (column order and spelling the leader's)."""
    def row_tuple(row: dict) -> tuple:
        by_name = {k.lower(): v for k, v in row.items()}
        return tuple(_plain(python_value(by_name[c.lower()]), t) for c, t in columns)

    return Counter(row_tuple(r) for r in rows)
